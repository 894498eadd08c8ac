r"""Softmax attention of a class of the equivariant basis within its key
groups, as one operator with an explicit backward pass,
``torch_geometric_hot::grouped_softmax_attention``: the native kernel
(``ops/native/grouped_softmax.c``) on the CPU, the enumerated pairs of
:func:`~torch_geometric_hot.ops.softmax.pair_softmax_attention` elsewhere
(``docs/design.md``, "Softmax attention", which gives its backward pass
and dropout). The groups
(:class:`~torch_geometric_hot.ops.native.SoftmaxGroups`) depend on the
batch's indices only and are kept with the view.
"""
from typing import List, Optional, Tuple, Union

import torch
from torch import Tensor

from torch_geometric_hot.ops import native
from torch_geometric_hot.ops.attention.dropout import draw_seed, \
    dropout_threshold, pair_dropout
from torch_geometric_hot.ops.native import Groups, SoftmaxGroups
from torch_geometric_hot.ops.scatter import group_pairs, scatter_sum
from torch_geometric_hot.ops.softmax import check_pairs, \
    pair_softmax_attention
from torch_geometric_hot.validation import check_device, validating

#: A seed of dropout: an integer, or a CPU tensor of one.
Seed = Union[int, Tensor]


def softmax_groups(query_group: Tensor, key_group: Tensor,
                   key_position: Tensor, num_groups: int,
                   query_ids: List[Tensor], key_ids: List[Tensor],
                   key_hash: Optional[Tensor] = None) -> SoftmaxGroups:
    r"""The groups of :func:`grouped_softmax_attention` from the index
    tensors of a class's attention
    (:func:`~torch_geometric_hot.ops.key_groups.attention_index`:
    the group of every query row, the group and the input row of every key,
    the number of groups, the exclusions as ids), the keys' rows dropout
    hashes :obj:`key_hash` (:obj:`None`: :obj:`key_position`)."""
    query_runs = native.runs(query_group, num_groups)
    key_runs = native.runs(key_group, num_groups)
    queries = Groups.of(query_runs, num_groups)
    keys = Groups.of(key_runs.through(key_position), num_groups)
    key_counts = keys.ptr.diff()
    query_ids_ = torch.stack(query_ids) if query_ids else \
        query_group.new_empty(0, query_group.numel())
    key_ids_ = torch.stack(key_ids).index_select(1, key_runs.rows) \
        if key_ids else key_group.new_empty(0, key_group.numel())
    # host synchronisation: the largest group sizes the kernel's panels,
    # the largest id whether the ids fit the kernel's int32
    max_keys, max_id = torch.stack([
        key_counts.max() if num_groups else key_counts.new_zeros(()),
        torch.cat([query_ids_.flatten(), key_ids_.flatten(),
                   key_counts.new_zeros(1)]).abs().max()]).tolist()
    dtype = torch.int32 if max_id < 2**31 else torch.long
    return SoftmaxGroups(
        queries, keys, query_ids_.to(dtype).contiguous(),
        key_ids_.to(dtype).contiguous(), max_keys,
        queries.ptr.diff() * (key_counts + 1), keys.rows if key_hash is None
        else key_runs.through(key_hash).rows.contiguous())


def _pairs(groups: SoftmaxGroups) -> Tuple[Tensor, Tensor, Tensor]:
    # the (query row, input row) pairs that no exclusion removes, and the
    # rows dropout hashes for their keys
    num_groups = groups.queries.ptr.numel() - 1
    ids = torch.arange(num_groups, device=groups.queries.ptr.device)
    query_group = ids.repeat_interleave(groups.queries.ptr.diff())
    key_group = ids.repeat_interleave(groups.keys.ptr.diff())
    query, key = group_pairs(
        query_group, key_group, num_groups,
        groups.query_ids.index_select(1, groups.queries.rows), groups.key_ids)
    return (groups.queries.rows.index_select(0, query),
            groups.keys.rows.index_select(0, key),
            groups.key_hash.index_select(0, key))


def pair_count(rows: int, costs: Tensor) -> int:
    r"""The (query, key) pairs of groups of :obj:`rows` query rows in all
    from their costs (:class:`~torch_geometric_hot.ops.native.SoftmaxGroups`:
    queries times keys plus one per group; host synchronisation)."""
    return int(costs.sum()) - rows


def _groups(query_rows: Tensor, query_ptr: Tensor, key_rows: Tensor,
            key_ptr: Tensor, query_ids: Tensor, key_ids: Tensor,
            key_hash: Tensor, max_keys: int, costs: Tensor) -> SoftmaxGroups:
    return SoftmaxGroups(Groups(query_rows, query_ptr),
                         Groups(key_rows, key_ptr), query_ids, key_ids,
                         max_keys, costs, key_hash)


