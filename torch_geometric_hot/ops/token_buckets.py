r"""Softmax attention within graphs on size buckets: the graphs of a batch
are sorted by their number of tokens and packed into a few dense blocks of
graphs of similar size, so that a batch of many small graphs and a few
larger ones is not padded to its largest graph.

A bucket starts at the largest graph not yet placed, of :math:`L` tokens,
and takes every graph of more than :math:`L / \mathrm{ratio}` tokens
(:data:`BUCKET_RATIO`): a graph is padded by less than that factor, its
share of the score entries by less than its square. Each bucket is one
:func:`~torch.nn.functional.scaled_dot_product_attention` call on
:obj:`[graphs, H, L, d]` with a key-padding mask (none when its graphs have
the same size). The layout (which token goes to which padded slot) is built
once per batch by :func:`token_buckets` and reused by every layer.
"""
from typing import List, NamedTuple, Optional, Tuple

import torch
import torch.nn.functional as F
from torch import Tensor

BUCKET_RATIO = 1.25
#: Buckets replace one padded block when that block holds at least this
#: many times their score entries.
BUCKET_GAIN = 2.0


class TokenBuckets(NamedTuple):
    r"""The packing of a batch's tokens into size buckets.

    Attributes:
        slot_token (torch.Tensor): Token of every padded slot, buckets one
            after the other, each row-major :obj:`[graphs, length]`; padding
            slots hold :math:`T` (the row of zeros appended to the tokens).
        token_slot (torch.Tensor): Slot of every token :obj:`[T]`.
        shapes (list): :obj:`(graphs, length)` of every bucket.
        masks (list): Key-padding mask of every bucket,
            :obj:`[graphs, 1, 1, length]` (:obj:`None` when its graphs have
            the same size).
    """
    slot_token: Tensor
    token_slot: Tensor
    shapes: List[tuple]
    masks: List[Optional[Tensor]]


def bucket_bounds(lengths: List[int], ratio: float = BUCKET_RATIO
                  ) -> List[int]:
    r"""Bucket boundaries in the descending order of :obj:`lengths`: the
    bucket :math:`b` holds sorted positions
    :obj:`bounds[b]:bounds[b + 1]`. Empty graphs (length 0) take no
    bucket."""
    bounds = [0]
    count = sum(1 for length in lengths if length > 0)
    ordered = sorted(lengths, reverse=True)
    while bounds[-1] < count:
        top, end = ordered[bounds[-1]], bounds[-1] + 1
        while end < count and ordered[end] * ratio > top:
            end += 1
        bounds.append(end)
    return bounds


def buckets_pay(one_block: int, bucketed: int) -> bool:
    r"""Whether size buckets of :obj:`bucketed` score entries replace one
    padded block of :obj:`one_block` (:data:`BUCKET_GAIN`)."""
    return one_block >= BUCKET_GAIN * bucketed


def bucket_plan(sizes: Tensor, ratio: float = BUCKET_RATIO
                ) -> Tuple[Tensor, List[int]]:
    r"""The graphs in descending order of :obj:`sizes` and the boundaries of
    their buckets in that order (:func:`bucket_bounds`)."""
    order = torch.sort(sizes, descending=True, stable=True)[1]
    return order, bucket_bounds(sizes[order].tolist(), ratio)


def bucket_slots(token_batch: Tensor, position: Tensor, order: Tensor,
                 bounds: List[int], widths: List[int]
                 ) -> Tuple[Tensor, Tensor]:
    r"""The padded slots of rows that belong to graphs, the graphs packed
    bucket by bucket (:func:`bucket_plan`), each graph of bucket :math:`b`
    given :obj:`widths[b]` slots.

    Returns :obj:`slot_token` (the row of every slot, :math:`T` for
    padding) and :obj:`token_slot` (the slot of every row)."""
    device = token_batch.device
    counts = [end - start for start, end in zip(bounds[:-1], bounds[1:])]
    width = torch.repeat_interleave(
        torch.tensor(widths, dtype=torch.long, device=device),
        torch.tensor(counts, dtype=torch.long, device=device))
    first = torch.cumsum(width, 0) - width
    graph_first = torch.zeros(order.numel(), dtype=torch.long,
                              device=device)
    graph_first[order[:width.numel()]] = first
    token_slot = graph_first[token_batch] + position
    slot_token = torch.full((int(width.sum()), ), token_batch.numel(),
                            dtype=torch.long, device=device)
    slot_token[token_slot] = torch.arange(token_batch.numel(), device=device)
    return slot_token, token_slot


