r"""Node identifiers for TokenGT: orthonormal (or near-orthonormal) vectors
:math:`P \in \mathbb{R}^{n \times d_p}`, one row per node
(`Kim et al. 2022 <https://arxiv.org/abs/2207.02505>`_, §2 and App. A.3).

* :func:`orthogonal_node_ids`: orthogonal random features (ORF), rows of a
  random orthogonal matrix;
* :func:`laplacian_node_ids`: eigenvectors of the symmetric normalised
  Laplacian :math:`I - D^{-1/2} A D^{-1/2}`, and
  :func:`batched_laplacian_node_ids` for every graph of a batch at once;
* :func:`random_node_ids`: near-orthonormal random :math:`\pm 1/\sqrt{d_p}`
  vectors for graphs with far more nodes than :math:`d_p`.

Every function returns exactly :obj:`dim` columns: graphs with fewer nodes
than :obj:`dim` get zero-padded columns, never an error. Every function
computes on the device of its inputs (or the :obj:`device` it is given)
and draws random numbers from a :class:`torch.Generator` of that device.
"""
from typing import Optional, Sequence, Union

import numpy as np
import scipy.sparse
import scipy.sparse.linalg
import torch
from torch import Tensor

from torch_geometric_hot.ops.size_buckets import token_positions
from torch_geometric_hot.validation import (check_batch, check_edge_index,
                                            check_size, validating)

Sizes = Union[int, Sequence[int], Tensor]


def check_dim(dim: int, name: str = 'dim') -> None:
    r"""Raises a :class:`ValueError` unless :obj:`dim` is a positive int."""
    if not isinstance(dim, int) or isinstance(dim, bool) or dim < 1:
        raise ValueError(f"'{name}' must be a positive integer, got {dim!r}")


def _as_sizes(num_nodes: Sizes) -> Tensor:
    # Sizes given as Python numbers are host values: a CPU tensor.
    device = num_nodes.device if isinstance(num_nodes, Tensor) else 'cpu'
    sizes = torch.as_tensor(num_nodes, dtype=torch.long,
                            device=device).reshape(-1)
    # Host synchronisation: a value check, skipped with validation off.
    if validating() and bool((sizes < 0).any()):
        raise ValueError(f"'num_nodes' must be non-negative, got "
                         f"{sizes.tolist()}")
    return sizes


def _draw_device(num_nodes: Sizes, generator: Optional[torch.Generator],
                 device: Optional[torch.device]) -> torch.device:
    r"""The device random identifiers are drawn on: :obj:`device`, else the
    generator's, else that of a :obj:`num_nodes` tensor, else the CPU."""
    if device is None:
        device = (generator.device if generator is not None else
                  num_nodes.device if isinstance(num_nodes, Tensor) else
                  'cpu')
    device = torch.device(device)
    if generator is not None and generator.device.type != device.type:
        raise ValueError(f"'generator' lives on {generator.device} but the "
                         f"identifiers are drawn on {device}; pass a "
                         f"generator of that device")
    return device


def _haar_columns(count: int, n: int, cols: int,
                  generator: Optional[torch.Generator], dtype: torch.dtype,
                  device: torch.device) -> Tensor:
    r"""`count` independent :obj:`[n, cols]` matrices with orthonormal
    columns, each distributed as :obj:`cols` columns of a Haar-random
    :obj:`n x n` orthogonal matrix (QR of a Gaussian with the signs of
    :math:`\mathrm{diag}(R)` fixed)."""
    gaussian = torch.randn(count, n, cols, generator=generator, dtype=dtype,
                           device=device)
    q, r = torch.linalg.qr(gaussian)  # [count, n, cols], [count, cols, cols]
    signs = torch.sign(torch.diagonal(r, dim1=-2, dim2=-1))
    signs = torch.where(signs == 0, torch.ones_like(signs), signs)
    return q * signs.unsqueeze(-2)


