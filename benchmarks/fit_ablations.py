r"""Which choices make TokenGT and HOT fit small molecule sets: variants of
the training command's models trained side by side through the unmodified
command (``python -m torch_geometric_hot.train``) on offline targets, with
the final training loss (the mean over the last epoch's steps, as the
command logs it), the fitted loss (the last weights' error on the training
set in evaluation mode, as the command measures it), the test metric and the
seconds per epoch of every variant and target in one table.

Every variant is a model of the command with some constructor arguments
changed; the baselines (GIN, GPS) train in the same run. Run::

    python benchmarks/fit_ablations.py --targets qed,bertz,logp \
        --variants tokengt-lap,tokengt-lap+paper,gin,gps \
        --molecules 1000 --epochs 40 --seeds 0 --out results/fit_ablations

The offline PCQM4Mv2 layout's variants ran as::

    python benchmarks/fit_ablations.py --dataset pcqm4mv2 --targets tpsa \
        --molecules 0 --hidden 32 --layers 3 --batch-size 64 --lr 2e-3 \
        --epochs 12 --seeds 0,1,2 --variants tokengt-lap+scaled,hot-kernel+mean

``--list`` prints the variants. Results go to ``OUT/fit_ablations.json``
(``runs``: every run seed by seed; ``rows``: each variant's means and, for
the test metric, sample standard deviation over the seeds) and
``OUT/fit_ablations.md``; each target's runs to ``OUT/<target>/`` (the
command's own output folder).
"""
import argparse
import contextlib
import json
import math
import os
import os.path as osp
import sys
from typing import Dict, List, Optional

import torch

