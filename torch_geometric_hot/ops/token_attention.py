r"""Multi-head self-attention over a flat list of tokens that belong to
several graphs, never across graphs (the attention of TokenGT,
`Kim et al. 2022 <https://arxiv.org/abs/2207.02505>`_).

* :func:`per_graph_softmax_attention`: exact softmax attention through
  :func:`torch.nn.functional.scaled_dot_product_attention` on per-graph
  padded blocks with a key-padding mask (fused kernels: the
  :math:`L \times L` score matrix is never materialised); on the CPU,
  where the native kernels are on, the grouped softmax kernel of
  :mod:`~torch_geometric_hot.ops.grouped_softmax_attention` instead, every
  graph's tokens one group (no padding).
* :func:`grouped_linear_attention`: kernel (Performer) attention on the flat
  token list, :math:`O(T)` time and memory, no padding: per-graph sums
  :math:`S_g = \sum_{t \in g} \phi(k_t) [v_t, 1]^\top` and
  :math:`\mathrm{out}_t = \phi(q_t)^\top S_{g(t)}` normalised by its last
  column.
  Batches of graphs of very different sizes are packed into size buckets
  instead (:mod:`~torch_geometric_hot.ops.token_buckets`; the rule is
  :func:`token_layout`'s).
* :func:`dense_softmax_attention_reference`: the naive per-graph loop both
  are tested against.
"""
from typing import Optional, Tuple, Union

import torch
import torch.nn.functional as F
from torch import Tensor

from torch_geometric_hot.ops import native
from torch_geometric_hot.ops.grouped_softmax_attention import \
    grouped_softmax_attention, softmax_groups
from torch_geometric_hot.ops.kernel_attention import (gather_contract,
                                                      segment_outer_sum)
from torch_geometric_hot.ops.native import SoftmaxGroups
from torch_geometric_hot.ops.recomputed_attention import dropout_seed
from torch_geometric_hot.ops.scatter import segment_counts
from torch_geometric_hot.ops.token_buckets import (
    TokenBuckets, bucket_bounds, bucketed_softmax_attention, buckets_pay,
    token_buckets)
from torch_geometric_hot.ops.validation import check_size


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


TokenLayout = Union[Tuple[Tensor, Tensor], TokenBuckets, SoftmaxGroups]


def token_layout(token_batch: Tensor, num_graphs: int) -> TokenLayout:
    r"""The layout :func:`per_graph_softmax_attention` attends on, built once
    per batch: on the CPU, where the native kernels are on, the groups of
    the grouped softmax kernel (every graph's tokens one group), else
    :func:`padded_layout`. All give the same attention.

    Args:
        token_batch (torch.Tensor): Graph of every token, shape :obj:`[T]`.
        num_graphs (int): Number of graphs :math:`B`.
    """
    if token_batch.device.type == 'cpu' and token_batch.numel() and \
            not torch.compiler.is_compiling() and native.available():
        return softmax_groups(token_batch, token_batch,
                              torch.arange(token_batch.numel(),
                                           device=token_batch.device),
                              num_graphs, [], [])
    return padded_layout(token_batch, num_graphs)


def padded_layout(token_batch: Tensor, num_graphs: int
                  ) -> Union[Tuple[Tensor, Tensor], TokenBuckets]:
    r"""Padded per-graph blocks for
    :func:`~torch.nn.functional.scaled_dot_product_attention`: size buckets
    (:mod:`~torch_geometric_hot.ops.token_buckets`) when one block padded to
    the largest graph would hold at least ``BUCKET_GAIN`` times the score
    entries of the buckets (:math:`B L_{max}^2 \ge 2 \sum_b B_b L_b^2`),
    else the positions and lengths of :func:`token_positions` (one padded
    block).

    Args:
        token_batch (torch.Tensor): Graph of every token, shape :obj:`[T]`.
        num_graphs (int): Number of graphs :math:`B`.
    """
    position, lengths = token_positions(token_batch, num_graphs)
    if num_graphs < 2 or token_batch.numel() == 0 or \
            torch.compiler.is_compiling():
        # a compiled graph has one shape per batch: the buckets' number
        # and shapes are read from the data, one padded block's are not
        return position, lengths
    # host synchronisation: the bucket shapes depend on the graph sizes
    sizes = sorted(lengths.tolist(), reverse=True)
    bounds = bucket_bounds(sizes)
    bucketed = sum((end - start) * sizes[start]**2
                   for start, end in zip(bounds[:-1], bounds[1:]))
    if not buckets_pay(num_graphs * sizes[0]**2, bucketed):
        return position, lengths
    return token_buckets(token_batch, position, lengths)