def _attend(q: Tensor, k: Tensor, v: Tensor, groups: SoftmaxGroups,
            seed: int, threshold: int) -> Tuple[Tensor, Tensor]:
    # the forward pass with torch operations, over the enumerated pairs
    H = q.size(1)
    check_pairs(pair_count(groups.queries.rows.numel(), groups.costs),
                H * (q.size(-1) + k.size(-1) + v.size(-1)), 'its key groups')
    query, key, hashed = _pairs(groups)
    out, _, lse = pair_softmax_attention(
        q, k, v, query, key, pair_dropout(query, hashed, seed, threshold))
    return out, lse


def _attend_backward(grad: Tensor, q: Tensor, k: Tensor, v: Tensor,
                     out: Tensor, lse: Tensor, groups: SoftmaxGroups,
                     seed: int, threshold: int
                     ) -> Tuple[Tensor, Tensor, Tensor]:
    # the backward pass with torch operations, over the enumerated pairs
    query, key, hashed = _pairs(groups)
    q_pairs, k_pairs = q.index_select(0, query), k.index_select(0, key)
    g_pairs = grad.index_select(0, query)
    weights = ((q_pairs * k_pairs).sum(-1) -
               lse.index_select(0, query)).exp()
    delta = (grad * out).sum(-1).index_select(0, query)
    products = (g_pairs * v.index_select(0, key)).sum(-1)
    kept = weights
    if threshold:
        factors = pair_dropout(query, hashed, seed, threshold)(
            torch.ones_like(weights))
        products, kept = products * factors, weights * factors
    scores = (weights * (products - delta)).unsqueeze(-1)
    return (scatter_sum(scores * k_pairs, query, q.size(0)),
            scatter_sum(scores * q_pairs, key, k.size(0)),
            scatter_sum(kept.unsqueeze(-1) * g_pairs, key, v.size(0)))


@torch.library.custom_op('torch_geometric_hot::grouped_softmax_attention',
                         mutates_args=())
def _grouped_softmax(q: Tensor, k: Tensor, v: Tensor, query_rows: Tensor,
                     query_ptr: Tensor, key_rows: Tensor, key_ptr: Tensor,
                     query_ids: Tensor, key_ids: Tensor, key_hash: Tensor,
                     max_keys: int, costs: Tensor, seed: int,
                     threshold: int) -> Tuple[Tensor, Tensor]:
    return _attend(q, k, v, _groups(query_rows, query_ptr, key_rows,
                                    key_ptr, query_ids, key_ids, key_hash,
                                    max_keys, costs), seed, threshold)


@_grouped_softmax.register_fake
def _(q, k, v, *args):
    return (q.new_empty(q.size(0), q.size(1), v.size(-1)),
            q.new_empty(q.size(0), q.size(1)))


@_grouped_softmax.register_kernel('cpu')
def _(q, k, v, *index):
    groups, (seed, threshold) = _groups(*index[:9]), index[9:]
    if native.applies(q, k, v) and groups.key_ids.dtype == torch.int32:
        return native.grouped_softmax_attention(q, k, v, groups, seed,
                                                threshold)
    return _attend(q, k, v, groups, seed, threshold)


@torch.library.custom_op(
    'torch_geometric_hot::grouped_softmax_attention_backward',
    mutates_args=())
def _grouped_softmax_backward(
        grad: Tensor, q: Tensor, k: Tensor, v: Tensor, out: Tensor,
        lse: Tensor, query_rows: Tensor, query_ptr: Tensor, key_rows: Tensor,
        key_ptr: Tensor, query_ids: Tensor, key_ids: Tensor,
        key_hash: Tensor, max_keys: int, costs: Tensor, seed: int,
        threshold: int) -> Tuple[Tensor, Tensor, Tensor]:
    return _attend_backward(grad, q, k, v, out, lse, _groups(
        query_rows, query_ptr, key_rows, key_ptr, query_ids, key_ids,
        key_hash, max_keys, costs), seed, threshold)


@_grouped_softmax_backward.register_fake
def _(grad, q, k, v, *args):
    return torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)


@_grouped_softmax_backward.register_kernel('cpu')
def _(grad, q, k, v, out, lse, *index):
    groups, (seed, threshold) = _groups(*index[:9]), index[9:]
    if native.applies(q, k, v, grad) and \
            groups.key_ids.dtype == torch.int32:
        return native.grouped_softmax_attention_backward(
            grad, q, k, v, out, lse, groups, seed, threshold)
    return _attend_backward(grad, q, k, v, out, lse, groups, seed,
                            threshold)


def _setup_context(ctx, inputs, output) -> None:
    q, k, v, *index = inputs
    ctx.max_keys, ctx.seed, ctx.threshold = index[7], index[9], index[10]
    ctx.save_for_backward(q, k, v, *output, *index[:7], index[8])


def _backward(ctx, grad: Tensor, _grad_lse: Optional[Tensor]):
    q, k, v, out, lse, *index = ctx.saved_tensors
    grads = _grouped_softmax_backward(
        grad.contiguous(), q, k, v, out, lse, *index[:7], ctx.max_keys,
        index[7], ctx.seed, ctx.threshold)
    return (*grads, *[None] * 11)


_grouped_softmax.register_autograd(_backward, setup_context=_setup_context)


