r"""Multi-head self-attention over a flat list of tokens that belong to
several graphs, never across graphs (the attention of TokenGT,
`Kim et al. 2022 <https://arxiv.org/abs/2207.02505>`_).

* :func:`per_graph_softmax_attention`: exact softmax attention through
  :func:`torch.nn.functional.scaled_dot_product_attention` on per-graph
  padded blocks with a key-padding mask (fused kernels: the
  :math:`L \times L` score matrix is never materialised).
* :func:`grouped_linear_attention`: kernel (Performer) attention on the flat
  token list, :math:`O(T)` time and memory, no padding: per-graph sums
  :math:`S_g = \sum_{t \in g} \phi(k_t) [v_t, 1]^\top` and
  :math:`\mathrm{out}_t = \phi(q_t)^\top S_{g(t)}` normalised by its last
  column.
* :func:`dense_softmax_attention_reference`: the naive per-graph loop both
  are tested against.
"""
from typing import Optional, Tuple

import torch
import torch.nn.functional as F
from torch import Tensor
from torch.autograd.function import once_differentiable

from torch_geometric_hot.ops.scatter import segment_counts

# Largest number of elements of a per-token outer-product temporary
# ([chunk, H, r, d]) built at once by the grouped kernel attention.
_CHUNK_ELEMENTS = 1 << 22


def token_positions(token_batch: Tensor,
                    num_graphs: int) -> Tuple[Tensor, Tensor]:
    r"""Position of every token inside its graph (in flat-list order) and
    the number of tokens of every graph.

    Args:
        token_batch (torch.Tensor): Graph of every token, shape :obj:`[T]`.
        num_graphs (int): Number of graphs :math:`B`.

    :rtype: (:class:`torch.Tensor` :obj:`[T]`, :class:`torch.Tensor`
        :obj:`[B]`)
    """
    lengths = segment_counts(token_batch, num_graphs)
    order = torch.sort(token_batch, stable=True)[1]
    starts = torch.cumsum(lengths, 0) - lengths
    position = torch.empty_like(token_batch)
    position[order] = torch.arange(token_batch.numel(),
                                   device=token_batch.device) - starts[
                                       token_batch[order]]
    return position, lengths


def per_graph_softmax_attention(query: Tensor, key: Tensor, value: Tensor,
                                token_batch: Tensor, num_graphs: int,
                                dropout: float = 0.0,
                                layout: Optional[Tuple[Tensor, Tensor]] = None
                                ) -> Tensor:
    r"""Softmax attention of every token over the tokens of its own graph.

    .. math::
        \mathrm{out}_t = \sum_{s : g(s) = g(t)}
        \mathrm{softmax}_s\left(\frac{q_t^\top k_s}{\sqrt{d}}\right) v_s

    Tokens are scattered into :obj:`[B, H, L_max, d]` blocks, attended with
    :func:`~torch.nn.functional.scaled_dot_product_attention` under a
    key-padding mask (no mask when all graphs have the same size, no copy
    when there is a single graph), and gathered back.

    Args:
        query (torch.Tensor): Queries, shape :obj:`[T, H, d]`.
        key (torch.Tensor): Keys, shape :obj:`[T, H, d]`.
        value (torch.Tensor): Values, shape :obj:`[T, H, d_v]`.
        token_batch (torch.Tensor): Graph of every token, shape :obj:`[T]`.
        num_graphs (int): Number of graphs :math:`B`.
        dropout (float): Dropout on the attention weights.
        layout (tuple, optional): The output of :func:`token_positions`,
            to reuse it across layers.

    :rtype: :class:`torch.Tensor` of shape :obj:`[T, H, d_v]`
    """
    if query.size(0) == 0:
        return value.clone()
    position, lengths = layout if layout is not None else token_positions(
        token_batch, num_graphs)
    max_len = int(lengths.max())
    heads = query.size(1)

    def to_blocks(x: Tensor) -> Tensor:  # [T, H, d] -> [B, H, L, d]
        if num_graphs == 1:
            return x.transpose(0, 1).unsqueeze(0)
        out = x.new_zeros(num_graphs, max_len, heads, x.size(-1))
        out[token_batch, position] = x
        return out.transpose(1, 2)

    mask = None
    if bool((lengths != max_len).any()):
        mask = torch.arange(max_len, device=query.device) < lengths.view(
            -1, 1)  # [B, L]
        mask[lengths == 0, 0] = True  # empty graphs: avoid 0/0
        mask = mask.view(num_graphs, 1, 1, max_len)
    out = F.scaled_dot_product_attention(to_blocks(query), to_blocks(key),
                                         to_blocks(value), attn_mask=mask,
                                         dropout_p=dropout)
    if num_graphs == 1:
        return out[0].transpose(0, 1)
    return out.transpose(1, 2)[token_batch, position]  # [T, H, d_v]


