r"""Node identifiers for TokenGT: orthonormal (or near-orthonormal) vectors
:math:`P \in \mathbb{R}^{n \times d_p}`, one row per node
(`Kim et al. 2022 <https://arxiv.org/abs/2207.02505>`_, §2 and App. A.3).

* :func:`orthogonal_node_ids`: orthogonal random features (ORF), rows of a
  random orthogonal matrix;
* :func:`laplacian_node_ids`: eigenvectors of the symmetric normalised
  Laplacian :math:`I - D^{-1/2} A D^{-1/2}`;
* :func:`random_node_ids`: near-orthonormal random :math:`\pm 1/\sqrt{d_p}`
  vectors for graphs with far more nodes than :math:`d_p`.

Every function returns exactly :obj:`dim` columns: graphs with fewer nodes
than :obj:`dim` get zero-padded columns, never an error.
"""
from typing import Optional, Sequence, Union

import numpy as np
import scipy.linalg
import scipy.sparse
import scipy.sparse.linalg
import torch
from torch import Tensor

from torch_geometric_hot.ops.validation import check_edge_index

Sizes = Union[int, Sequence[int], Tensor]


def check_dim(dim: int, name: str = 'dim') -> None:
    r"""Raises a :class:`ValueError` unless :obj:`dim` is a positive int."""
    if not isinstance(dim, int) or isinstance(dim, bool) or dim < 1:
        raise ValueError(f"'{name}' must be a positive integer, got {dim!r}")


def _as_sizes(num_nodes: Sizes) -> Tensor:
    sizes = torch.as_tensor(num_nodes, dtype=torch.long).reshape(-1)
    if (sizes < 0).any():
        raise ValueError(f"'num_nodes' must be non-negative, got "
                         f"{sizes.tolist()}")
    return sizes


def _haar_columns(count: int, n: int, cols: int,
                  generator: Optional[torch.Generator],
                  dtype: torch.dtype) -> Tensor:
    r"""`count` independent :obj:`[n, cols]` matrices with orthonormal
    columns, each distributed as :obj:`cols` columns of a Haar-random
    :obj:`n x n` orthogonal matrix (QR of a Gaussian with the signs of
    :math:`\mathrm{diag}(R)` fixed)."""
    gaussian = torch.randn(count, n, cols, generator=generator, dtype=dtype)
    q, r = torch.linalg.qr(gaussian)  # [count, n, cols], [count, cols, cols]
    signs = torch.sign(torch.diagonal(r, dim1=-2, dim2=-1))
    signs = torch.where(signs == 0, torch.ones_like(signs), signs)
    return q * signs.unsqueeze(-2)


