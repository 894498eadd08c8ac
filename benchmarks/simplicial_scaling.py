r"""N-simplicial attention costs (linear in the number of tuples;
``docs/design.md``, "Cost promises").

Two parts, both through the shared harness (fresh process per point,
forward+backward medians, peak RSS):

1. ``scaling`` -- :class:`SimplicialAttention` (N = 2, width 32, 4 heads)
   forward+backward against the number of tuples :math:`T`, for three
   candidate generators, the tuples built inside the timed forward:

   * ``walks``: one random graph, out-degree 8 (:math:`T \approx 64 n`);
   * ``dense``: a batch of 8-node graphs (:math:`T = 512` per graph);
   * ``indexer``: a batch of 32-node graphs, :math:`k = 8`
     (:math:`T = 2048` per graph).

   Every variant has :math:`n = T/64` nodes, so the floor
   gathers :math:`T` rows of width 32 from, and sums them into, a table of
   :math:`T/64` rows: the same access pattern as the attention's gathers
   and scatters. Records go to ``--out``; slopes and time-to-floor ratios
   are printed and written to ``<out>_summary.json``, the plot to
   ``<out>.png``.
2. ``compare`` -- one graph of :math:`n = 128` nodes, N = 2: ``dense``
   (:math:`n^3 = 2{,}097{,}152` tuples, chunked) against ``indexer`` with
   :math:`k = 8` (:math:`n k^2 = 8192` tuples); records to
   ``<out>_n128.json`` and the speed-up printed.

Usage::

    python benchmarks/simplicial_scaling.py --quick --out results/s.json
    python benchmarks/simplicial_scaling.py --part compare --out results/s.json
"""
import argparse
import os
import sys
from typing import Callable, Dict, List, Tuple

import torch
from torch import Tensor

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.dirname(HERE)]  # harness, package
from harness import bandwidth_floor, run_benchmark  # noqa: E402

from torch_geometric_hot.data import dense_simplices, walk_simplices  # noqa
from torch_geometric_hot.nn import SimplicialAttention  # noqa: E402

CHANNELS, HEADS, ORDER = 32, 4, 2
SIZES = [2**15, 2**16, 2**17, 2**18, 2**19, 2**20, 2**21, 2**22]
QUICK_SIZES = [2**15, 2**17]
COMPARE_NODES = 128
SCALING = ['walks', 'dense', 'indexer']
COMPARE = ['dense_n128', 'indexer_n128']


def _step(candidates: str, x: Tensor, batch: Tensor, edge_index=None,
          **kwargs) -> Tuple[Callable[[], Tensor], Dict]:
    module = SimplicialAttention(CHANNELS, heads=HEADS, order=ORDER,
                                 candidates=candidates, **kwargs).to(x.device)
    with torch.no_grad():
        if candidates == 'walks':
            tuples = walk_simplices(edge_index, x.size(0), ORDER)
        elif candidates == 'dense':
            tuples = dense_simplices(x.size(0), ORDER, batch)
        else:
            tuples = module.indexer(x, ORDER, batch)[0]

    def step() -> Tensor:
        return module(x, edge_index, batch)

    return step, dict(n_nodes=x.size(0), n_tuples=tuples.size(1),
                      n_edges=0 if edge_index is None else
                      edge_index.size(1))


def build_walks(size: int, device: torch.device):
    n, degree = max(size // 64, 2), 8
    gen = torch.Generator().manual_seed(0)
    edge_index = torch.stack([
        torch.arange(n).repeat_interleave(degree),
        torch.randint(n, (n * degree, ), generator=gen)
    ]).to(device)
    x = torch.randn(n, CHANNELS, generator=gen).to(device).requires_grad_()
    return _step('walks', x, torch.zeros(n, dtype=torch.long, device=device),
                 edge_index)


def _batch_of(num_graphs: int, graph_size: int,
              device: torch.device) -> Tuple[Tensor, Tensor]:
    n = num_graphs * graph_size
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(n, CHANNELS, generator=gen).to(device).requires_grad_()
    return x, torch.arange(num_graphs, device=device).repeat_interleave(
        graph_size)


def build_dense(size: int, device: torch.device):
    return _step('dense', *_batch_of(max(size // 512, 1), 8, device))


def build_indexer(size: int, device: torch.device):
    return _step('indexer', *_batch_of(max(size // 2048, 1), 32, device),
                 k=8)


def build_dense_n128(size: int, device: torch.device):
    return _step('dense', *_batch_of(1, COMPARE_NODES, device))


def build_indexer_n128(size: int, device: torch.device):
    return _step('indexer', *_batch_of(1, COMPARE_NODES, device), k=8)


def build_floor(size: int, device: torch.device):
    return bandwidth_floor(size, CHANNELS, num_groups=max(size // 64, 1),
                           device=device), \
        dict(n_tuples=size, n_nodes=max(size // 64, 1))


VARIANTS = dict(walks=build_walks, dense=build_dense, indexer=build_indexer,
                dense_n128=build_dense_n128,
                indexer_n128=build_indexer_n128)


def _speedup(records: List[Dict]) -> None:
    time = {r['variant']: r['fwd_bwd_s'] for r in records
            if r.get('status') == 'ok' and r['variant'] in COMPARE}
    if len(time) == 2:
        print(f"\nn = {COMPARE_NODES}, N = {ORDER}: dense "
              f"{time['dense_n128']:.4g} s, indexer (k = 8) "
              f"{time['indexer_n128']:.4g} s forward+backward: indexer "
              f"{time['dense_n128'] / time['indexer_n128']:.1f}x faster")


def main(argv: List[str]) -> None:
    if '--point' in argv:  # a harness child: measure one point and exit
        run_benchmark('simplicial', SIZES, VARIANTS, argv,
                      size_key='n_tuples', floor=build_floor)
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument('--part', choices=['all', 'scaling', 'compare'],
                        default='all')
    parser.add_argument('--out')
    args, rest = parser.parse_known_args(argv)
    if args.part in ('all', 'scaling'):
        out = ['--out', args.out] if args.out else []
        run_benchmark('simplicial_scaling', SIZES, VARIANTS,
                      rest + out + ['--variants', ','.join(SCALING)],
                      size_key='n_tuples', floor=build_floor,
                      quick_sizes=QUICK_SIZES)
    if args.part in ('all', 'compare'):
        out = []
        if args.out:
            out = ['--out', os.path.splitext(args.out)[0] + '_n128.json']
        if '--quick' in rest:  # one size only; one timed repetition
            rest = [a for a in rest if a != '--quick'] + ['--repeats', '1']
        records = run_benchmark('simplicial_n128', [COMPARE_NODES], VARIANTS,
                                rest + out + ['--variants', ','.join(COMPARE)],
                                size_key='n_tuples')
        _speedup(records)


if __name__ == '__main__':
    main(sys.argv[1:])
