r"""A transform applied to many graphs at once, with the same result as
applying it to each graph in turn: what a data loader's worker does to a
batch of molecules when their views are computed as they are read instead
of stored with the dataset.

Per graph, the library's transforms cost tens of small tensor operations
(hundreds of microseconds for a molecule, mostly per-call overhead);
on the whole batch the same operations run once:

* :class:`~torch_geometric_hot.transforms.AddLaplacianNodeId`: one
  batched dense eigensolver call per distinct graph size
  (:func:`~torch_geometric_hot.ops.node_identifiers.\
batched_laplacian_node_ids`, the routine the transform itself calls for
  graphs of at most :obj:`dense_threshold` nodes; larger graphs go through
  the transform one by one);
* :class:`~torch_geometric_hot.transforms.AddSecondOrderView` (without
  :obj:`pair_x`): one :func:`~torch_geometric_hot.data.build_pair_index` on
  the union of the graphs, its entries regrouped graph by graph;
* :class:`~torch_geometric.transforms.Compose`: its transforms in turn;
* any other transform: graph by graph.
"""
from typing import Callable, List, Optional

import torch
from torch_geometric.data import Data
from torch_geometric.transforms import Compose

from torch_geometric_hot.data.pair_view import build_pair_index
from torch_geometric_hot.ops.node_identifiers import \
    batched_laplacian_node_ids
from torch_geometric_hot.transforms.add_laplacian_node_id import \
    AddLaplacianNodeId
from torch_geometric_hot.transforms.add_second_order_view import \
    AddSecondOrderView
from torch_geometric_hot.transforms.data_device import edge_index_or_empty


def _num_nodes(graph: Data) -> int:
    # Data.num_nodes infers the count from every attribute in turn; a
    # molecule's x gives it at once
    if type(graph) is Data:  # its attributes, without PyG's key lists
        mapping = graph._store._mapping
        x = mapping.get('x')
        if x is not None and 'num_nodes' not in mapping:
            return x.size(0)
        return int(graph.num_nodes)
    x = graph.get('x')
    if x is not None and 'num_nodes' not in graph:
        return x.size(0)
    return int(graph.num_nodes)


def _put(graph: Data, key: str, value: torch.Tensor) -> None:
    # graph[key] = value; into the store's mapping where the store caches
    # nothing about its attributes (PyG's item assignment looks such a
    # cache up at the cost of an exception per attribute)
    store = graph._store
    if '_cached_attr' in store.__dict__:
        graph[key] = value
    else:
        store._mapping[key] = value


def _union(graphs: List[Data], sizes: List[int]):
    # the graphs as one: edges shifted by each graph's first node, the graph
    # of every node, and every graph's first node
    edges = [edge_index_or_empty(g) for g in graphs]
    device = edges[0].device
    counts = torch.tensor(sizes, dtype=torch.long, device=device)
    starts = torch.cumsum(counts, 0) - counts
    edge_counts = torch.tensor([e.size(1) for e in edges], device=device)
    shift = torch.repeat_interleave(starts, edge_counts)
    edge_index = torch.cat([e.long() for e in edges], dim=1) + shift
    batch = torch.repeat_interleave(
        torch.arange(len(graphs), device=device), counts)
    return edge_index, batch, starts


def laplacian_ids_of_many(transform: AddLaplacianNodeId,
                          graphs: List[Data]) -> List[Data]:
    r""":obj:`transform` applied to every graph of :obj:`graphs`, the
    graphs of at most :obj:`transform.dense_threshold` nodes in one batched
    call."""
    sizes = [_num_nodes(g) for g in graphs]
    # larger graphs through the transform itself (ARPACK), one by one
    graphs = [transform(g) if n > transform.dense_threshold else g
              for g, n in zip(graphs, sizes)]
    small = [g for g, n in zip(graphs, sizes)
             if n <= transform.dense_threshold]
    if not small:
        return graphs
    sizes = [n for n in sizes if n <= transform.dense_threshold]
    edge_index, batch, _ = _union(small, sizes)
    ids = batched_laplacian_node_ids(edge_index, batch, len(small),
                                     transform.k)
    for g, part in zip(small, ids.split(sizes)):
        _put(g, transform.attr_name, part)
    return graphs


def pair_views_of_many(graphs: List[Data]) -> List[Data]:
    r""":class:`~torch_geometric_hot.transforms.AddSecondOrderView` (without
    :obj:`pair_x`) applied to every graph of :obj:`graphs`: the pair view of
    their union, whose entries (the diagonal of all nodes, then the edges
    sorted by (row, col)) are regrouped graph by graph (each graph's
    diagonal, then its edges) and split."""
    edge_index, batch, starts = _union(graphs,
                                       [_num_nodes(g) for g in graphs])
    pair_index, transpose, _ = build_pair_index(edge_index, batch.numel())
    entry_graph = batch[pair_index[0]]
    off = torch.ones_like(entry_graph)
    off[:batch.numel()] = 0
    order = torch.sort(2 * entry_graph + off, stable=True)[1]
    position = torch.empty_like(order)
    position[order] = torch.arange(order.numel(), device=order.device)
    entry_graph = entry_graph[order]
    counts = torch.bincount(entry_graph, minlength=len(graphs))
    first = torch.cumsum(counts, 0) - counts
    partner = transpose[order]
    local = torch.where(partner >= 0, position[partner.clamp(min=0)] -
                        first[entry_graph], -1)
    local_index = pair_index[:, order] - starts[entry_graph]
    lengths = counts.tolist()
    for g, index, trans in zip(graphs, local_index.split(lengths, dim=1),
                               local.split(lengths)):
        _put(g, 'pair_index', index)
        _put(g, 'pair_transpose', trans)
    return graphs


def apply_to_many(transform: Optional[Callable],
                  graphs: List[Data]) -> List[Data]:
    r"""The graphs after :obj:`transform`, as
    ``[transform(g) for g in graphs]`` gives them (see the module
    documentation for the transforms computed on all graphs at once).
    Graphs computed at once get their new attributes in place (a
    transform returns a shallow copy of each); use the returned list.

    Args:
        transform (callable, optional): A transform (:obj:`None`: none).
        graphs (list): :class:`~torch_geometric.data.Data` objects.
    """
    if transform is None or not graphs:
        return graphs
    if isinstance(transform, Compose):
        for inner in transform.transforms:
            graphs = apply_to_many(inner, graphs)
        return graphs
    if type(transform) is AddLaplacianNodeId:
        return laplacian_ids_of_many(transform, graphs)
    if type(transform) is AddSecondOrderView and not transform.pair_x:
        return pair_views_of_many(graphs)
    return [transform(g) for g in graphs]