def orthogonal_node_ids(num_nodes: Sizes, dim: int,
                        generator: Optional[torch.Generator] = None,
                        dtype: torch.dtype = torch.float) -> Tensor:
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
        generator (torch.Generator, optional): Random generator.
        dtype (torch.dtype): Output dtype (computed in float32 and cast
            for the half types).

    :rtype: :class:`torch.Tensor` of shape :obj:`[sum(num_nodes), dim]`,
        the graphs' rows in order.
    """
    check_dim(dim)
    sizes = _as_sizes(num_nodes)
    out = torch.zeros(int(sizes.sum()), dim, dtype=dtype)
    if out.numel() == 0:
        return out
    if dtype not in (torch.float32, torch.float64):  # no QR in half types
        return orthogonal_node_ids(sizes, dim, generator).to(dtype)
    starts = torch.cumsum(sizes, 0) - sizes
    for n in torch.unique(sizes).tolist():
        if n == 0:
            continue
        which = (sizes == n).nonzero().view(-1)
        cols = min(n, dim)
        blocks = _haar_columns(which.numel(), n, cols, generator, dtype)
        rows = (starts[which].view(-1, 1) + torch.arange(n)).view(-1)
        out[rows, :cols] = blocks.reshape(-1, cols)
    return out


def random_node_ids(num_nodes: Sizes, dim: int,
                    generator: Optional[torch.Generator] = None,
                    dtype: torch.dtype = torch.float) -> Tensor:
    r"""Near-orthonormal random node identifiers: every entry is
    :math:`\pm 1/\sqrt{d_p}` by a fair coin, so rows have unit norm and the
    inner product of two distinct rows has mean 0 and standard deviation
    :math:`1/\sqrt{d_p}` (TokenGT App. C.3, "Near-ORF"). O(n d_p) for any
    :math:`n`.

    Args:
        num_nodes (int, list or torch.Tensor): Node count of every graph
            (the result does not depend on how it is split).
        dim (int): Identifier dimension :math:`d_p`.
        generator (torch.Generator, optional): Random generator.
        dtype (torch.dtype): Output dtype.

    :rtype: :class:`torch.Tensor` of shape :obj:`[sum(num_nodes), dim]`
    """
    check_dim(dim)
    total = int(_as_sizes(num_nodes).sum())
    bits = torch.randint(0, 2, (total, dim), generator=generator)
    return (bits.to(dtype) * 2 - 1) * dim**-0.5


def make_signs_canonical(vectors: np.ndarray, tol: float = 1e-8) -> np.ndarray:
    r"""Deterministic sign convention for eigenvectors: flips every column
    so that its entry of largest absolute value is positive (the first such
    entry, up to :obj:`tol`, when several tie). All-zero columns stay zero.

    Args:
        vectors (numpy.ndarray): Columns to normalise, shape :obj:`[n, k]`.
        tol (float): Entries within :obj:`tol` of the largest magnitude
            count as ties.
    """
    if vectors.size == 0:
        return vectors
    magnitude = np.abs(vectors)
    pivot = np.argmax(magnitude >= magnitude.max(axis=0) - tol, axis=0)
    signs = np.sign(vectors[pivot, np.arange(vectors.shape[1])])
    signs[signs == 0] = 1.0
    return vectors * signs


def normalized_adjacency(edge_index: Tensor,
                         num_nodes: int) -> scipy.sparse.csr_matrix:
    r""":math:`D^{-1/2} A D^{-1/2}` of the undirected simple graph behind
    :obj:`edge_index` (both directions of every edge, self-loops and
    duplicates dropped); isolated nodes get an all-zero row."""
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


def _start_vector(n: int) -> np.ndarray:
    # A fixed, generic start vector: deterministic, and not an eigenvector
    # of regular graphs (unlike the all-ones vector).
    return np.random.default_rng(0).uniform(0.5, 1.5, n)


def laplacian_node_ids(edge_index: Tensor, num_nodes: int, k: int,
                       dense_threshold: int = 1000,
                       dtype: torch.dtype = torch.float) -> Tensor:
    r"""The :obj:`k` eigenvectors of
    :math:`\Delta = I - D^{-1/2} A D^{-1/2}` with the smallest eigenvalues
    (the trivial one kept), as columns of an :obj:`[n, k]` matrix.

    The graph is treated as undirected and simple (see
    :func:`normalized_adjacency`); an isolated node has degree 0 and its row
    of :math:`D^{-1/2} A D^{-1/2}` is 0. Graphs with at most
    :obj:`dense_threshold` nodes use a dense symmetric eigensolver
    (LAPACK ``syevd``); larger ones use ARPACK (``eigsh``) on
    :math:`I + D^{-1/2} A D^{-1/2} = 2I - \Delta` (largest algebraic
    eigenvalues) with a fixed start vector, so results are reproducible.
    Columns are sorted by eigenvalue, each flipped by
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
    out = np.zeros((num_nodes, k))
    if num_nodes == 0:
        return torch.from_numpy(out).to(dtype)
    adj = normalized_adjacency(edge_index, num_nodes)
    cols = min(k, num_nodes)
    # ARPACK needs cols < n - 1 for a reliable Lanczos run.
    if num_nodes <= dense_threshold or cols >= num_nodes - 1:
        laplacian = np.eye(num_nodes) - adj.toarray()
        _, vectors = scipy.linalg.eigh(laplacian, subset_by_index=(0, cols -
                                                                   1))
    else:
        shifted = scipy.sparse.identity(num_nodes, format='csr') + adj
        values, vectors = scipy.sparse.linalg.eigsh(
            shifted, k=cols, which='LA', v0=_start_vector(num_nodes),
            ncv=min(num_nodes, max(2 * cols + 1, 20)), tol=1e-10,
            maxiter=num_nodes * 50)
        vectors = vectors[:, np.argsort(-values, kind='stable')]
    out[:, :cols] = make_signs_canonical(vectors)
    return torch.from_numpy(out).to(dtype)
