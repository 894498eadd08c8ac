r"""Which choices make TokenGT and HOT fit small molecule sets: variants of
the training command's models trained side by side through the unmodified
command (``python -m torch_geometric_hot.train``) on offline targets, with
the final training loss, the test metric and the seconds per epoch of every
variant and target in one table.

Every variant is a model of the command with some constructor arguments
changed; the baselines (GIN, GPS) train in the same run. Run::

    python benchmarks/fit_ablations.py --targets qed,bertz,logp \
        --variants tokengt-lap,tokengt-lap+no-flip,gin,gps \
        --molecules 1000 --epochs 40 --seeds 0 --out results/fit_ablations

``--list`` prints the variants. Results go to ``OUT/fit_ablations.json``
and ``OUT/fit_ablations.md``; each target's runs to ``OUT/<target>/``
(the command's own output folder).
"""
import argparse
import json
import math
import os
import os.path as osp
import sys
from typing import Callable, Dict, List

import torch

ROOT = osp.dirname(osp.dirname(osp.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from torch_geometric_hot.train import zoo  # noqa: E402


def _tokengt(node_id: str, **overrides) -> Callable:
    def build(s: zoo.Settings) -> torch.nn.Module:
        from torch_geometric_hot.models import TokenGT
        kwargs = dict(task='graph', heads=zoo.HEADS,
                      node_encoder=zoo.atom_encoder(s.hidden),
                      edge_encoder=zoo.bond_encoder(s.hidden),
                      node_id=node_id, node_id_dim=zoo.NODE_ID_DIM,
                      attention='softmax', dropout=s.dropout, seed=s.seed)
        kwargs.update(overrides)
        return TokenGT(0, s.hidden, s.out, s.layers, **kwargs)
    return build


def _hot(**overrides) -> Callable:
    def build(s: zoo.Settings) -> torch.nn.Module:
        from torch_geometric_hot.models import HOTGraphModel
        kwargs = dict(num_layers=s.layers, heads=zoo.HEADS,
                      node_encoder=zoo.atom_encoder(s.hidden),
                      edge_encoder=zoo.bond_encoder(s.hidden),
                      attention='kernel', dropout=s.dropout, seed=s.seed)
        kwargs.update(overrides)
        return HOTGraphModel(s.hidden, s.out, **kwargs)
    return build


def variants() -> Dict[str, zoo.ModelSpec]:
    r"""The ablation variants by name: a model of the command (same
    pre-transform and inputs) with some constructor arguments changed."""
    lap = zoo.MODELS['tokengt-lap']
    hot = zoo.MODELS['hot-kernel']

    def like(spec: zoo.ModelSpec, build: Callable, text: str):
        return spec._replace(build=build, description=text)

    return {
        'tokengt-lap+flip': like(
            lap, _tokengt('laplacian', sign_flip=True),
            'TokenGT (Lap) with random sign flips in training'),
        'tokengt-lap+unscaled': like(
            lap, _tokengt('laplacian', node_id_scale=1.0),
            'TokenGT (Lap), identifiers entering at unit norm'),
        'tokengt-lap+paper': like(
            lap, _tokengt('laplacian', sign_flip=True, node_id_scale=1.0),
            "TokenGT (Lap) as in the paper: sign flips, unit-norm ids"),
        'tokengt-lap+seb': like(
            lap, _tokengt('laplacian', seb=True),
            'TokenGT (Lap) with the sparse equivariant basis'),
        'hot-kernel+elu': like(
            hot, _hot(kernel='elu'), 'HOT kernel attention, elu+1 map'),
        'hot-kernel+relu': like(
            hot, _hot(kernel='relu'), 'HOT kernel attention, relu map'),
    }


def _final_loss(run_dir: str) -> float:
    with open(osp.join(run_dir, 'metrics.jsonl')) as f:
        records = [json.loads(line) for line in f if line.strip()]
    return records[-1]['loss']


def _mean(values: List[float]) -> float:
    values = [v for v in values if not math.isnan(v)]
    return sum(values) / len(values) if values else float('nan')


def main(argv=None) -> Dict:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--targets', default='qed,bertz,logp')
    parser.add_argument('--variants', default='gin,gps,tokengt-lap,'
                        'tokengt-lap+no-flip,hot-kernel')
    parser.add_argument('--dataset', default='ogbg-molesol')
    parser.add_argument('--molecules', type=int, default=1000)
    parser.add_argument('--epochs', type=int, default=40)
    parser.add_argument('--batch-size', type=int, default=32)
    parser.add_argument('--hidden', type=int, default=64)
    parser.add_argument('--layers', type=int, default=4)
    parser.add_argument('--seeds', default='0')
    parser.add_argument('--root', default=osp.join(ROOT, 'data_cache',
                                                   'fit_ablations'))
    parser.add_argument('--out', default=osp.join(ROOT, 'results',
                                                  'fit_ablations'))
    parser.add_argument('--smoke', action='store_true',
                        help='two epochs on a few batches (a test)')
    parser.add_argument('--list', action='store_true',
                        help='print the variants and exit')
    args = parser.parse_args(argv)
    extra = variants()
    if args.list:
        for name, spec in {**zoo.MODELS, **extra}.items():
            print(f'{name:<28} {spec.description}')
        return {}
    names = [v for v in args.variants.split(',') if v]
    unknown = [v for v in names if v not in zoo.MODELS and v not in extra]
    if unknown:
        parser.error(f'unknown variants {unknown} (see --list)')
    for name in names:  # the command reads its models from zoo.MODELS
        if name in extra:
            zoo.MODELS.setdefault(name, extra[name])
    from torch_geometric_hot.train.cli import main as train

    rows = []
    for target in [t for t in args.targets.split(',') if t]:
        out = osp.join(args.out, target)
        command = ['--dataset', args.dataset, '--offline',
                   '--offline-target', target, '--offline-molecules',
                   str(args.molecules), '--root',
                   osp.join(args.root, target), '--model', ','.join(names),
                   '--hidden', str(args.hidden), '--layers',
                   str(args.layers), '--batch-size', str(args.batch_size),
                   '--epochs', str(args.epochs), '--seed', args.seeds,
                   '--threads', '1', '--no-progress', '--out', out]
        if args.smoke:
            command.append('--smoke')
        summaries = train(command)
        for name in names:
            runs = [s for s in summaries if s['model'] == name]
            rows.append({
                'target': target, 'variant': name, 'seeds': len(runs),
                'final_train_loss': _mean([_final_loss(osp.join(
                    out, f"{name}_seed{s['seed']}")) for s in runs]),
                'test': _mean([s['test'] for s in runs]),
                'metric': runs[0]['metric'],
                'seconds_per_epoch': _mean([s['seconds_per_epoch']
                                            for s in runs]),
                'parameters': runs[0]['parameters']})
    lines = ['| target | variant | final train loss | x GIN | test | '
             's / epoch |', '|---|---|---|---|---|---|']
    for row in rows:
        gin = [r['final_train_loss'] for r in rows if r['target'] ==
               row['target'] and r['variant'] == 'gin']
        ratio = f"{row['final_train_loss'] / gin[0]:.2f}" if gin else ''
        lines.append(f"| {row['target']} | {row['variant']} | "
                     f"{row['final_train_loss']:.4f} | {ratio} | "
                     f"{row['test']:.4f} | {row['seconds_per_epoch']:.1f} |")
    table = '\n'.join(lines)
    print(table)
    os.makedirs(args.out, exist_ok=True)
    with open(osp.join(args.out, 'fit_ablations.json'), 'w') as f:
        json.dump({'settings': vars(args), 'rows': rows}, f, indent=1)
    with open(osp.join(args.out, 'fit_ablations.md'), 'w') as f:
        f.write(table + '\n')
    return {'rows': rows, 'table': table}


if __name__ == '__main__':
    main()