def grouped_softmax_attention(q: Tensor, k: Tensor, v: Tensor,
                              groups: SoftmaxGroups, dropout: float = 0.0,
                              seed: Optional[Seed] = None) -> Tensor:
    r"""Softmax attention of every query row :math:`i` over the keys
    :math:`K(i)` of its group that no exclusion removes (the operator
    ``torch_geometric_hot::grouped_softmax_attention``):

    .. math::
        o_i = \sum_{j \in K(i)} \exp(q_i^\top k_j - l_i)\, v_j, \qquad
        l_i = \log \sum_{j \in K(i)} \exp(q_i^\top k_j),

    :math:`o_i = 0` where :math:`K(i)` is empty.

    Args:
        q (torch.Tensor): Queries :obj:`[rows, H, d]` (already scaled).
        k (torch.Tensor): Keys :obj:`[inputs, H, d]`.
        v (torch.Tensor): Values :obj:`[inputs, H, d_v]`.
        groups (SoftmaxGroups): The groups (:func:`softmax_groups`).
        dropout (float, optional): Dropout probability on the attention
            weights, in :math:`[0, 1)`. (default: :obj:`0.0`)
        seed (int or torch.Tensor, optional): The seed of dropout's
            draws, in :math:`[0, 2^{32})`, or a CPU tensor of it (default:
            drawn from torch's default generator,
            :func:`~torch_geometric_hot.ops.attention.dropout.draw_seed`).

    :rtype: :class:`torch.Tensor` :obj:`[rows, H, d_v]`
    """
    _check_inputs(q, k, v, groups)
    return _grouped_softmax(q, k, v, *_index(groups),
                            *_dropout(dropout, seed))[0]


def grouped_softmax_gradients(grad: Tensor, q: Tensor, k: Tensor, v: Tensor,
                              groups: SoftmaxGroups, dropout: float = 0.0,
                              seed: Optional[Seed] = None
                              ) -> Tuple[Tensor, Tensor, Tensor]:
    r"""The gradients of :func:`grouped_softmax_attention` with respect to
    :obj:`q`, :obj:`k` and :obj:`v` for the output gradient :obj:`grad`
    (:obj:`[rows, H, d_v]`), the attention recomputed (its output and
    log-sum-exp, without autograd). Dropout draws as the forward pass did
    from the same :obj:`seed`, or from the default generator in the same
    state."""
    _check_inputs(q, k, v, groups)
    index, drop = _index(groups), _dropout(dropout, seed)
    out, lse = _grouped_softmax(q, k, v, *index, *drop)
    return tuple(_grouped_softmax_backward(grad.contiguous(), q, k, v, out,
                                           lse, *index, *drop))


def _index(groups: SoftmaxGroups) -> tuple:
    # the operators' index arguments
    return (*groups.queries, *groups.keys, groups.query_ids, groups.key_ids,
            groups.key_hash, groups.max_keys, groups.costs)


def _dropout(dropout: float, seed: Optional[Seed]) -> Tuple[int, int]:
    # the operators' seed and threshold (a seed drawn from the default
    # CPU generator when none is given)
    if not 0.0 <= dropout < 1.0:
        raise ValueError(f"'dropout' must be in [0, 1), got {dropout}")
    threshold = dropout_threshold(dropout)
    if not threshold:
        return 0, 0
    seed = int(draw_seed(dropout) if seed is None else seed)  # a CPU value
    if not 0 <= seed < 2**32:
        raise ValueError(f"'seed' must be in [0, 2**32), got {seed}")
    return seed, threshold


def _check_inputs(q: Tensor, k: Tensor, v: Tensor,
                  groups: SoftmaxGroups) -> None:
    # the shapes always (the native kernel reads rows by them), the key
    # rows while validating (host synchronisation: their largest)
    for name, t in (('q', q), ('k', k), ('v', v)):
        if not isinstance(t, Tensor) or t.dim() != 3 or \
                not t.is_floating_point():
            raise ValueError(f"'{name}' must be a floating-point tensor "
                             f"[rows, heads, channels], got "
                             f"{getattr(t, 'shape', type(t).__name__)}")
        check_device(t, q.device, name, "'q'")
    if k.shape[:2] != v.shape[:2] or k.size(1) != q.size(1) or \
            k.size(2) != q.size(2):
        raise ValueError(f"'k' must be [inputs, {q.size(1)}, {q.size(2)}] "
                         f"(the heads and channels of 'q') and 'v' [inputs, "
                         f"{q.size(1)}, d_v] with the rows of 'k', got "
                         f"{list(k.shape)} and {list(v.shape)}")
    check_device(groups.queries.rows, q.device, 'groups', "'q'")
    if groups.queries.rows.numel() != q.size(0):
        raise ValueError(f"'groups' lists {groups.queries.rows.numel()} "
                         f"query rows but 'q' has {q.size(0)}")
    if validating() and groups.keys.rows.numel() and \
            int(groups.keys.rows.max()) >= k.size(0):
        raise ValueError(f"'groups' lists key rows up to "
                         f"{int(groups.keys.rows.max())} but 'k' has "
                         f"{k.size(0)} rows")
