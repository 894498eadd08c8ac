r"""Candidate tuples :obj:`simplex_index [N+1, T]` for N-simplicial
attention (row 0 the query), built per graph of a batch and never across
graphs. Every generator is vectorised (no Python loop over nodes or graphs)
and returns tuples sorted by query. Each counts its tuples first and raises
:class:`~torch_geometric_hot.validation.SizeLimitError` when they
exceed the size limit
(:func:`~torch_geometric_hot.validation.size_limit`).

* :func:`dense_simplices`: all :math:`n_g^{N+1}` tuples of each graph
  (repeats allowed, as in the paper's dense form);
* :func:`neighbour_simplices`: :math:`(q, k_1, \dots, k_N)` with every
  :math:`k_a` a neighbour of :math:`q` (:math:`\sum_q \deg_q^N` tuples);
* :func:`walk_simplices`: walks :math:`q \to k_1 \to \dots \to k_N` along the
  edges (the number of :math:`N`-walks);
* :func:`topk_pairs` + :func:`walk_simplices` give the *Simplicial Path
  Sparse Attention* tuples (§2.3): paths of top-:math:`k` pairs, see
  :class:`~torch_geometric_hot.nn.SimplexIndexer`.
"""
from typing import Optional, Tuple

import torch
from torch import Tensor

from torch_geometric_hot.ops.scatter import scatter_sum, segment_counts
from torch_geometric_hot.validation import (check_batch, check_size,
                                            validating)


def _check_order(order: int) -> None:
    if not isinstance(order, int) or order < 1:
        raise ValueError(f"'order' (N) must be an integer >= 1, got {order!r}")


def _batch_vector(batch: Optional[Tensor], num_nodes: int) -> Tensor:
    return check_batch(batch, num_nodes, sorted=True)[0]


def dense_simplices(num_nodes: int, order: int,
                    batch: Optional[Tensor] = None) -> Tensor:
    r"""All :math:`(q, k_1, \dots, k_N)` of nodes of the same graph.

    Args:
        num_nodes (int): Number of nodes :math:`n`.
        order (int): :math:`N \geq 1`.
        batch (torch.Tensor, optional): Sorted graph id of every node.

    :rtype: :class:`torch.Tensor` :obj:`[N+1, \sum_g n_g^{N+1}]`
    """
    _check_order(order)
    batch = _batch_vector(batch, num_nodes)
    device = batch.device
    sizes = segment_counts(batch, int(batch.max()) + 1 if num_nodes else 0)
    _check_tuples(sizes.double().pow(order + 1).sum(), order, 'dense')
    start = torch.cumsum(sizes, 0) - sizes  # first node of every graph
    counts = sizes**(order + 1)
    graph = torch.repeat_interleave(torch.arange(sizes.numel(),
                                                 device=device), counts)
    first_tuple = torch.cumsum(counts, 0) - counts
    local = torch.arange(graph.numel(), device=device) - first_tuple[graph]
    size, offset = sizes[graph], start[graph]
    rows = []
    for _ in range(order + 1):  # base-n_g digits, last slot least significant
        rows.append(local % size + offset)
        local = local // size
    return torch.stack(rows[::-1])


def csr(edge_index: Tensor, num_nodes: int) -> Tuple[Tensor, Tensor]:
    r"""Sorted, duplicate-free CSR form :obj:`(rowptr [n+1], col [m'])` of
    :obj:`edge_index` (self-loops kept)."""
    if edge_index.dim() != 2 or edge_index.size(0) != 2:
        raise ValueError(f"'edge_index' must have shape [2, m], got "
                         f"{tuple(edge_index.shape)}")
    if edge_index.dtype != torch.long:
        raise TypeError(f"'edge_index' must have dtype torch.long, got "
                        f"{edge_index.dtype}")
    # host synchronisation: a value check, skipped with validation off
    if validating() and edge_index.numel() and (
            int(edge_index.min()) < 0 or int(edge_index.max()) >= num_nodes):
        raise ValueError(f"'edge_index' entries must lie in [0, {num_nodes})"
                         f", got range [{int(edge_index.min())}, "
                         f"{int(edge_index.max())}]")
    key = torch.unique(edge_index[0] * num_nodes + edge_index[1])  # sorted
    row, col = key // max(num_nodes, 1), key % max(num_nodes, 1)
    rowptr = torch.zeros(num_nodes + 1, dtype=torch.long,
                         device=edge_index.device)
    rowptr[1:] = torch.cumsum(segment_counts(row, num_nodes), 0)
    return rowptr, col


def expand_along(tuples: Tensor, source: Tensor, rowptr: Tensor,
                 col: Tensor) -> Tensor:
    r"""Appends one slot to every tuple: each tuple is repeated once per
    neighbour of its node :obj:`source[t]` in the CSR graph
    :obj:`(rowptr, col)`, which fills the new last row.

    Args:
        tuples (torch.Tensor): :obj:`[s, T]`.
        source (torch.Tensor): Node whose neighbours extend each tuple,
            :obj:`[T]`.
        rowptr (torch.Tensor): CSR offsets :obj:`[n+1]`.
        col (torch.Tensor): CSR targets.

    :rtype: :class:`torch.Tensor` :obj:`[s+1, T']`
    """
    degree = rowptr[source + 1] - rowptr[source]
    repeated = torch.repeat_interleave(tuples, degree, dim=1)
    first = torch.cumsum(degree, 0) - degree
    position = torch.arange(repeated.size(1), device=tuples.device)
    position = position - torch.repeat_interleave(first, degree)
    start = torch.repeat_interleave(rowptr[source], degree)
    return torch.cat([repeated, col[start + position].unsqueeze(0)])