def _chunks(num_rows: int, row_elements: int):
    step = max(1, _CHUNK_ELEMENTS // max(row_elements, 1))
    for start in range(0, num_rows, step):
        yield slice(start, min(start + step, num_rows))


def group_outer_sums(a: Tensor, b: Tensor, group: Tensor,
                     num_groups: int) -> Tensor:
    r""":math:`M_g = \sum_{t : g(t) = g} a_t b_t^\top` per head, built in
    chunks of tokens (a single batched matmul when there is one group).

    Args:
        a (torch.Tensor): Shape :obj:`[T, H, r]`.
        b (torch.Tensor): Shape :obj:`[T, H, d]`.
        group (torch.Tensor): Shape :obj:`[T]`.
        num_groups (int): Number of groups :math:`G`.

    :rtype: :class:`torch.Tensor` of shape :obj:`[G, H, r, d]`
    """
    if num_groups == 1:
        # One GEMM over all heads ([H*r, T] @ [T, H*d]), then the diagonal
        # head blocks: H times the flops of a bmm, but no strided copies.
        heads = a.size(1)
        full = a.reshape(a.size(0), -1).t() @ b.reshape(b.size(0), -1)
        blocks = full.view(heads, a.size(2), heads, b.size(2))
        return torch.diagonal(blocks, dim1=0, dim2=2).permute(2, 0,
                                                              1).unsqueeze(0)
    out = a.new_zeros(num_groups, a.size(1), a.size(2), b.size(2))
    for part in _chunks(a.size(0), a.size(1) * a.size(2) * b.size(2)):
        outer = a[part].unsqueeze(-1) * b[part].unsqueeze(-2)
        out.index_add_(0, group[part], outer)
    return out


def apply_group_maps(a: Tensor, maps: Tensor, group: Tensor) -> Tensor:
    r""":math:`a_t^\top M_{g(t)}` per head, in chunks of tokens.

    Args:
        a (torch.Tensor): Shape :obj:`[T, H, r]`.
        maps (torch.Tensor): Shape :obj:`[G, H, r, d]`.
        group (torch.Tensor): Shape :obj:`[T]`.

    :rtype: :class:`torch.Tensor` of shape :obj:`[T, H, d]`
    """
    if maps.size(0) == 1:  # one GEMM with the block-diagonal head maps
        out = a.reshape(a.size(0), -1) @ torch.block_diag(*maps[0])
        return out.view(a.size(0), a.size(1), -1)
    out = a.new_empty(a.size(0), a.size(1), maps.size(-1))
    for part in _chunks(a.size(0), maps[0].numel()):
        gathered = maps.index_select(0, group[part])  # [c, H, r, d]
        out[part] = (a[part].unsqueeze(-2) @ gathered).squeeze(-2)
    return out


class _GroupedLinearAttention(torch.autograd.Function):
    r"""Un-normalised grouped kernel attention
    :math:`\mathrm{out}_t = \phi(q_t)^\top \sum_{s \in g(t)} \phi(k_s)
    v_s^\top` with a hand-written backward that keeps only :obj:`[T, H, *]`
    and :obj:`[G, H, r, d]` tensors (autograd would save every per-token
    outer product)."""
    @staticmethod
    def forward(ctx, q_feat: Tensor, k_feat: Tensor, value: Tensor,
                group: Tensor, num_groups: int) -> Tensor:
        sums = group_outer_sums(k_feat, value, group, num_groups)
        ctx.save_for_backward(q_feat, k_feat, value, group, sums)
        ctx.num_groups = num_groups
        return apply_group_maps(q_feat, sums, group)

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_out: Tensor):
        q_feat, k_feat, value, group, sums = ctx.saved_tensors
        grad_sums = group_outer_sums(q_feat, grad_out, group, ctx.num_groups)
        grad_q = apply_group_maps(grad_out, sums.transpose(-1, -2), group)
        grad_k = apply_group_maps(value, grad_sums.transpose(-1, -2), group)
        grad_v = apply_group_maps(k_feat, grad_sums, group)
        return grad_q, grad_k, grad_v, None, None


def grouped_linear_attention(q_feat: Tensor, k_feat: Tensor, value: Tensor,
                             group: Tensor, num_groups: int,
                             eps: float = 1e-12) -> Tensor:
    r"""Kernel attention of every token over the tokens of its group:

    .. math::
        \mathrm{out}_t = \frac{\phi(q_t)^\top \sum_{s : g(s) = g(t)}
        \phi(k_s) v_s^\top}{\phi(q_t)^\top \sum_{s : g(s) = g(t)} \phi(k_s)}

    :math:`O(T \cdot H \cdot r \cdot d)` time, :math:`O(T \cdot H \cdot
    (r + d) + G \cdot H \cdot r \cdot d)` memory; keys of other groups
    (and no padding) ever enter a normaliser.

    Args:
        q_feat (torch.Tensor): Query features :math:`\phi(q)`, shape
            :obj:`[T, H, r]` (positive).
        k_feat (torch.Tensor): Key features :math:`\phi(k)`, shape
            :obj:`[T, H, r]` (positive).
        value (torch.Tensor): Values, shape :obj:`[T, H, d]`.
        group (torch.Tensor): Group (graph) of every token, shape
            :obj:`[T]`.
        num_groups (int): Number of groups.
        eps (float): Lower bound of the normaliser.

    :rtype: :class:`torch.Tensor` of shape :obj:`[T, H, d]`
    """
    if q_feat.size(0) == 0:
        return value.clone()
    ones = value.new_ones(value.shape[:-1] + (1, ))
    out = _GroupedLinearAttention.apply(q_feat, k_feat,
                                        torch.cat([value, ones], dim=-1),
                                        group, num_groups)
    return out[..., :-1] / out[..., -1:].clamp(min=eps)


def dense_softmax_attention_reference(query: Tensor, key: Tensor,
                                      value: Tensor, token_batch: Tensor,
                                      num_graphs: int) -> Tensor:
    r"""Naive reference: an explicit :math:`\mathrm{softmax}(QK^\top /
    \sqrt{d}) V` per graph and head, in a Python loop over graphs."""
    out = value.new_zeros(value.shape)
    for g in range(num_graphs):
        idx = (token_batch == g).nonzero().view(-1)
        if idx.numel() == 0:
            continue
        q, k, v = (t[idx].transpose(0, 1) for t in (query, key, value))
        scores = q @ k.transpose(-1, -2) / query.size(-1)**0.5
        out[idx] = (scores.softmax(dim=-1) @ v).transpose(0, 1)
    return out

