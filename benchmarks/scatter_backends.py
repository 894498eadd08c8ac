r"""The library's grouped reductions against ``torch_geometric.utils``.

Every grouped sum and maximum of the library goes through
:mod:`torch_geometric_hot.ops.scatter`, and its grouped softmax
(:func:`torch_geometric_hot.ops.grouped_softmax`) is written on them.
This script times the library's sum, maximum and softmax side by side with
PyG's (``torch_geometric.utils.scatter`` with ``reduce='sum'`` and
``'max'``, ``torch_geometric.utils.softmax``), on the shapes the layers use:
rows grouped eight to a group (a node's incident entries), :obj:`[E, H]`
scores and :obj:`[E, H, D]` messages, forward and backward (the maximum
has no gradient: forward only). Both run in one
process in alternating rounds; the ratio PyG / ours is the median of the
rounds' ratios, so that the machine's drift hits both alike. The outputs
are checked equal before timing.

```bash
python benchmarks/scatter_backends.py --threads 1 \
    --out benchmarks/results/scatter_backends.json
python benchmarks/scatter_backends.py --device cuda   # on a GPU
```
"""
import argparse
import os
import statistics
import sys
from typing import Callable, Dict, List

import torch
from torch import Tensor
import torch_geometric.utils as pyg_utils

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import software_versions, time_fwd_bwd, \
    write_json  # noqa: E402

from torch_geometric_hot.ops.scatter import (current_backend,  # noqa: E402
                                             scatter_max, scatter_sum)
from torch_geometric_hot.ops.softmax import grouped_softmax  # noqa: E402

HEADS, CHANNELS, GROUP_SIZE = 4, 16, 8
SIZES = (10**4, 10**5, 10**6)


#: name -> (shape of a row, ours, PyG's); each takes (src, index, groups)
OPERATIONS: Dict[str, tuple] = {
    'sum [E, H, D]': ((HEADS, CHANNELS), scatter_sum,
                      lambda s, i, g: pyg_utils.scatter(s, i, 0, g, 'sum')),
    'sum [E, C]': ((HEADS * CHANNELS, ), scatter_sum,
                   lambda s, i, g: pyg_utils.scatter(s, i, 0, g, 'sum')),
    'max [E, H]': ((HEADS, ), scatter_max,
                   lambda s, i, g: pyg_utils.scatter(s.detach(), i, 0, g,
                                                     'max')),
    'softmax [E, H]': ((HEADS, ), grouped_softmax,
                       lambda s, i, g: pyg_utils.softmax(s, i,
                                                         num_nodes=g)),
}


def inputs(rows: int, shape: tuple, device: torch.device, seed: int = 0):
    r"""Rows :obj:`[rows, *shape]` that require grad, and their groups
    (:data:`GROUP_SIZE` rows to a group on average, in random order)."""
    gen = torch.Generator().manual_seed(seed)
    groups = max(1, rows // GROUP_SIZE)
    src = torch.randn(rows, *shape, generator=gen).to(device)
    index = torch.randint(groups, (rows, ), generator=gen).to(device)
    return src.requires_grad_(), index, groups


def _step(fn: Callable, src: Tensor, index: Tensor, groups: int,
          device: torch.device) -> Callable[[], Tensor]:
    def step() -> Tensor:
        out = fn(src, index, groups)
        if device.type == 'cuda':
            torch.cuda.synchronize(device)
        return out
    return step


def measure(name: str, rows: int, rounds: int, repeats: int,
            device: torch.device) -> Dict:
    r"""Ours and PyG's :obj:`name` on :obj:`rows` rows, alternately."""
    shape, ours, pyg = OPERATIONS[name]
    src, index, groups = inputs(rows, shape, device)
    torch.testing.assert_close(ours(src, index, groups),
                               pyg(src, index, groups))
    steps = {'ours': _step(ours, src, index, groups, device),
             'pyg': _step(pyg, src, index, groups, device)}
    times: Dict[str, List[float]] = {'ours': [], 'pyg': []}
    for _ in range(rounds):
        for label, step in steps.items():
            times[label].append(time_fwd_bwd(step, repeats=repeats,
                                             warmup=1, min_time=0.2)[1])
    ratios = [p / o for p, o in zip(times['pyg'], times['ours'])]
    return dict(operation=name, rows=rows, groups=groups,
                ours_s=statistics.median(times['ours']),
                pyg_s=statistics.median(times['pyg']),
                pyg_to_ours=statistics.median(ratios), rounds=times)


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--device', default='cpu')
    parser.add_argument('--sizes', default=','.join(map(str, SIZES)),
                        help='comma-separated row counts')
    parser.add_argument('--rounds', type=int, default=5)
    parser.add_argument('--repeats', type=int, default=3)
    parser.add_argument('--threads', type=int, default=None)
    parser.add_argument('--quick', action='store_true',
                        help='one small size, two rounds')
    parser.add_argument('--out', default=None, help='JSON path')
    args = parser.parse_args(argv)
    args.sizes = [int(float(s)) for s in args.sizes.split(',')]
    if args.quick:
        args.sizes, args.rounds, args.repeats = [2000], 2, 1
    return args


def main(argv=None) -> Dict:
    args = parse_args(argv)
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    print(f'scatter backend {current_backend()!r}, '
          f'{torch.get_num_threads()} thread(s), {device}; '
          f'{args.rounds} alternating rounds')
    print(f'{"operation":16s} {"rows":>9s} {"ours ms":>9s} {"PyG ms":>9s} '
          f'{"PyG/ours":>9s}')
    records = []
    for rows in args.sizes:
        for name in OPERATIONS:
            r = measure(name, rows, args.rounds, args.repeats, device)
            records.append(r)
            print(f'{name:16s} {rows:9,d} {1e3 * r["ours_s"]:9.3f} '
                  f'{1e3 * r["pyg_s"]:9.3f} {r["pyg_to_ours"]:9.2f}',
                  flush=True)
    result = dict(settings=dict(device=str(device),
                                threads=torch.get_num_threads(),
                                scatter_backend=current_backend(),
                                rounds=args.rounds, repeats=args.repeats,
                                group_size=GROUP_SIZE, heads=HEADS,
                                channels=CHANNELS,
                                versions=software_versions()),
                  records=records)
    if args.out:
        write_json(args.out, result)
    return result


if __name__ == '__main__':
    main()
