r"""Multi-head self-attention over a flat list of tokens that belong to
several graphs, never across graphs (the attention of TokenGT,
`Kim et al. 2022 <https://arxiv.org/abs/2207.02505>`_).

* :func:`per_graph_softmax_attention`: exact softmax attention, on the
  path of :mod:`~torch_geometric_hot.ops.attention.dispatch`
  (``docs/design.md``, "Paths");
* :func:`grouped_linear_attention`: kernel (Performer) attention on the flat
  token list, :math:`O(T)` time and memory, no padding: per-graph sums
  :math:`S_g = \sum_{t \in g} \phi(k_t) [v_t, 1]^\top` and
  :math:`\mathrm{out}_t = \phi(q_t)^\top S_{g(t)}` normalised by its last
  column.

The naive per-graph loop both are tested against is
:func:`~torch_geometric_hot.testing.dense_softmax_attention_reference`.
"""
from typing import Optional, Union

import torch
from torch import Tensor

from torch_geometric_hot.ops.attention import dispatch
from torch_geometric_hot.ops.attention.dropout import draw_seed
from torch_geometric_hot.ops.attention.padded import \
    global_block_attention, global_class_softmax
from torch_geometric_hot.ops.attention.pairs import local_pair_attention
from torch_geometric_hot.ops.grouped_softmax_attention import \
    grouped_softmax_attention, softmax_groups
from torch_geometric_hot.ops.kernel_attention import (gather_contract,
                                                      segment_outer_sum)
from torch_geometric_hot.ops.native import SoftmaxGroups
from torch_geometric_hot.ops.plan_cache import making_plans_only
from torch_geometric_hot.ops.size_buckets import BucketLayout, \
    bucket_layout, squares
from torch_geometric_hot.validation import check_size


TokenLayout = Union[BucketLayout, SoftmaxGroups]


def token_buckets(token_batch: Tensor, num_graphs: int) -> BucketLayout:
    r"""The size buckets of the tokens (kind ``'token'``, with its
    key-padding masks) on the bucket ratio of :obj:`token_batch`'s device:
    one block padded to the largest graph unless buckets save at least
    ``BUCKET_GAIN`` times its score entries.

    Args:
        token_batch (torch.Tensor): Graph of every token, shape :obj:`[T]`.
        num_graphs (int): Number of graphs :math:`B`.
    """
    ratio = dispatch.bucket_ratio(dispatch.problem(
        'tokens', 'softmax', (), token_batch.device).device_type)
    return bucket_layout({'token': token_batch}, num_graphs, ratio, squares,
                         masked=('token', ))


def token_layout(token_batch: Tensor, num_graphs: int,
                 path: Optional[str] = None) -> Optional[TokenLayout]:
    r"""The layout :func:`per_graph_softmax_attention` attends on, built once
    per batch, for the path the rule picks for softmax attention on
    :obj:`token_batch`'s device (:mod:`~torch_geometric_hot.ops.attention.\
    dispatch`): the groups of the grouped operator (every graph's tokens
    one group) or :func:`token_buckets`; :obj:`None` for a path that builds
    its own (``'compiled'``, ``'pairs'``).

    Args:
        token_batch (torch.Tensor): Graph of every token, shape :obj:`[T]`.
        num_graphs (int): Number of graphs :math:`B`.
        path (str, optional): Force a path.
    """
    chosen = dispatch.choose(dispatch.problem(
        'tokens', 'softmax', (), token_batch.device), path)
    if chosen == 'grouped' and token_batch.numel():
        return _token_groups(token_batch, num_graphs)
    if chosen in ('grouped', 'padded'):
        return token_buckets(token_batch, num_graphs)
    return None


def _token_groups(token_batch: Tensor, num_graphs: int) -> SoftmaxGroups:
    # every graph's tokens one group of the grouped operator
    return softmax_groups(token_batch, token_batch,
                          torch.arange(token_batch.numel(),
                                       device=token_batch.device),
                          num_graphs, [], [])


def per_graph_softmax_attention(query: Tensor, key: Tensor, value: Tensor,
                                token_batch: Tensor, num_graphs: int,
                                dropout: float = 0.0,
                                layout: Optional[TokenLayout] = None,
                                path: Optional[str] = None) -> Tensor:
    r"""Softmax attention of every token over the tokens of its own graph.

    .. math::
        \mathrm{out}_t = \sum_{s : g(s) = g(t)}
        \mathrm{softmax}_s\left(\frac{q_t^\top k_s}{\sqrt{d}}\right) v_s

    On the path of :mod:`~torch_geometric_hot.ops.attention.dispatch`
    (``docs/design.md``, "Paths"; ``'padded'``: :func:`token_buckets`).

    Args:
        query (torch.Tensor): Queries, shape :obj:`[T, H, d]`.
        key (torch.Tensor): Keys, shape :obj:`[T, H, d]`.
        value (torch.Tensor): Values, shape :obj:`[T, H, d_v]`.
        token_batch (torch.Tensor): Graph of every token, shape :obj:`[T]`.
        num_graphs (int): Number of graphs :math:`B`.
        dropout (float): Dropout on the attention weights (one seed per
            call, :mod:`~torch_geometric_hot.ops.attention.dropout`: every
            path draws the same factors; on ``'padded'`` the weights are
            then computed explicitly).
        layout (BucketLayout or SoftmaxGroups, optional): The output of
            :func:`token_layout` (or of :func:`token_buckets`), to reuse it
            across layers; a path that takes the other form builds it.
        path (str, optional): Force a path.

    :rtype: :class:`torch.Tensor` of shape :obj:`[T, H, d_v]`
    """
    if query.size(0) == 0:
        return value.clone()
    chosen = dispatch.choose(dispatch.problem(
        'tokens', 'softmax', (query, key, value), query.device,
        planned=isinstance(layout, BucketLayout)), path)
    scaled = query * query.size(-1)**-0.5
    seed = draw_seed(dropout, query.device)
    if chosen in ('compiled', 'pairs'):
        # a global class without exclusions: every token over its graph's
        args = (scaled, key, value, token_batch, token_batch,
                torch.arange(query.size(0), device=query.device),
                num_graphs, [], [], dropout, seed)
        if chosen == 'pairs':
            return local_pair_attention(*args)
        return global_class_softmax(*args)
    if chosen == 'grouped':
        if not isinstance(layout, SoftmaxGroups):
            layout = _token_groups(token_batch, num_graphs)
        return grouped_softmax_attention(scaled, key, value, layout, dropout,
                                         seed)
    if not isinstance(layout, BucketLayout):
        layout = token_buckets(token_batch, num_graphs)
    check_size(layout.slots['token'].slot_row.numel() * query.size(1) * (
        2 * query.size(-1) + value.size(-1)), f"softmax token attention's "
               f"padded blocks ({num_graphs} graphs in "
               f"{len(layout.counts)} size buckets)")
    if making_plans_only():  # the layout is the plan
        return value.new_zeros(value.shape)
    # without dropout the fused call scales (no product to differentiate)
    return global_block_attention(query if seed is None else scaled, key,
                                  value, token_batch, token_batch, None,
                                  num_graphs, [], [], dropout, seed, layout,
                                  None if seed is None else 1.0)


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