def orthogonal_node_ids(num_nodes: Sizes, dim: int,
                        generator: Optional[torch.Generator] = None,
                        dtype: torch.dtype = torch.float,
                        device: Optional[torch.device] = None) -> Tensor:
    r"""Orthogonal random features for one or several graphs.

    For a graph of :math:`n` nodes this is :math:`\min(n, d_p)` columns of a
    random orthogonal :math:`n \times n` matrix :math:`Q` (QR decomposition
    of a Gaussian matrix): when :math:`n \le d_p` all of :math:`Q`, so the
    rows are orthonormal, then zero-padded to :math:`d_p` columns; when
    :math:`n > d_p` a uniformly random subset of :math:`d_p` columns of
    :math:`Q` (TokenGT App. A.3). The subset is drawn directly as the
    reduced QR of an :math:`n \times d_p` Gaussian, which has the same
    distribution and costs :math:`O(n d_p^2)` instead of :math:`O(n^3)`.
    Graphs of equal size share one batched QR call.

    Args:
        num_nodes (int, list or torch.Tensor): Node count of every graph.
        dim (int): Identifier dimension :math:`d_p`.
        generator (torch.Generator, optional): Random generator, of the
            device drawn on.
        dtype (torch.dtype): Output dtype (computed in float32 and cast
            for the half types).
        device (torch.device, optional): Device of the draws and the
            result (default: the generator's, else that of a
            :obj:`num_nodes` tensor, else the CPU).

    :rtype: :class:`torch.Tensor` of shape :obj:`[sum(num_nodes), dim]`,
        the graphs' rows in order.
    """
    check_dim(dim)
    device = _draw_device(num_nodes, generator, device)
    sizes = _as_sizes(num_nodes)
    # Host synchronisation: the output's row count depends on the sizes.
    out = torch.zeros(int(sizes.sum()), dim, dtype=dtype, device=device)
    if out.numel() == 0:
        return out
    if dtype not in (torch.float32, torch.float64):  # no QR in half types
        return orthogonal_node_ids(sizes, dim, generator,
                                   device=device).to(dtype)
    sizes = sizes.to(device)
    starts = torch.cumsum(sizes, 0) - sizes
    # Host synchronisation: one batched QR per distinct graph size, whose
    # block shape is that size.
    for n in torch.unique(sizes).tolist():
        if n == 0:
            continue
        which = (sizes == n).nonzero().view(-1)
        cols = min(n, dim)
        blocks = _haar_columns(which.numel(), n, cols, generator, dtype,
                               device)
        rows = (starts[which].view(-1, 1) +
                torch.arange(n, device=device)).view(-1)
        out[rows, :cols] = blocks.reshape(-1, cols)
    return out


def random_node_ids(num_nodes: Sizes, dim: int,
                    generator: Optional[torch.Generator] = None,
                    dtype: torch.dtype = torch.float,
                    device: Optional[torch.device] = None) -> Tensor:
    r"""Near-orthonormal random node identifiers: every entry is
    :math:`\pm 1/\sqrt{d_p}` by a fair coin, so rows have unit norm and the
    inner product of two distinct rows has mean 0 and standard deviation
    :math:`1/\sqrt{d_p}` (TokenGT App. C.3, "Near-ORF"). O(n d_p) for any
    :math:`n`.

    Args:
        num_nodes (int, list or torch.Tensor): Node count of every graph
            (the result does not depend on how it is split).
        dim (int): Identifier dimension :math:`d_p`.
        generator (torch.Generator, optional): Random generator, of the
            device drawn on.
        dtype (torch.dtype): Output dtype.
        device (torch.device, optional): Device of the draws and the
            result (default: the generator's, else that of a
            :obj:`num_nodes` tensor, else the CPU).

    :rtype: :class:`torch.Tensor` of shape :obj:`[sum(num_nodes), dim]`
    """
    check_dim(dim)
    device = _draw_device(num_nodes, generator, device)
    # Host synchronisation: the output's row count depends on the sizes.
    total = int(_as_sizes(num_nodes).sum())
    bits = torch.randint(0, 2, (total, dim), generator=generator,
                         device=device)
    return (bits.to(dtype) * 2 - 1) * dim**-0.5


def make_signs_canonical(vectors: Tensor, tol: float = 1e-8) -> Tensor:
    r"""Deterministic sign convention for eigenvectors: flips every column
    so that its entry of largest absolute value is positive (the first such
    entry, up to :obj:`tol`, when several tie). All-zero columns stay zero.

    Args:
        vectors (torch.Tensor): Columns to normalise, shape
            :obj:`[..., n, k]` (a batch of matrices is normalised matrix by
            matrix).
        tol (float): Entries within :obj:`tol` of the largest magnitude
            count as ties.
    """
    if vectors.numel() == 0:
        return vectors
    magnitude = vectors.abs()
    ties = magnitude >= magnitude.amax(dim=-2, keepdim=True) - tol
    pivot = ties.to(torch.uint8).argmax(dim=-2, keepdim=True)  # first tie
    signs = torch.sign(vectors.gather(-2, pivot))
    return vectors * torch.where(signs == 0, torch.ones_like(signs), signs)


