r"""N-simplicial attention on a sparse set of tuples, as pure functions
(`Dussolle & Liò 2025 <https://arxiv.org/abs/2511.04624>`_, §2.2 and §2.4).

A tuple :math:`t = (q, k_1, \dots, k_N)` (a column of
:obj:`simplex_index [N+1, T]`, row 0 the query) is an ordinary attention key
for :math:`q` made of :math:`N` nodes ("virtual key"). Per head,

.. math::
    \ell_t = \frac{1}{\sqrt{d}} \sum_{a=1}^{d} Q_{q a} K^{(1)}_{k_1 a}
    \cdots K^{(N)}_{k_N a}
    \quad\text{(multilinear)}, \qquad
    \ell_t = \frac{1}{\sqrt{d}} \sum_{c} \det\left[Q^{c}_{q}, K^{(1)c}_{k_1},
    \dots, K^{(N)c}_{k_N}\right] \quad\text{(determinant)}

where :math:`c` runs over the chunks of :math:`N+1` consecutive channels;
:math:`\alpha` is the softmax of :math:`\ell` over the tuples of each query
and

.. math::
    \mathrm{out}_q = \sum_{t : t_0 = q} \alpha_t \,
    V^{(1)}_{k_1} \odot \cdots \odot V^{(N)}_{k_N}.

Cost: :math:`O(T \cdot H \cdot d)` time. Memory: the tuples are processed
in chunks under activation checkpointing, so only :math:`O(T \cdot H)`
(logits and weights) is kept for the whole tuple set, plus one chunk's
:math:`[\text{chunk}, H, d]` temporaries. A query with no tuple gets a zero
output.
"""
import itertools
import math
from typing import Iterator, List, Optional, Sequence, Tuple, Union

import torch
from torch import Tensor
from torch.utils.checkpoint import checkpoint
from torch_geometric.utils import to_dense_batch

from torch_geometric_hot.ops.scatter import scatter_sum, segment_counts
from torch_geometric_hot.ops.softmax import grouped_log_softmax, \
    grouped_softmax
from torch_geometric_hot.validation import check_size, validating

FORMS = ('multilinear', 'determinant')
# Elements of a chunk's [chunk, H, d] temporaries when chunk_size is None.
_CHUNK_ELEMENTS = 2**22


def check_simplex_index(simplex_index: Tensor, order: int,
                        num_nodes: int) -> None:
    r"""Raises a :class:`ValueError`/:class:`TypeError` unless
    :obj:`simplex_index` is a :obj:`long` tensor of shape
    :obj:`[order + 1, T]` with entries in :obj:`[0, num_nodes)`."""
    if not isinstance(simplex_index, Tensor):
        raise TypeError(f"'simplex_index' must be a tensor, got "
                        f"{type(simplex_index).__name__}")
    if simplex_index.dtype != torch.long:
        raise TypeError(f"'simplex_index' must have dtype torch.long, got "
                        f"{simplex_index.dtype}")
    if simplex_index.dim() != 2 or simplex_index.size(0) != order + 1:
        raise ValueError(f"'simplex_index' must have shape [N+1, T] = "
                         f"[{order + 1}, T] for N = {order} keys, got "
                         f"{tuple(simplex_index.shape)}")
    # host synchronisation: a value check, skipped with validation off
    if validating() and simplex_index.numel() > 0 and (
            int(simplex_index.min()) < 0
            or int(simplex_index.max()) >= num_nodes):
        raise ValueError(f"'simplex_index' entries must lie in [0, "
                         f"{num_nodes}) (the number of nodes), got range "
                         f"[{int(simplex_index.min())}, "
                         f"{int(simplex_index.max())}]")


def _check_inputs(query: Tensor, keys: Sequence[Tensor],
                  values: Sequence[Tensor], simplex_index: Tensor) -> None:
    if query.dim() != 3:
        raise ValueError(f"'query' must have shape [n, H, d], got "
                         f"{tuple(query.shape)}")
    if len(keys) < 1:
        raise ValueError("'keys' must hold N >= 1 tensors")
    for k, key in enumerate(keys):
        if key.shape != query.shape:
            raise ValueError(f"'keys[{k}]' must have the shape of 'query' "
                             f"{tuple(query.shape)}, got {tuple(key.shape)}")
    if len(values) != len(keys):
        raise ValueError(f"'values' must hold one tensor per key slot "
                         f"({len(keys)}), got {len(values)}")
    for k, value in enumerate(values):
        if value.dim() != 3 or value.shape[:2] != query.shape[:2]:
            raise ValueError(f"'values[{k}]' must have shape [n, H, d_v] = "
                             f"[{query.size(0)}, {query.size(1)}, d_v], got "
                             f"{tuple(value.shape)}")
        if value.size(2) != values[0].size(2):
            raise ValueError("all 'values' must have the same width d_v")
    check_simplex_index(simplex_index, len(keys), query.size(0))