def _check_tuples(count: Tensor, order: int, kind: str) -> None:
    # the guard of every generator: T tuples of N + 1 nodes (not while
    # torch.compile traces, as check_size)
    if torch.compiler.is_compiling():
        return
    tuples = int(count.item())
    check_size(tuples * (order + 1), f"{kind!r} candidate tuples of order "
               f"N={order} ({tuples:,} tuples of {order + 1} nodes)")


def _count_tuples(rowptr: Tensor, col: Tensor, order: int,
                  from_query: bool) -> Tensor:
    # The most tuples any step of _grow_along_edges holds (float64, exact
    # below 2^53): sum_q deg_q^s (neighbour tuples) or the number of
    # s-walks, 1^T A^s 1 (walks), for s = 1..N
    degree = rowptr[1:] - rowptr[:-1]
    if from_query:
        return max(degree.double().pow(s).sum() for s in range(1, order + 1))
    row = torch.repeat_interleave(
        torch.arange(degree.numel(), device=col.device), degree)
    walks = torch.ones(degree.numel(), dtype=torch.float64,
                       device=col.device)
    most = walks.sum()
    for _ in range(order):  # walks[u]: walks of the current length from u
        walks = scatter_sum(walks[col], row, degree.numel())
        most = torch.maximum(most, walks.sum())
    return most


def _with_self_loops(edge_index: Tensor, num_nodes: int) -> Tensor:
    loops = torch.arange(num_nodes, device=edge_index.device)
    return torch.cat([edge_index, loops.expand(2, -1)], dim=1)


def _grow_along_edges(edge_index: Tensor, num_nodes: int, order: int,
                      include_self: bool, from_query: bool) -> Tensor:
    # Start from every node and extend N times along edges of the query
    # (neighbour tuples) or of the last slot (walks).
    _check_order(order)
    if include_self:
        edge_index = _with_self_loops(edge_index, num_nodes)
    rowptr, col = csr(edge_index, num_nodes)
    _check_tuples(_count_tuples(rowptr, col, order, from_query), order,
                  'neighbours' if from_query else 'walks')
    tuples = torch.arange(num_nodes, device=col.device).unsqueeze(0)
    for _ in range(order):
        tuples = expand_along(tuples, tuples[0] if from_query else
                              tuples[-1], rowptr, col)
    return tuples


def neighbour_simplices(edge_index: Tensor, num_nodes: int, order: int,
                        include_self: bool = False) -> Tensor:
    r"""Tuples :math:`(q, k_1, \dots, k_N)` with every :math:`k_a \in
    \mathcal{N}(q)` (out-neighbours along :obj:`edge_index[0] ->
    edge_index[1]`, duplicates merged).

    Args:
        edge_index (torch.Tensor): Edges :obj:`[2, m]`.
        num_nodes (int): Number of nodes.
        order (int): :math:`N \geq 1`.
        include_self (bool, optional): Count every node as its own
            neighbour, so isolated nodes also get a tuple.
            (default: :obj:`False`)

    :rtype: :class:`torch.Tensor` :obj:`[N+1, \sum_q \deg_q^N]`
    """
    return _grow_along_edges(edge_index, num_nodes, order, include_self,
                             from_query=True)


def walk_simplices(edge_index: Tensor, num_nodes: int, order: int,
                   include_self: bool = False) -> Tensor:
    r"""Walks :math:`q \to k_1 \to \dots \to k_N` along :obj:`edge_index`
    (duplicates merged), one tuple per walk.

    Args:
        edge_index (torch.Tensor): Edges :obj:`[2, m]`.
        num_nodes (int): Number of nodes.
        order (int): :math:`N \geq 1`.
        include_self (bool, optional): Add a self-loop to every node (walks
            may then pause). (default: :obj:`False`)

    :rtype: :class:`torch.Tensor` :obj:`[N+1, \#\text{walks}]`
    """
    return _grow_along_edges(edge_index, num_nodes, order, include_self,
                             from_query=False)


def topk_pairs(scores: Tensor, mask: Tensor, k: int) -> Tuple[Tensor, Tensor]:
    r"""Per node, its own index and the :math:`k-1` highest-scoring other
    valid nodes, on per-graph padded score blocks.

    Args:
        scores (torch.Tensor): :obj:`[B, L, L]`, :obj:`scores[b, i, j]` the
            score of node :math:`j` for node :math:`i` of graph :math:`b`.
        mask (torch.Tensor): :obj:`[B, L]`, which padded slots are nodes.
        k (int): Pairs per node, clamped to the graph size (the node itself
            included).

    Returns:
        :obj:`(row, col)` positions in the padded layout: flat node slots
        :obj:`b * L + i`, sorted by row, :math:`\min(k, n_g)` per node.
    """
    if not isinstance(k, int) or k < 1:
        raise ValueError(f"'k' must be an integer >= 1, got {k!r}")
    num_graphs, length = mask.shape
    k = min(k, length)
    if k == 0:
        empty = torch.empty(0, dtype=torch.long, device=mask.device)
        return empty, empty
    scores = scores.detach().masked_fill(~mask.unsqueeze(1), float('-inf'))
    eye = torch.eye(length, dtype=torch.bool, device=mask.device)
    scores = scores.masked_fill(eye, float('inf'))  # the query is kept
    order = scores.topk(k, dim=-1).indices  # [B, L, k]
    graph = torch.arange(num_graphs, device=mask.device).view(-1, 1, 1)
    node = torch.arange(length, device=mask.device).view(1, -1, 1)
    valid = mask.view(num_graphs, length, 1) & mask[graph, order]
    row = (graph * length + node).expand_as(order)[valid]
    col = (graph * length + order)[valid]
    return row, col
