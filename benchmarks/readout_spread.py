r"""How much the predictions of a model of the training command differ
between the molecules of a batch at initialisation, and how much their mean
moves with the parameters: the diagnosis behind HOT's batch norm default
(``docs/results.md``, "HOT on structure-dependent targets").

For the first batch of an offline set, every model is built with seed 0 and
reports

* ``spread``: the standard deviation of the predictions over the batch's
  molecules;
* ``readout spread / rms`` (HOT): the per-channel standard deviation over
  the molecules of the vectors entering the head's normalisation, over
  their root mean square;
* ``mean gradient L1``: the L1 norm of the gradient of the batch's mean
  prediction. Adam's first step moves every parameter by about the learning
  rate, so the mean prediction can move by up to the learning rate times
  this norm;
* ``parameters``.

Run::

    python benchmarks/readout_spread.py --target motifs --molecules 300 \
        --variants gin,hot-kernel+bn-head,hot-kernel+paper-norm \
        --out readout_spread.json
"""
import argparse
import json
import os.path as osp
import sys
from typing import Dict, List

import torch

ROOT = osp.dirname(osp.dirname(osp.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from torch_geometric_hot.train import zoo  # noqa: E402
from torch_geometric_hot.train.versions import \
    software_versions  # noqa: E402


def spread(name: str, spec: zoo.ModelSpec, batch) -> Dict[str, float]:
    r"""The statistics above for one model on one batch."""
    torch.manual_seed(0)
    model = spec.build(zoo.Settings(64, 4, 1, 0.0, 0))
    model.train()
    captured: List[torch.Tensor] = []
    norm = getattr(model, 'norm', None)
    hook = norm.register_forward_pre_hook(
        lambda module, args: captured.append(args[0].detach())) \
        if isinstance(norm, torch.nn.Module) else None
    out = zoo.predict(model, spec, batch).view(-1)
    if hook is not None:
        hook.remove()
    out.mean().backward()
    row = {'model': name, 'description': spec.description,
           'spread': float(out.detach().std()),
           'mean gradient L1': float(sum(p.grad.abs().sum()
                                         for p in model.parameters()
                                         if p.grad is not None)),
           'parameters': sum(p.numel() for p in model.parameters())}
    if captured:
        h = captured[0]
        row['readout spread / rms'] = float(h.std(0).mean() /
                                            h.pow(2).mean().sqrt())
    return row


def main(argv=None) -> List[Dict[str, float]]:
    from torch_geometric.loader import DataLoader

    from torch_geometric_hot.datasets import load_molecule_benchmark

    sys.path.insert(0, osp.dirname(osp.abspath(__file__)))
    from fit_ablations import variants

    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--target', default='motifs')
    parser.add_argument('--molecules', type=int, default=300)
    parser.add_argument('--batch-size', type=int, default=32)
    parser.add_argument('--variants',
                        default='gin,hot-kernel+bn-head,'
                        'hot-kernel+paper-norm')
    parser.add_argument('--root', default=osp.join(ROOT, 'data_cache',
                                                   'readout_spread'))
    parser.add_argument('--out', default=None,
                        help='write the rows and the arguments here (JSON)')
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    specs = {**zoo.MODELS, **variants()}
    rows = []
    for name in args.variants.split(','):
        spec = specs[name]
        bench = load_molecule_benchmark(
            'ogbg-molesol', osp.join(args.root, args.target), offline=True,
            pre_transform=spec.pre_transform,
            offline_molecules=args.molecules, offline_target=args.target)
        train = bench.dataset[bench.split['train']]
        batch = next(iter(DataLoader(train, batch_size=args.batch_size)))
        rows.append(spread(name, spec, batch))
    print('| model | spread | readout spread / rms | mean gradient L1 | '
          'parameters |\n|---|---:|---:|---:|---:|')
    for row in rows:
        ratio = row.get('readout spread / rms')
        print(f"| {row['model']} | {row['spread']:.3f} | "
              f"{'' if ratio is None else f'{ratio:.2f}'} | "
              f"{row['mean gradient L1']:.1f} | {row['parameters']:,} |")
    if args.out:
        with open(args.out, 'w') as f:
            json.dump({'args': vars(args), 'versions': software_versions(),
                       'rows': rows}, f, indent=1)
    return rows


if __name__ == '__main__':
    main()