def gathered_product(tensors: Sequence[Tensor], rows: Tensor) -> Tensor:
    r"""Elementwise product :math:`\prod_r X_r[\mathrm{rows}_r]`.

    Args:
        tensors (list): Tensors of shape :obj:`[n, *]`, one per row of
            :obj:`rows`.
        rows (torch.Tensor): Indices of shape :obj:`[len(tensors), T]`.

    :rtype: :class:`torch.Tensor` of shape :obj:`[T, *]`
    """
    out = tensors[0].index_select(0, rows[0])
    for tensor, index in zip(tensors[1:], rows[1:]):
        out = out * tensor.index_select(0, index)
    return out


def multilinear_logits(query: Tensor, keys: Sequence[Tensor],
                       simplex_index: Tensor) -> Tensor:
    r"""Multilinear logits :math:`\frac{1}{\sqrt d}\sum_a Q_{qa}
    K^{(1)}_{k_1 a} \cdots K^{(N)}_{k_N a}` of every tuple.

    Args:
        query (torch.Tensor): Queries :obj:`[n, H, d]`.
        keys (list): :math:`N` key tensors :obj:`[n, H, d]`.
        simplex_index (torch.Tensor): Tuples :obj:`[N+1, T]`.

    :rtype: :class:`torch.Tensor` of shape :obj:`[T, H]`
    """
    product = gathered_product([query, *keys], simplex_index)  # [T, H, d]
    return product.sum(dim=-1) * query.size(-1)**-0.5


def signed_permutations(size: int) -> Iterator[Tuple[Tuple[int, ...], int]]:
    r"""Yields every permutation of :obj:`range(size)` with its sign."""
    for perm in itertools.permutations(range(size)):
        inversions = sum(perm[i] > perm[j] for i in range(size)
                         for j in range(i + 1, size))
        yield perm, -1 if inversions % 2 else 1