def pad_by_graph(x: Tensor, graph: Tensor, position: Tensor,
                 num_graphs: int, length: int, fill: float = 0.0) -> Tensor:
    r"""Rows :obj:`[N, *]` -> per-graph blocks :obj:`[B, length, *]`: row
    :math:`t` goes to :obj:`[graph[t], position[t]]`, the rest is
    :obj:`fill` (positions as :func:`token_positions` returns them)."""
    out = x.new_full((num_graphs, length) + x.shape[1:], fill)
    out[graph, position] = x
    return out


def per_graph_softmax_attention(query: Tensor, key: Tensor, value: Tensor,
                                token_batch: Tensor, num_graphs: int,
                                dropout: float = 0.0,
                                layout: Optional[TokenLayout] = None
                                ) -> Tensor:
    r"""Softmax attention of every token over the tokens of its own graph.

    .. math::
        \mathrm{out}_t = \sum_{s : g(s) = g(t)}
        \mathrm{softmax}_s\left(\frac{q_t^\top k_s}{\sqrt{d}}\right) v_s

    On the CPU, where the native kernels are on, every graph's tokens are one
    group of the grouped softmax kernel
    (:func:`~torch_geometric_hot.ops.grouped_softmax_attention.\
    grouped_softmax_attention`; its dropout draws its own mask). Elsewhere
    tokens are scattered into :obj:`[B, H, L_max, d]` blocks (checked
    against the size limit,
    :func:`~torch_geometric_hot.ops.validation.size_limit`), attended with
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
        layout (tuple, TokenBuckets or SoftmaxGroups, optional): The
            output of :func:`token_layout` (or of :func:`padded_layout` or
            :func:`token_positions`), to reuse it across layers (default:
            :func:`token_layout`).

    :rtype: :class:`torch.Tensor` of shape :obj:`[T, H, d_v]`
    """
    if query.size(0) == 0:
        return value.clone()
    if torch.compiler.is_compiling():
        # one node of the compiled graph: the attention of a global class
        # without exclusions (every token over its graph's tokens), run
        # eagerly inside it (size buckets; on the CPU the native grouped
        # kernel) and recomputed in its backward pass; called by its
        # registered name, as global_softmax_attention imports this module
        return torch.ops.torch_geometric_hot.global_class_softmax(
            query * query.size(-1)**-0.5, key, value, token_batch,
            token_batch, torch.arange(query.size(0), device=query.device),
            num_graphs, [], [], dropout, dropout_seed(dropout, query.device))
    if layout is None:
        layout = token_layout(token_batch, num_graphs)
    if isinstance(layout, SoftmaxGroups):
        if native.applies(query, key, value):
            return grouped_softmax_attention(query * query.size(-1)**-0.5,
                                             key, value, layout, dropout)
        layout = padded_layout(token_batch, num_graphs)
    if isinstance(layout, TokenBuckets):
        return bucketed_softmax_attention(query, key, value, layout, dropout)
    position, lengths = layout
    # host synchronisation: the padded length is the largest graph's
    max_len = query.size(0) if num_graphs == 1 else int(lengths.max())
    if num_graphs > 1 and not torch.compiler.is_compiling():
        check_size(num_graphs * max_len * query.size(1) * (
            2 * query.size(-1) + value.size(-1)), f"softmax token attention's "
                   f"padded blocks ({num_graphs} graphs x {max_len} tokens "
                   f"of the largest)")

    def to_blocks(x: Tensor) -> Tensor:  # [T, H, d] -> [B, H, L, d]
        if num_graphs == 1:
            return x.transpose(0, 1).unsqueeze(0)
        return pad_by_graph(x, token_batch, position, num_graphs,
                            max_len).transpose(1, 2)

    mask = None
    # compiled: always masked (one graph for every batch, no host read)
    if num_graphs > 1 and (torch.compiler.is_compiling()
                           or bool((lengths != max_len).any())):
        mask = torch.arange(max_len, device=query.device) < lengths.view(
            -1, 1)  # [B, L]
        mask[lengths == 0, 0] = True  # empty graphs: avoid 0/0
        mask = mask.view(num_graphs, 1, 1, max_len)
        if torch.compiler.is_compiling():  # the compiler cannot broadcast
            # a length it reads from the data without knowing it is not 1
            mask = mask.expand(num_graphs, 1, max_len, max_len)
    out = F.scaled_dot_product_attention(to_blocks(query), to_blocks(key),
                                         to_blocks(value), attn_mask=mask,
                                         dropout_p=dropout)
    if num_graphs == 1:
        return out[0].transpose(0, 1)
    return out.transpose(1, 2)[token_batch, position]  # [T, H, d_v]


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
    sums = segment_outer_sum(k_feat, torch.cat([value, ones], dim=-1), group,
                             num_groups)
    out = gather_contract(q_feat, sums, group)
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
