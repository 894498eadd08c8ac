r"""Exact softmax attention of a global class on size buckets: the graphs
of a batch are sorted by their number of queries plus keys and packed into
dense blocks of graphs of similar size
(:mod:`~torch_geometric_hot.ops.token_buckets`), so that a batch of many
small graphs and a few larger ones is not padded to its largest graph.

The blocks, the extra all-zero key of every graph and the exclusion mask
are those of
:func:`~torch_geometric_hot.ops.global_softmax_attention.global_softmax_class_attention`,
bucket by bucket; the result is the same (tested in float64).
"""
from typing import List, NamedTuple, Optional, Sequence, Tuple

import torch
import torch.nn.functional as F
from torch import Tensor

from torch_geometric_hot.ops.token_buckets import (bucket_plan,
                                                   bucket_slots, buckets_pay,
                                                   padded_blocks)
from torch_geometric_hot.ops.validation import check_size


class GlobalBuckets(NamedTuple):
    r"""Query and key slots of the buckets (:func:`global_buckets`):
    :obj:`(slot_row, row_slot)` of the queries and of the keys (pool
    order), and per bucket :obj:`(graphs, query length, key length)` (the
    key length counts the zero key) and the key count of every graph."""
    query_slots: Tuple[Tensor, Tensor]
    key_slots: Tuple[Tensor, Tensor]
    shapes: List[Tuple[int, int, int]]
    key_lengths: List[Tensor]


def padded_elements(shapes: Sequence[Tuple[int, int, int]],
                    widths: Tuple[int, int]) -> int:
    r"""Elements of the padded blocks of :obj:`shapes` (per block
    :obj:`(graphs, query length, key length)`), with :obj:`widths` the
    elements of one query slot and of one key slot (keys and values)."""
    return sum(count * (len_q * widths[0] + len_k * widths[1])
               for count, len_q, len_k in shapes)


def global_buckets(query_graph: Tensor, query_position: Tensor,
                   query_lengths: Tensor, key_graph: Tensor,
                   key_position: Tensor, key_lengths: Tensor,
                   widths: Tuple[int, int] = (1, 1)
                   ) -> Optional[GlobalBuckets]:
    r"""The bucket layout of a global class's queries and keys, or
    :obj:`None` when one padded block (:math:`B \cdot L_q \cdot (L_k + 1)`
    score entries) holds fewer than ``BUCKET_GAIN`` times the entries of
    the buckets.

    The padded blocks of the buckets (:func:`padded_elements` of
    :obj:`widths`, the elements of one query slot and of one key slot;
    default: the slots alone) are checked against the size limit
    (:func:`~torch_geometric_hot.ops.validation.size_limit`) before the
    layout is built."""
    num_graphs = query_lengths.numel()
    if num_graphs < 2:
        return None
    order, bounds = bucket_plan(query_lengths + key_lengths)
    q_sorted = query_lengths[order].tolist()
    k_sorted = key_lengths[order].tolist()
    shapes = [(end - start, max(q_sorted[start:end]),
               max(k_sorted[start:end]) + 1)
              for start, end in zip(bounds[:-1], bounds[1:])]
    one_block = num_graphs * max(q_sorted) * (max(k_sorted) + 1)
    if not buckets_pay(one_block, sum(c * lq * lk for c, lq, lk in shapes)):
        return None
    check_size(padded_elements(shapes, widths), f"global softmax "
               f"attention's padded size buckets ({num_graphs} graphs in "
               f"{len(shapes)} buckets, up to {max(k_sorted) + 1} keys)")
    query_slots = bucket_slots(query_graph, query_position, order, bounds,
                               [lq for _, lq, _ in shapes])
    key_slots = bucket_slots(key_graph, key_position, order, bounds,
                             [lk for _, _, lk in shapes])
    key_counts = [key_lengths[order[start:end]]
                  for start, end in zip(bounds[:-1], bounds[1:])]
    return GlobalBuckets(query_slots, key_slots, shapes, key_counts)


def bucketed_global_attention(q: Tensor, k: Tensor, v: Tensor,
                              ids: Sequence[Tuple[Tensor, Tensor]],
                              buckets: GlobalBuckets, block_elements: int,
                              dropout: float = 0.0) -> Tensor:
    r"""Softmax attention of every query over the keys of its graph minus
    its excluded ones, bucket by bucket.

    Args:
        q (torch.Tensor): Queries :obj:`[rows, H, d]` (already scaled).
        k (torch.Tensor): Keys :obj:`[keys, H, d]` (pool order).
        v (torch.Tensor): Values :obj:`[keys, H, d_v]` (pool order).
        ids (list): Per exclusion an id per query and per key; a key is
            excluded for a query when the two are equal (key ids are
            non-negative).
        buckets (GlobalBuckets): The layout of :func:`global_buckets`.
        block_elements (int): Largest number of mask entries per call.
        dropout (float): Dropout on the attention weights.

    :rtype: :class:`torch.Tensor` :obj:`[rows, H, d_v]`
    """
    q_slot_row, q_row_slot = buckets.query_slots
    k_slot_row = buckets.key_slots[0]
    q_shapes = [(c, lq) for c, lq, _ in buckets.shapes]
    k_shapes = [(c, lk) for c, _, lk in buckets.shapes]
    queries = padded_blocks(q, q_slot_row, q_shapes)
    keys = padded_blocks(k, k_slot_row, k_shapes)
    values = padded_blocks(v, k_slot_row, k_shapes)
    id_blocks = [(padded_blocks(qi, q_slot_row, q_shapes, -2),
                  padded_blocks(ki, k_slot_row, k_shapes, -3))
                 for qi, ki in ids]
    blocks = []
    for b, (count, len_q, len_k) in enumerate(buckets.shapes):
        if len_q == 0:  # graphs with keys but no query rows
            continue
        real = torch.arange(len_k, device=q.device) < \
            buckets.key_lengths[b].view(-1, 1)  # [count, len_k]
        query = queries[b].transpose(1, 2)  # [count, H, len_q, d]
        key, value = keys[b].transpose(1, 2), values[b].transpose(1, 2)
        step = max(1, block_elements // (count * len_k))
        chunks = []
        for start in range(0, len_q, step):
            end = min(start + step, len_q)
            allowed = real.unsqueeze(1).expand(count, end - start,
                                               len_k).clone()
            for q_ids, k_ids in id_blocks:
                allowed &= q_ids[b][:, start:end].unsqueeze(-1) != \
                    k_ids[b].unsqueeze(1)
            allowed[..., -1] = ~allowed.any(-1)  # empty group: zero key
            chunks.append(F.scaled_dot_product_attention(
                query[:, :, start:end], key, value,
                attn_mask=allowed.unsqueeze(1), dropout_p=dropout,
                scale=1.0))  # [count, H, end - start, d_v]
        block = torch.cat(chunks, 2) if len(chunks) > 1 else chunks[0]
        blocks.append(block.transpose(1, 2).reshape(
            count * len_q, block.size(1), block.size(-1)))
    return torch.cat(blocks).index_select(0, q_row_slot)