def batched_laplacian_node_ids(edge_index: Tensor, batch: Tensor,
                               num_graphs: int, k: int,
                               dtype: torch.dtype = torch.float) -> Tensor:
    r"""The Laplacian identifiers of :func:`laplacian_node_ids` (dense
    path) for every graph of a batch at once, computed on the device of
    :obj:`edge_index` with :func:`torch.linalg.eigh` on per-graph dense
    blocks (graphs of equal size share one batched call), in float64.

    Costs :math:`O(\sum_g n_g^3)` time and :math:`O(c\, n^2)` memory per
    group of :math:`c` graphs of :math:`n` nodes, guarded by the size
    limit (:func:`~torch_geometric_hot.validation.size_limit`): meant for
    batches of small graphs; large graphs are better served by
    :class:`~torch_geometric_hot.transforms.AddLaplacianNodeId` at
    data-processing time.

    Args:
        edge_index (torch.Tensor): Edges, shape :obj:`[2, m]`, never across
            graphs.
        batch (torch.Tensor): Graph of every node, shape :obj:`[n]`.
        num_graphs (int): Number of graphs.
        k (int): Number of eigenvectors (columns) :math:`d_p`.
        dtype (torch.dtype): Output dtype.

    :rtype: :class:`torch.Tensor` of shape :obj:`[n, k]`
    """
    check_dim(k, 'k')
    if not isinstance(batch, Tensor):
        raise TypeError(f"'batch' must be a torch.Tensor of graph ids, got "
                        f"{type(batch).__name__}")
    batch, num_graphs = check_batch(batch, batch.numel(), num_graphs)
    check_edge_index(edge_index, batch.numel())
    if edge_index.device != batch.device:
        raise ValueError(f"'edge_index' is on {edge_index.device} but "
                         f"'batch' is on {batch.device}")
    device = batch.device
    out = torch.zeros(batch.numel(), k, dtype=torch.float64, device=device)
    if batch.numel() == 0:
        return out.to(dtype)
    local, sizes = token_positions(batch, num_graphs)
    row, col = edge_index
    simple = row != col
    row, col = row[simple], col[simple]
    edge_graph = batch[row]
    # graphs, nodes and edges grouped by their graph's size (stable sorts):
    # each size a contiguous range, not a pass over the batch per size
    graph_order = torch.sort(sizes, stable=True)[1]
    distinct, graph_counts = torch.unique_consecutive(sizes[graph_order],
                                                      return_counts=True)
    group_first = torch.cumsum(graph_counts, 0) - graph_counts
    slot = torch.empty_like(sizes)  # position among graphs of its size
    slot[graph_order] = torch.arange(num_graphs, device=device) - \
        torch.repeat_interleave(group_first, graph_counts)
    node_order = torch.sort(sizes[batch], stable=True)[1]
    edge_sizes = sizes[edge_graph]
    edge_order = torch.sort(edge_sizes, stable=True)[1]
    edge_counts = torch.bincount(torch.searchsorted(distinct, edge_sizes),
                                 minlength=distinct.numel())
    # Host synchronisation: one dense block per distinct graph size, whose
    # shape is that size.
    node_start = edge_start = 0
    for n, count, num_edges in zip(distinct.tolist(), graph_counts.tolist(),
                                   edge_counts.tolist()):
        nodes = node_order[node_start:node_start + count * n]
        edges = edge_order[edge_start:edge_start + num_edges]
        node_start += count * n
        edge_start += num_edges
        if n == 0:
            continue
        check_size(count * n * n, f"the dense Laplacians of {count} graphs "
                   f"of {n} nodes")
        adj = torch.zeros(count, n, n, dtype=torch.float64, device=device)
        g, u, v = slot[edge_graph[edges]], local[row[edges]], local[col[edges]]
        adj[g, u, v] = 1.0  # binary: duplicates and both directions merge
        adj[g, v, u] = 1.0
        degree = adj.sum(-1)
        inv_sqrt = torch.where(degree > 0, degree.clamp(min=1).rsqrt(), 0.0)
        laplacian = torch.eye(n, dtype=torch.float64, device=device) - (
            inv_sqrt.unsqueeze(-1) * adj * inv_sqrt.unsqueeze(-2))
        cols = min(k, n)
        vectors = torch.linalg.eigh(laplacian)[1][..., :cols]  # ascending
        out[nodes, :cols] = make_signs_canonical(vectors)[slot[batch[nodes]],
                                                          local[nodes]]
    return out.to(dtype)