ROOT = osp.dirname(osp.dirname(osp.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from torch_geometric_hot.train import zoo  # noqa: E402
from torch_geometric_hot.train.report import read_history  # noqa: E402
from torch_geometric_hot.train.versions import \
    software_versions  # noqa: E402


def _with(spec: zoo.ModelSpec, text: str, **options) -> zoo.ModelSpec:
    r"""The command's model :obj:`spec` built with further options (its
    builder's :obj:`Settings.options`)."""
    def build(s: zoo.Settings) -> torch.nn.Module:
        merged = {**dict(s.options), **options}
        return spec.build(s._replace(options=tuple(sorted(merged.items()))))
    return spec._replace(build=build, description=text)


#: HOT's attention outputs as plain averages over their key groups (the
#: command's HOT models scale them by log(1 + group size))
MEAN = dict(size_scaler='none')


def variants() -> Dict[str, zoo.ModelSpec]:
    r"""The ablation variants by name: a model of the command (same
    pre-transform and inputs) built with some options changed."""
    lap = zoo.MODELS['tokengt-lap']
    hot = zoo.MODELS['hot-kernel']
    soft = zoo.MODELS['hot-softmax']
    scaled = {  # every TokenGT model of the command, identifiers scaled
        f'{name}+scaled': _with(
            zoo.MODELS[name], f'{zoo.MODELS[name].description}, '
            'identifiers scaled by sqrt(d_p) = 4', node_id_scale=4.0)
        for name in ('tokengt-lap', 'tokengt-lap-performer', 'tokengt-orf',
                     'tokengt-orf-performer')}
    return {
        **scaled,
        'tokengt-lap+flip': _with(
            lap, 'TokenGT (Lap) with random sign flips in training and '
            'identifiers scaled by sqrt(d_p) = 4', sign_flip=True,
            node_id_scale=4.0),
        'tokengt-lap+paper': _with(
            lap, 'TokenGT (Lap) as in the paper: sign flips, unit-norm ids',
            sign_flip=True, node_id_scale=1.0),
        'tokengt-lap+seb': _with(
            lap, 'TokenGT (Lap) with the sparse equivariant basis',
            seb=True),
        'hot-kernel+mean': _with(
            hot, 'HOT kernel attention, plain averages (no size scaling)',
            **MEAN),
        'hot-softmax+mean': _with(
            soft, 'HOT softmax attention, plain averages (no size scaling)',
            **MEAN),
        'hot-kernel+count': _with(
            hot, 'HOT kernel attention, attention outputs scaled by the '
            'group size (sums)', size_scaler='count'),
        'hot-kernel+elu': _with(hot, 'HOT kernel attention, elu+1 map, '
                                'plain averages', kernel='elu', **MEAN),
        'hot-kernel+relu': _with(hot, 'HOT kernel attention, relu map, '
                                 'plain averages', kernel='relu', **MEAN),
        'hot-kernel+paper-norm': _with(
            hot, 'HOT kernel attention as in HOT: layer norm in the blocks '
            'and before the head, plain averages', norm='layer',
            readout_norm='layer', **MEAN),
        'hot-kernel+paper-norm+log': _with(
            hot, 'HOT kernel attention, layer norms, attention outputs '
            'scaled by log(1 + group size)', norm='layer',
            readout_norm='layer', size_scaler='log'),
        'hot-kernel+bn-readout': _with(
            hot, 'HOT kernel attention, layer norm in the blocks, batch norm '
            'before the head, plain averages', norm='layer',
            readout_norm='batch', **MEAN),
        'hot-kernel+bn-readout+log': _with(
            hot, 'HOT kernel attention, layer norm in the blocks, batch norm '
            'before the head, attention outputs scaled by log(1 + group '
            'size)', norm='layer', readout_norm='batch', size_scaler='log'),
        'hot-kernel+bn-head': _with(
            hot, 'HOT kernel attention, batch norm in the blocks and before '
            'the head, plain averages', norm='batch', readout_norm='batch',
            **MEAN),
        'hot-kernel+bn-head+log': _with(
            hot, 'HOT kernel attention, batch norm in the blocks and before '
            'the head, attention outputs scaled by log(1 + group size)',
            readout_norm='batch', size_scaler='log'),
        'hot-kernel+bn-head+count': _with(
            hot, 'HOT kernel attention, batch norm in the blocks and before '
            'the head, attention outputs scaled by the group size (sums)',
            readout_norm='batch', size_scaler='count'),
        'hot-softmax+bn-readout': _with(
            soft, 'HOT softmax attention, layer norm in the blocks, batch '
            'norm before the head, plain averages', norm='layer',
            readout_norm='batch', **MEAN),
        'hot-softmax+bn-head': _with(
            soft, 'HOT softmax attention, batch norm in the blocks and '
            'before the head, plain averages', norm='batch',
            readout_norm='batch', **MEAN),
        'hot-softmax+paper-norm': _with(
            soft, 'HOT softmax attention as in HOT: layer norm in the blocks '
            'and before the head, plain averages', norm='layer',
            readout_norm='layer', **MEAN),
    }


@contextlib.contextmanager
def _registered(added: Dict[str, zoo.ModelSpec]):
    # the command reads its models from zoo.MODELS (and rebuilds a run's
    # model from there): the variants are there for the run only
    zoo.MODELS.update(added)
    try:
        yield
    finally:
        for name in added:
            del zoo.MODELS[name]


def _mean(values: List[float]) -> float:
    values = [v for v in values if not math.isnan(v)]
    return sum(values) / len(values) if values else float('nan')


def _std(values: List[float]) -> Optional[float]:
    # sample standard deviation over seeds (None for one seed)
    values = [v for v in values if not math.isnan(v)]
    if len(values) < 2:
        return None
    mean = _mean(values)
    return math.sqrt(sum((v - mean)**2 for v in values) / (len(values) - 1))


def _spread(mean: float, std: Optional[float]) -> str:
    return f'{mean:.4f}' if std is None else f'{mean:.4f} ± {std:.4f}'


def _target_runs(args, target: str, summaries: List[Dict]) -> List[Dict]:
    r"""Every run of :obj:`target`, seed by seed, as the result files keep
    them."""
    out = osp.join(args.out, target)
    runs = []
    for s in summaries:
        metric = s['metric']
        runs.append({
            'target': target, 'variant': s['model'], 'seed': s['seed'],
            'final_train_loss': read_history(osp.join(
                out, f"{s['model']}_seed{s['seed']}"))[-1]['loss'],
            'fitted_loss': s['fitted_loss'], 'best_epoch': s['best_epoch'],
            f'valid_{metric}': s['valid'], f'test_{metric}': s['test'],
            f'mean_predictor_test_{metric}': s['mean_predictor_test'],
            'seconds_per_epoch': s['seconds_per_epoch'],
            'parameters': s['parameters']})
    return runs


def _target_rows(target: str, names: List[str],
                 runs: List[Dict]) -> List[Dict]:
    rows = []
    for name in names:
        mine = [r for r in runs if r['variant'] == name]
        metric = next(k for k in mine[0] if k.startswith('test_'))
        rows.append({
            'target': target, 'variant': name, 'seeds': len(mine),
            'final_train_loss': _mean([r['final_train_loss'] for r in mine]),
            'fitted_train_loss': _mean([r['fitted_loss'] for r in mine]),
            'test': _mean([r[metric] for r in mine]),
            'test_std': _std([r[metric] for r in mine]),
            'metric': metric[len('test_'):],
            'seconds_per_epoch': _mean([r['seconds_per_epoch']
                                        for r in mine]),
            'parameters': mine[0]['parameters']})
    return rows


def main(argv=None) -> Dict:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--targets', default='qed,bertz,logp')
    parser.add_argument('--variants', default='gin,gps,tokengt-lap,'
                        'tokengt-lap+paper,hot-kernel,hot-kernel+paper-norm')
    parser.add_argument('--dataset', default='ogbg-molesol')
    parser.add_argument('--molecules', type=int, default=1000,
                        help='the first MOLECULES of the offline set '
                        '(0: all of them)')
    parser.add_argument('--epochs', type=int, default=40)
    parser.add_argument('--batch-size', type=int, default=32)
    parser.add_argument('--hidden', type=int, default=64)
    parser.add_argument('--layers', type=int, default=4)
    parser.add_argument('--lr', type=float, default=None,
                        help="the learning rate (the command's default)")
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
    from torch_geometric_hot.train.cli import main as train
    rows, runs = [], []
    for target in [t for t in args.targets.split(',') if t]:
        out = osp.join(args.out, target)
        command = ['--dataset', args.dataset, '--offline',
                   '--offline-target', target, '--root',
                   osp.join(args.root, target), '--model', ','.join(names),
                   '--hidden', str(args.hidden), '--layers',
                   str(args.layers), '--batch-size', str(args.batch_size),
                   '--epochs', str(args.epochs), '--seed', args.seeds,
                   '--threads', '1', '--no-progress', '--out', out]
        if args.molecules:
            command += ['--offline-molecules', str(args.molecules)]
        if args.lr is not None:
            command += ['--lr', str(args.lr)]
        if args.smoke:
            command.append('--smoke')
        with _registered({n: extra[n] for n in names if n in extra}):
            target_runs = _target_runs(args, target, train(command))
        runs += target_runs
        rows += _target_rows(target, names, target_runs)
    lines = ['| target | variant | final train loss | x GIN | fitted loss '
             '| x GIN | test | s / epoch |', '|---' * 8 + '|']
    for row in rows:
        gin = [r for r in rows if r['target'] == row['target'] and
               r['variant'] == 'gin']
        ratios = [f"{row[key] / gin[0][key]:.2f}" if gin else ''
                  for key in ('final_train_loss', 'fitted_train_loss')]
        lines.append(f"| {row['target']} | {row['variant']} | "
                     f"{row['final_train_loss']:.4f} | {ratios[0]} | "
                     f"{row['fitted_train_loss']:.5f} | {ratios[1]} | "
                     f"{_spread(row['test'], row['test_std'])} | "
                     f"{row['seconds_per_epoch']:.1f} |")
    table = '\n'.join(lines)
    print(table)
    os.makedirs(args.out, exist_ok=True)
    with open(osp.join(args.out, 'fit_ablations.json'), 'w') as f:
        json.dump({'settings': vars(args), 'versions': software_versions(),
                   'rows': rows, 'runs': runs}, f, indent=1)
    with open(osp.join(args.out, 'fit_ablations.md'), 'w') as f:
        f.write(table + '\n')
    return {'rows': rows, 'runs': runs, 'table': table}


if __name__ == '__main__':
    main()