def determinant_logits(query: Tensor, keys: Sequence[Tensor],
                       simplex_index: Tensor) -> Tensor:
    r"""Determinant logits :math:`\frac{1}{\sqrt d}\sum_c \det[Q^c_q,
    K^{(1)c}_{k_1}, \dots, K^{(N)c}_{k_N}]` over the chunks :math:`c` of
    :math:`N+1` consecutive channels, as the explicit signed-permutation
    sum (Leibniz formula; no LU, so it is smooth everywhere).

    Args:
        query (torch.Tensor): Queries :obj:`[n, H, d]`, :math:`d` a multiple
            of :math:`N+1`.
        keys (list): :math:`N` key tensors :obj:`[n, H, d]`.
        simplex_index (torch.Tensor): Tuples :obj:`[N+1, T]`.

    :rtype: :class:`torch.Tensor` of shape :obj:`[T, H]`
    """
    size = len(keys) + 1
    n, heads, dim = query.shape
    if dim % size != 0:
        raise ValueError(f"the determinant form needs a head dimension "
                         f"divisible by N+1 = {size}, got {dim}")
    rows = [
        tensor.view(n, heads, dim // size, size).index_select(0, index)
        for tensor, index in zip([query, *keys], simplex_index)
    ]  # N+1 x [T, H, C, N+1]
    total = None
    for perm, sign in signed_permutations(size):
        term = rows[0][..., perm[0]]
        for row, column in zip(rows[1:], perm[1:]):
            term = term * row[..., column]  # [T, H, C]
        total = term if total is None else (
            total + term if sign > 0 else total - term)
    return total.sum(dim=-1) * dim**-0.5


def simplicial_logits(query: Tensor, keys: Sequence[Tensor],
                      simplex_index: Tensor,
                      form: str = 'multilinear') -> Tensor:
    r"""Logits :obj:`[T, H]` of the given :obj:`form` (``'multilinear'`` or
    ``'determinant'``)."""
    if form == 'multilinear':
        return multilinear_logits(query, keys, simplex_index)
    if form == 'determinant':
        return determinant_logits(query, keys, simplex_index)
    raise ValueError(f"'form' must be one of {FORMS}, got {form!r}")


def _chunks(num_tuples: int, chunk_size: int) -> List[Tuple[int, int]]:
    return [(start, min(start + chunk_size, num_tuples))
            for start in range(0, num_tuples, chunk_size)]


def _aggregate_block(alpha: Tensor, values: Sequence[Tensor], block: Tensor,
                     first: int, size: int) -> Tensor:
    # [size, H, d_v]: the block's queries are first .. first + size - 1.
    messages = alpha.unsqueeze(-1) * gathered_product(values, block[1:])
    return scatter_sum(messages, block[0] - first, size)


def simplicial_attention(query: Tensor, keys: Sequence[Tensor],
                         values: Sequence[Tensor], simplex_index: Tensor,
                         form: str = 'multilinear',
                         chunk_size: Optional[int] = None,
                         return_alpha: bool = False
                         ) -> Union[Tensor, Tuple[Tensor, Tensor]]:
    r"""N-simplicial attention of every node over its tuples (see the
    module docstring for the formulas).

    Args:
        query (torch.Tensor): Queries :obj:`[n, H, d]`.
        keys (list): :math:`N \geq 1` key tensors :obj:`[n, H, d]`, one per
            key slot.
        values (list): :math:`N` value tensors :obj:`[n, H, d_v]`.
        simplex_index (torch.Tensor): Tuples :obj:`[N+1, T]`, row 0 the
            query node.
        form (str, optional): ``'multilinear'`` or ``'determinant'``.
            (default: ``'multilinear'``)
        chunk_size (int, optional): Tuples per chunk. Above one chunk, each
            chunk is recomputed in the backward pass (checkpointing), so
            memory stays :math:`O(T \cdot H)` + one chunk. (default: chunks
            of about :math:`2^{22}/(H d)` tuples, :math:`N!` times fewer
            for the determinant)
        return_alpha (bool, optional): Also return the attention weights
            :obj:`[T, H]` (in the column order of :obj:`simplex_index`).
            (default: :obj:`False`)

    :rtype: :class:`torch.Tensor` of shape :obj:`[n, H, d_v]` (and
        :obj:`alpha [T, H]`)
    """
    _check_inputs(query, keys, values, simplex_index)
    if form not in FORMS:
        raise ValueError(f"'form' must be one of {FORMS}, got {form!r}")
    n, heads, dim = query.shape
    width = max(dim, values[0].size(-1))
    if chunk_size is None:  # the determinant keeps ~N! terms per tuple
        terms = math.factorial(len(keys)) if form == 'determinant' else 1
        chunk_size = max(1, _CHUNK_ELEMENTS // (heads * width * terms))
    if chunk_size < 1:
        raise ValueError(f"'chunk_size' must be positive, got {chunk_size}")
    num_tuples = simplex_index.size(1)
    # compiled: one block (chunks of a data-dependent count of tuples
    # cannot be traced; the memory bound holds eagerly)
    if torch.compiler.is_compiling() or num_tuples <= chunk_size:
        logits = simplicial_logits(query, keys, simplex_index, form)
        alpha = grouped_softmax(logits, simplex_index[0], n)
        out = _aggregate_block(alpha, values, simplex_index, 0, n)
        return (out, alpha) if return_alpha else out

    qrow, perm = simplex_index[0], None
    if bool((qrow[1:] < qrow[:-1]).any()):  # blocks must be query-sorted
        perm = torch.argsort(qrow, stable=True)
        simplex_index = simplex_index[:, perm]
        qrow = simplex_index[0]
    chunks = _chunks(num_tuples, chunk_size)
    logits = torch.cat([
        checkpoint(simplicial_logits, query, keys, simplex_index[:, s:e],
                   form, use_reentrant=False) for s, e in chunks
    ])  # [T, H]
    alpha = grouped_softmax(logits, qrow, n)
    parts, rows = [], []
    for s, e in chunks:
        first, last = int(qrow[s]), int(qrow[e - 1])
        parts.append(
            checkpoint(_aggregate_block, alpha[s:e], values,
                       simplex_index[:, s:e], first, last - first + 1,
                       use_reentrant=False))
        rows.append(torch.arange(first, last + 1, device=qrow.device))
    # Blocks overlap only on boundary queries: n + #chunks rows in total.
    out = scatter_sum(torch.cat(parts), torch.cat(rows), n)
    if not return_alpha:
        return out
    if perm is not None:  # back to the caller's tuple order
        alpha = alpha.new_empty(alpha.shape).index_copy(0, perm, alpha)
    return out, alpha


def indexer_pair_scores(query: Tensor, key: Tensor, weight: Tensor,
                        pair_index: Tensor) -> Tensor:
    r"""DSA indexer scores :math:`s_{ij} = \sum_h w_{ih}\,
    \mathrm{ReLU}(\langle q_{ih}, k_{jh} \rangle)` of the given pairs.

    Args:
        query (torch.Tensor): Indexer queries :obj:`[n, H_I, d_I]`.
        key (torch.Tensor): Indexer keys :obj:`[n, H_I, d_I]`.
        weight (torch.Tensor): Head weights :obj:`[n, H_I]`.
        pair_index (torch.Tensor): Pairs :math:`(i, j)`, :obj:`[2, P]`.

    :rtype: :class:`torch.Tensor` of shape :obj:`[P]`
    """
    row, col = pair_index
    dots = (query.index_select(0, row) * key.index_select(0, col)).sum(-1)
    return (weight.index_select(0, row) * dots.relu()).sum(-1)


def indexer_dense_scores(query: Tensor, key: Tensor, weight: Tensor,
                         batch: Tensor) -> Tuple[Tensor, Tensor]:
    r"""All indexer scores inside each graph, on per-graph padded blocks.

    Args:
        query (torch.Tensor): Indexer queries :obj:`[n, H_I, d_I]`.
        key (torch.Tensor): Indexer keys :obj:`[n, H_I, d_I]`.
        weight (torch.Tensor): Head weights :obj:`[n, H_I]`.
        batch (torch.Tensor): Sorted graph id of every node :obj:`[n]`.

    Returns:
        :obj:`(scores [B, L, L], mask [B, L])`, :math:`L` the largest graph
        size; :math:`O(B L^2 H_I d_I)` time, :math:`B H_I L^2` elements
        checked against the size limit
        (:func:`~torch_geometric_hot.validation.size_limit`).
    """
    heads, dim = query.shape[1:]
    if batch.numel():
        graphs, length = int(batch.max()) + 1, int(segment_counts(
            batch, int(batch.max()) + 1).max())
        check_size(graphs * heads * length * length,
                   f"the indexer's dense scores ({graphs} graphs x {heads} "
                   f"heads x {length}^2 pairs of the largest graph)")
    q, mask = to_dense_batch(query.flatten(1), batch)
    k, _ = to_dense_batch(key.flatten(1), batch)
    w, _ = to_dense_batch(weight, batch)  # [B, L, H_I]
    num_graphs, length = mask.shape
    q = q.view(num_graphs, length, heads, dim)
    k = k.view(num_graphs, length, heads, dim)
    dots = torch.einsum('bihz,bjhz->bhij', q, k).relu()
    return torch.einsum('bih,bhij->bij', w, dots), mask


def indexer_distillation_loss(pair_score: Tensor, pair_index: Tensor,
                              alpha: Tensor, simplex_index: Tensor,
                              num_nodes: int, kind: str = 'kl') -> Tensor:
    r"""Auxiliary loss that trains the indexer (its top-:math:`k` selection
    has no gradient) to follow the attention, as DeepSeek Sparse Attention
    does: the target of pair :math:`(i, j)` is the (detached) attention mass
    that query :math:`i` puts on tuples whose first key is :math:`j`,
    averaged over heads, :math:`p_{ij} = \frac{1}{H}\sum_h \sum_{t: t_0 = i,
    t_1 = j} \alpha_{th}`; the prediction is the softmax of the indexer
    scores over the pairs of :math:`i`.

    Args:
        pair_score (torch.Tensor): Indexer scores :obj:`[P]` (with grad).
        pair_index (torch.Tensor): Pairs :obj:`[2, P]`, sorted by
            :math:`(i, j)`, no duplicates (as
            :class:`~torch_geometric_hot.nn.SimplexIndexer` returns them).
        alpha (torch.Tensor): Attention weights :obj:`[T, H]` of the tuples.
            Pass the selected tuples' attention (sparse stage) or the dense
            attention restricted to the pairs (dense warm-up).
        simplex_index (torch.Tensor): Tuples :obj:`[N+1, T]`; tuples whose
            first hop is not a pair are ignored.
        num_nodes (int): Number of nodes.
        kind (str): ``'kl'`` (:math:`\mathrm{KL}(p \,\|\, \hat p)` per query,
            averaged over queries) or ``'mse'`` (mean squared error over
            pairs).

    :rtype: scalar :class:`torch.Tensor`
    """
    if kind not in ('kl', 'mse'):
        raise ValueError(f"'kind' must be 'kl' or 'mse', got {kind!r}")
    num_pairs = pair_index.size(1)
    if num_pairs == 0:
        return pair_score.sum() * 0.0
    pair_key = pair_index[0] * num_nodes + pair_index[1]
    tuple_key = simplex_index[0] * num_nodes + simplex_index[1]
    position = torch.searchsorted(pair_key, tuple_key).clamp(max=num_pairs -
                                                             1)
    found = pair_key[position] == tuple_key
    target = scatter_sum(alpha.detach().mean(-1)[found], position[found],
                         num_pairs)  # [P]
    log_pred = grouped_log_softmax(pair_score, pair_index[0], num_nodes)
    if kind == 'mse':
        return (log_pred.exp() - target).pow(2).mean()
    num_queries = int(torch.unique(pair_index[0]).numel())
    kl = torch.xlogy(target, target) - target * log_pred
    return kl.sum() / num_queries
