r"""Inputs of every order for testing higher-order layers on a graph."""
import itertools

import torch
from torch import Tensor
from torch_geometric.data import Data

from torch_geometric_hot.data import PairView
from torch_geometric_hot.transforms import AddSecondOrderView


def distinct_tuples(num_nodes: int, k: int) -> Tensor:
    r"""All ordered k-tuples of distinct nodes, :obj:`[k, n!/(n-k)!]`."""
    tuples = list(itertools.permutations(range(num_nodes), k))
    return torch.tensor(tuples, dtype=torch.long).t().reshape(k, -1)


def attach_order_inputs(data: Data, out_order: int, channels: int = 3,
                        seed: int = 0, max_hyperedges: int = 30) -> Data:
    r"""Attaches the pair view, random float64 :obj:`pair_x` and :obj:`x`
    of width :obj:`channels`, and for :obj:`out_order >= 3` the first
    :obj:`max_hyperedges` distinct k-tuples as :obj:`hyperedge_index`."""
    gen = torch.Generator().manual_seed(seed)
    data = AddSecondOrderView()(data)
    data.pair_x = torch.randn(data.pair_index.size(1), channels,
                              generator=gen, dtype=torch.float64)
    data.x = torch.randn(data.num_nodes, channels, generator=gen,
                         dtype=torch.float64)
    if out_order >= 3:
        data.hyperedge_index = distinct_tuples(data.num_nodes,
                                               out_order)[:, :max_hyperedges]
    return data


def run_layer(layer, data: Data, **kwargs):
    r"""Calls a higher-order layer (with :obj:`in_order` and a
    :obj:`forward(x, view, hyperedge_index)`) on the inputs attached by
    :func:`attach_order_inputs`."""
    x = data.pair_x if layer.in_order == 2 else data.x
    return layer(x, PairView.from_data(data),
                 hyperedge_index=getattr(data, 'hyperedge_index', None),
                 **kwargs)


def rows_per_graph(out_order: int):
    r"""The :func:`assert_batch_independent` level of an output order."""
    return {
        2: lambda d: d.pair_index.size(1),
        1: 'node',
        0: 'graph'
    }.get(out_order, 'hyperedge_index')