def padded_blocks(x: Tensor, slot_token: Tensor, shapes: List[tuple],
                  fill: float = 0.0) -> List[Tensor]:
    r"""Rows :obj:`[T, *]` -> one block :obj:`[graphs, length, *]` per
    bucket, padding slots set to :obj:`fill`."""
    x = torch.cat([x, x.new_full((1, ) + x.shape[1:], fill)])
    x = x.index_select(0, slot_token)
    return [block.view((count, length) + x.shape[1:])
            for block, (count, length) in zip(
                x.split([count * length for count, length in shapes]),
                shapes)]


def token_buckets(token_batch: Tensor, position: Tensor, lengths: Tensor,
                  ratio: float = BUCKET_RATIO) -> TokenBuckets:
    r"""The bucket layout of the tokens (see the module docstring).

    Args:
        token_batch (torch.Tensor): Graph of every token :obj:`[T]`.
        position (torch.Tensor): Position of every token in its graph
            :obj:`[T]`.
        lengths (torch.Tensor): Tokens of every graph :obj:`[B]`.
        ratio (float): Largest length ratio within a bucket.
    """
    order, bounds = bucket_plan(lengths, ratio)
    sorted_lengths = lengths[order].tolist()
    widths = [sorted_lengths[start] for start in bounds[:-1]]
    shapes = [(end - start, width) for start, end, width in zip(
        bounds[:-1], bounds[1:], widths)]
    slot_token, token_slot = bucket_slots(token_batch, position, order,
                                          bounds, widths)
    masks = []
    for (count, length), start in zip(shapes, bounds[:-1]):
        if sorted_lengths[start + count - 1] == length:
            masks.append(None)
            continue
        graph_lengths = lengths[order[start:start + count]]
        masks.append((torch.arange(length, device=lengths.device) <
                      graph_lengths.view(-1, 1)).view(count, 1, 1, length))
    return TokenBuckets(slot_token, token_slot, shapes, masks)


def bucketed_softmax_attention(query: Tensor, key: Tensor, value: Tensor,
                               buckets: TokenBuckets,
                               dropout: float = 0.0) -> Tensor:
    r"""Softmax attention of every token over the tokens of its graph, one
    dense block per size bucket.

    Args:
        query (torch.Tensor): Queries :obj:`[T, H, d]`.
        key (torch.Tensor): Keys :obj:`[T, H, d]`.
        value (torch.Tensor): Values :obj:`[T, H, d_v]`.
        buckets (TokenBuckets): The layout of :func:`token_buckets`.
        dropout (float): Dropout on the attention weights.

    :rtype: :class:`torch.Tensor` :obj:`[T, H, d_v]`
    """
    heads = query.size(1)

    def padded(x: Tensor) -> List[Tensor]:  # [T, H, d] -> [g, H, L, d]
        return [block.transpose(1, 2) for block in padded_blocks(
            x, buckets.slot_token, buckets.shapes)]

    outs = [
        F.scaled_dot_product_attention(q, k, v, attn_mask=mask,
                                       dropout_p=dropout).transpose(
                                           1, 2).reshape(-1, heads,
                                                         value.size(-1))
        for q, k, v, mask in zip(padded(query), padded(key), padded(value),
                                 buckets.masks)
    ]
    return torch.cat(outs).index_select(0, buckets.token_slot)