def normalized_adjacency(edge_index: Tensor,
                         num_nodes: int) -> scipy.sparse.csr_matrix:
    r""":math:`D^{-1/2} A D^{-1/2}` of the undirected simple graph behind
    :obj:`edge_index` (both directions of every edge, self-loops and
    duplicates dropped) as a SciPy matrix on the host; isolated nodes get
    an all-zero row."""
    row, col = edge_index.cpu().numpy()
    keep = row != col
    row, col = row[keep], col[keep]
    adj = scipy.sparse.coo_matrix(
        (np.ones(2 * row.size), (np.concatenate([row, col]),
                                 np.concatenate([col, row]))),
        shape=(num_nodes, num_nodes)).tocsr()
    adj.data[:] = 1.0  # duplicates were summed: make the adjacency binary
    degree = np.asarray(adj.sum(axis=1)).reshape(-1)
    inv_sqrt = np.zeros_like(degree)
    inv_sqrt[degree > 0] = degree[degree > 0]**-0.5
    scale = scipy.sparse.diags(inv_sqrt)
    return (scale @ adj @ scale).tocsr()


def laplacian_node_ids(edge_index: Tensor, num_nodes: int, k: int,
                       dense_threshold: int = 1000,
                       dtype: torch.dtype = torch.float) -> Tensor:
    r"""The :obj:`k` eigenvectors of
    :math:`\Delta = I - D^{-1/2} A D^{-1/2}` with the smallest eigenvalues
    (the trivial one kept), as columns of an :obj:`[n, k]` matrix, on the
    device of :obj:`edge_index`.

    The graph is treated as undirected and simple (both directions of every
    edge, self-loops and duplicates dropped); an isolated node has degree 0
    and its row of :math:`D^{-1/2} A D^{-1/2}` is 0. Graphs with at most
    :obj:`dense_threshold` nodes use a dense symmetric eigensolver
    (:func:`torch.linalg.eigh`, on the device of :obj:`edge_index`, see
    :func:`batched_laplacian_node_ids`); larger ones use ARPACK (SciPy's
    ``eigsh``, on the host) on :math:`I + D^{-1/2} A D^{-1/2} = 2I - \Delta`
    (largest algebraic eigenvalues) with a fixed start vector, so results
    are reproducible. Columns are sorted by eigenvalue, each flipped by
    :func:`make_signs_canonical` (entry of largest magnitude positive), and
    zero-padded when :math:`n < k`. Within a degenerate eigenspace (e.g. a
    disconnected graph) the basis is one valid orthonormal basis, not a
    canonical one.

    Args:
        edge_index (torch.Tensor): Edges, shape :obj:`[2, m]`.
        num_nodes (int): Number of nodes :math:`n`.
        k (int): Number of eigenvectors (columns) :math:`d_p`.
        dense_threshold (int): Largest :math:`n` solved densely.
        dtype (torch.dtype): Output dtype.

    :rtype: :class:`torch.Tensor` of shape :obj:`[num_nodes, k]`
    """
    check_dim(k, 'k')
    check_edge_index(edge_index, num_nodes)
    cols = min(k, num_nodes)
    # ARPACK needs cols < n - 1 for a reliable Lanczos run.
    if num_nodes <= dense_threshold or cols >= num_nodes - 1:
        batch = edge_index.new_zeros(num_nodes, dtype=torch.long)
        return batched_laplacian_node_ids(edge_index, batch, 1, k, dtype)
    shifted = scipy.sparse.identity(num_nodes, format='csr') + (
        normalized_adjacency(edge_index, num_nodes))
    # a fixed, generic start vector: deterministic, and not an eigenvector
    # of regular graphs (unlike the all-ones vector)
    start = np.random.default_rng(0).uniform(0.5, 1.5, num_nodes)
    values, vectors = scipy.sparse.linalg.eigsh(
        shifted, k=cols, which='LA', v0=start,
        ncv=min(num_nodes, max(2 * cols + 1, 20)), tol=1e-10,
        maxiter=num_nodes * 50)
    vectors = torch.from_numpy(vectors[:, np.argsort(-values, kind='stable')])
    out = torch.zeros(num_nodes, k, dtype=dtype, device=edge_index.device)
    out[:, :cols] = make_signs_canonical(vectors).to(out.device, dtype)
    return out
