r"""Pair-view cost on Barabási–Albert graphs (``docs/design.md``, "The pair
view", "Cost promises").

Variants, at 10^3 ... 10^6 directed edges (each new node linked to 5):

* ``pair_view_build``: :meth:`PairView.build` from raw edges (the sort-based
  pair index, its transpose and the per-batch index bundle); no backward;
* ``equivariant_linear_2to2``: one 2→2 :class:`EquivariantLinear` (all 15
  classes, width 32, ``normalize='mean'``), forward + backward on
  ``[n + m, 32]`` entries, the view built beforehand (not timed);
* ``floor``: one gather + ``index_add_`` of ``n + m`` rows of width 32.

Promise checked: peak-memory log–log slope <= 1.1 and a time-to-floor
ratio that varies by less than 2x across sizes.

    python benchmarks/pair_view_scaling.py --out results/pair_view_scaling.json
    python benchmarks/pair_view_scaling.py --quick
"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from harness import ba_edge_index, bandwidth_floor, run_benchmark  # noqa

from torch_geometric_hot.data import PairView  # noqa: E402
from torch_geometric_hot.nn import EquivariantLinear  # noqa: E402

CHANNELS = 32
SIZES = [10**3, 3 * 10**3, 10**4, 3 * 10**4, 10**5, 3 * 10**5, 10**6]
QUICK_SIZES = [10**3, 10**5]  # each point is a fresh process (~7 s start-up)


def graph(size: int, device: torch.device):
    edge_index = ba_edge_index(size, m=5, seed=0).to(device)
    num_nodes = int(edge_index.max()) + 1
    fields = dict(n_nodes=num_nodes, n_edges=edge_index.size(1),
                  n_entries=num_nodes + edge_index.size(1))
    return edge_index, num_nodes, fields


def pair_view_build(size: int, device: torch.device):
    edge_index, num_nodes, fields = graph(size, device)
    return (lambda: PairView.build(edge_index, num_nodes).row), fields


def equivariant_linear(size: int, device: torch.device):
    edge_index, num_nodes, fields = graph(size, device)
    view = PairView.build(edge_index, num_nodes)
    layer = EquivariantLinear(CHANNELS, CHANNELS, 2, 2,
                              normalize='mean').to(device)
    x = torch.randn(view.num_entries, CHANNELS, device=device,
                    requires_grad=True)
    return (lambda: layer(x, view)), fields


def floor(size: int, device: torch.device):
    _, _, fields = graph(size, device)
    return bandwidth_floor(fields['n_entries'], CHANNELS,
                           device=device), fields


VARIANTS = {
    'pair_view_build': pair_view_build,
    'equivariant_linear_2to2': equivariant_linear,
}

if __name__ == '__main__':
    run_benchmark('pair_view_scaling', SIZES, VARIANTS, floor=floor,
                  quick_sizes=QUICK_SIZES)
