r"""Inputs of every order for testing higher-order layers on a graph."""
import itertools
from typing import Optional, Sequence, Tuple

import torch
from torch import Tensor
from torch_geometric.data import Batch, Data

from torch_geometric_hot.data import PairView
from torch_geometric_hot.data.targets import resolve_targets
from torch_geometric_hot.ops.basis import basis
from torch_geometric_hot.testing.graphs import edge_case_graphs, random_graph
from torch_geometric_hot.transforms import AddSecondOrderView
from torch_geometric_hot.transforms.data_device import data_device


def distinct_tuples(num_nodes: int, k: int,
                    device: Optional[torch.device] = None) -> Tensor:
    r"""All ordered k-tuples of distinct nodes, :obj:`[k, n!/(n-k)!]`, on
    :obj:`device` (default: the CPU)."""
    tuples = list(itertools.permutations(range(num_nodes), k))
    return torch.tensor(tuples, dtype=torch.long,
                        device=device).t().reshape(k, -1)


def attach_order_inputs(data: Data, out_order: int, channels: int = 3,
                        seed: int = 0, max_hyperedges: int = 30) -> Data:
    r"""Attaches the pair view, random float64 :obj:`pair_x` and :obj:`x`
    of width :obj:`channels`, and for :obj:`out_order >= 3` the first
    :obj:`max_hyperedges` distinct k-tuples as :obj:`hyperedge_index`, all
    on the device of :obj:`data` (drawn on the CPU from :obj:`seed`: the
    same numbers on every device)."""
    gen = torch.Generator().manual_seed(seed)
    device = data_device(data)
    data = AddSecondOrderView()(data)
    data.pair_x = torch.randn(data.pair_index.size(1), channels,
                              generator=gen, dtype=torch.float64).to(device)
    data.x = torch.randn(data.num_nodes, channels, generator=gen,
                         dtype=torch.float64).to(device)
    if out_order >= 3:
        data.hyperedge_index = distinct_tuples(
            data.num_nodes, out_order, device)[:, :max_hyperedges]
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


def edge_case_batch(out_order: int) -> Batch:
    r"""The :func:`edge_case_graphs` and two random graphs (6 nodes and 9
    edges, 4 nodes and 5 edges), each with the inputs of
    :func:`attach_order_inputs` for :obj:`out_order`, as one batch."""
    graphs = edge_case_graphs() + [random_graph(6, 9, seed=3),
                                   random_graph(4, 5, seed=4)]
    return Batch.from_data_list(
        [attach_order_inputs(g, out_order, seed=i)
         for i, g in enumerate(graphs)])


def skewed_batch(out_order: int, channels: int = 3, small: int = 6,
                 large: Tuple[int, int] = (30, 70),
                 device: Optional[torch.device] = None) -> Batch:
    r"""Graphs of very different sizes in one batch: the
    :func:`edge_case_graphs`, an empty graph, :obj:`small` random graphs of
    3 to 5 nodes and 3 edges and one random graph of :obj:`large` (nodes,
    edges), each with the inputs of :func:`attach_order_inputs` for
    :obj:`out_order` (:obj:`channels` wide), as paths that pack or group a
    batch graph by graph meet them; on :obj:`device` (default: the CPU)."""
    empty = Data(edge_index=torch.zeros(2, 0, dtype=torch.long,
                                        device=device), num_nodes=0)
    graphs = edge_case_graphs(device=device) + [empty] + [
        random_graph(3 + s % 3, 3, seed=s, device=device)
        for s in range(small)
    ] + [random_graph(*large, seed=9, device=device)]
    return Batch.from_data_list([
        attach_order_inputs(g, out_order, channels=channels, seed=i)
        for i, g in enumerate(graphs)
    ])


def global_class_cases(data: Data, in_order: int, out_order: int,
                       heads: int, head_channels: int, seed: int = 0):
    r"""Yields, for every global class of the :obj:`in_order` →
    :obj:`out_order` basis, the inputs of one attention call on the inputs
    attached by :func:`attach_order_inputs`: ``(cls, target, view, q, k,
    v)`` with random float64 queries (one row per output element of the
    class's part), keys and values of shape :obj:`[rows, heads,
    head_channels]`, all requiring gradients, on the device of the inputs;
    keys and values are shared by the classes."""
    return class_cases(data, in_order, out_order, heads, head_channels,
                       seed, kinds=('global', ))


def class_cases(data: Data, in_order: int, out_order: int, heads: int,
                head_channels: int, seed: int = 0,
                kinds: Sequence[str] = ('local', 'global')):
    r"""The cases of :func:`global_class_cases` for every class of the
    :obj:`kinds` (``'local'``, ``'global'``)."""
    x = data.pair_x if in_order == 2 else data.x
    view, targets = resolve_targets(x, PairView.from_data(data), in_order,
                                    out_order)
    gen = torch.Generator().manual_seed(seed)

    def draw(rows: int) -> Tensor:
        return torch.randn(rows, heads, head_channels, generator=gen,
                           dtype=torch.float64).to(x.device).requires_grad_()

    k, v = draw(x.size(0)), draw(x.size(0))
    classes = [c for c in basis(in_order, out_order) if c.kind in kinds]
    if not classes:
        raise ValueError(f"the {in_order}->{out_order} basis has no "
                         f"{' or '.join(kinds)} class")
    for cls in classes:
        target = targets[cls.part]
        yield cls, target, view, draw(target.num_rows), k, v
