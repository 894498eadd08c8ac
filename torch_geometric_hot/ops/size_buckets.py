r"""Per-graph dense blocks on size buckets: the one padded layout of the
engine (TokenGT's softmax attention, the global classes of HOT's softmax
attention, HOT's packed attention).

The graphs of a batch are sorted by size and cut into buckets. A bucket
starts at the largest graph not yet placed, of :math:`L` rows, and takes
every graph of more than :math:`L / \mathrm{ratio}` rows
(:data:`BUCKET_RATIO`): a graph is padded by less than that factor, its
share of the score entries by less than its square. Each bucket gives each
of its graphs the same number of slots per kind of row (the most rows of
that kind among its graphs), so that the slots of one kind and bucket
reshape to a :obj:`[graphs, width, *]` block. Slots are numbered bucket
after bucket, graph after graph. An empty graph takes no bucket. Where
buckets save little, every graph can stay in one bucket,
one block padded to the largest graph (:func:`bucket_layout`): each
bucket costs its own operations. Where the masks keep graphs apart by
ids (HOT's packed attention), the graphs of a bucket can share blocks
instead: packed first-fit decreasing into bins no larger than its largest
graph (:func:`bin_graphs`), a block per bin. The bins are at least
:data:`BIN_SLACK` times as many as the rows fill, so that batches padded
to the same sizes (:class:`~torch_geometric_hot.data.PadToBuckets`) get
blocks of the same shape.
"""
import math
from typing import Callable, Dict, List, NamedTuple, Optional, Sequence, \
    Tuple

import numpy as np
import torch
from torch import Tensor

from torch_geometric_hot.ops.scatter import segment_counts

BUCKET_RATIO = 1.25
#: Buckets replace one padded block when that block holds at least this
#: many times their score entries.
BUCKET_GAIN = 2.0
#: Graphs that share blocks take at least this many times the bins their
#: rows fill, rounded up, where they fill more than one
#: (:func:`bucket_layout`).
BIN_SLACK = 1.125


def token_positions(token_batch: Tensor,
                    num_graphs: int) -> Tuple[Tensor, Tensor]:
    r"""Position of every row inside its graph (in flat-list order) and the
    number of rows of every graph.

    Args:
        token_batch (torch.Tensor): Graph of every row, shape :obj:`[T]`.
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


class Slots(NamedTuple):
    r"""The slots of one kind of row of a bucket layout.

    Attributes:
        slot_row (torch.Tensor): Row of every slot :obj:`[S]`; padding
            slots hold the number of rows (an appended fill row).
        row_slot (torch.Tensor): Slot of every row :obj:`[rows]`; rows of
            graphs in no bucket hold :math:`S` (an appended zero row).
        widths (list): Slots per graph in every bucket.
        taken_row (torch.Tensor): :obj:`slot_row` with row 0 in the padding
            slots, to pack rows whose padding is masked out or dropped with
            one gather and no fill row.
    """
    slot_row: Tensor
    row_slot: Tensor
    widths: List[int]
    taken_row: Tensor

    @property
    def taken(self) -> Tensor:
        r"""Which slots hold a row :obj:`[S]` (bool)."""
        return self.slot_row < self.row_slot.numel()


def bucket_slots(row_graph: Tensor, num_graphs: int, order: Tensor,
                 first: Tensor, total: int, widths: List[int],
                 position: Tensor) -> Slots:
    r"""The slots of rows that belong to graphs, a graph's rows from its
    first slot on.

    Args:
        row_graph (torch.Tensor): Graph of every row :obj:`[rows]`.
        num_graphs (int): Number of graphs.
        order (torch.Tensor): The graphs in bucket order
            (:func:`bucket_layout`).
        first (torch.Tensor): First slot of every graph in a bucket, in
            bucket order.
        total (int): Number of slots.
        widths (list): Slots per block of every bucket.
        position (torch.Tensor): Position of every row in its graph
            (:func:`token_positions`).
    """
    device = row_graph.device
    graph_first = torch.full((num_graphs, ), -1, dtype=torch.long,
                             device=device)
    graph_first[order[:first.numel()]] = first
    row_first = graph_first.index_select(0, row_graph)
    row_slot = torch.where(row_first < 0, total, row_first + position)
    slot_row = torch.full((total + 1, ), row_graph.numel(),
                          dtype=torch.long, device=device)
    slot_row[row_slot] = torch.arange(row_graph.numel(), device=device)
    slot_row = slot_row[:total]
    return Slots(slot_row, row_slot, widths,
                 slot_row.masked_fill(slot_row == row_graph.numel(), 0))


def bin_graphs(rows: Sequence[Sequence[int]],
               capacity: Sequence[Optional[int]]
               ) -> Tuple[List[int], List[List[int]], List[List[int]]]:
    r"""Graphs packed first-fit into bins, in the given order (largest
    first: first-fit decreasing): each graph into the first bin that still
    holds its rows of every kind. The search starts at the first bin that
    may still hold a graph to come (one kind short of the fewest rows of
    that kind among them closes a bin), so that it costs about the
    graphs times the open bins.

    Args:
        rows (list): Per kind, the rows of every graph.
        capacity (list): Per kind, the most rows of a bin (:obj:`None`:
            any number).

    Returns:
        The bin of every graph, per kind the first row of every graph
        within its bin, and per bin its rows of every kind.
    """
    sizes = np.array(rows, dtype=np.int64).reshape(len(rows), -1).T
    count, kinds = sizes.shape
    cap = np.array([np.iinfo(np.int64).max // 2 if c is None else c
                    for c in capacity], dtype=np.int64)
    loads = np.zeros((count, kinds), dtype=np.int64)  # at most a bin each
    # the fewest rows of each kind among the graphs from each one on
    least = np.minimum.accumulate(sizes[::-1], axis=0)[::-1]
    bins = np.zeros(count, dtype=np.int64)
    offsets = np.zeros_like(sizes)
    first = used = 0  # the bins from first to used may still take graphs
    for g in range(count):
        while first < used and (cap - loads[first] < least[g]).any():
            first += 1
        fits = (loads[first:used] + sizes[g] <= cap).all(1)
        b = first + int(fits.argmax()) if fits.any() else used
        used = max(used, b + 1)
        bins[g] = b
        offsets[g] = loads[b]
        loads[b] += sizes[g]
    return bins.tolist(), offsets.T.tolist(), loads[:used].tolist()


def squares(graphs: int, largest: int, widths: List[int]) -> int:
    r"""The score entries of a block of :obj:`graphs` graphs padded to the
    :obj:`largest` (the :obj:`block` of :func:`bucket_layout` of
    self-attention)."""
    return graphs * largest**2


class BucketLayout(NamedTuple):
    r"""The size buckets of rows of one or more kinds (:func:`bucket_layout`).

    Attributes:
        order (torch.Tensor): The graphs in bucket order.
        bounds (list): Bucket :math:`b` holds the graphs
            :obj:`order[bounds[b]:bounds[b + 1]]`.
        slots (dict): The :class:`Slots` of every kind of row.
        lengths (dict): Per kind, the rows of every graph :obj:`[graphs]`,
            and the same in bucket order as a list.
        masks (dict): Per kind of :obj:`masked`, per bucket, which slots of
            each graph hold a row, :obj:`[graphs, 1, 1, width]` as an
            attention mask of keys (:obj:`None` where all do).
        ratio (float): Largest ratio of graph sizes within one bucket.
        bins (list, optional): Where graphs share blocks, the bins (blocks)
            of the bucket.
    """
    order: Tensor
    bounds: List[int]
    slots: Dict[str, Slots]
    lengths: Dict[str, Tuple[Tensor, List[int]]]
    masks: Dict[str, List[Optional[Tensor]]]
    ratio: float = BUCKET_RATIO
    bins: Optional[List[int]] = None

    @property
    def counts(self) -> List[int]:
        r"""Blocks of every bucket: its graphs, or its bins."""
        if self.bins is not None:
            return self.bins
        return [end - start
                for start, end in zip(self.bounds[:-1], self.bounds[1:])]

    def blocks(self, x: Tensor, kind: str) -> List[Tensor]:
        r"""Slots :obj:`[S, *]` of :obj:`kind` as one block
        :obj:`[counts[b], widths[b], *]` per bucket (views)."""
        return blocks(x, self.counts, self.slots[kind].widths)


def bucket_layout(row_graphs: Dict[str, Tensor], num_graphs: int,
                  ratio: float = BUCKET_RATIO,
                  block: Optional[Callable[[int, int, List[int]], int]] = None,
                  padding: Optional[Dict[str, int]] = None,
                  sizes: Optional[Tensor] = None,
                  check: Optional[Callable[[List[int], List[List[int]]],
                                           None]] = None,
                  masked: Sequence[str] = (),
                  bins: Optional[Dict[str, int]] = None) -> BucketLayout:
    r"""The layout of rows of one or more kinds that belong to graphs: the
    graphs sorted by size and bucketed within :obj:`ratio`
    (:func:`bucket_bounds`), each graph of a bucket given, per kind, the
    most rows of that kind among the bucket's graphs plus :obj:`padding`.

    Args:
        row_graphs (dict): Graph of every row :obj:`[rows]`, per kind.
        num_graphs (int): Number of graphs.
        ratio (float, optional): Largest ratio of graph sizes within one
            bucket. (default: :data:`BUCKET_RATIO`)
        block (callable, optional): ``block(blocks, largest, widths)``, the
            score entries of a bucket of that many blocks, the largest
            graph of that size, given those slots per kind (e.g.
            :func:`squares`): then one bucket replaces buckets that do not
            save :data:`BUCKET_GAIN` times its entries. (default: buckets)
        padding (dict, optional): Extra slots per graph, per kind.
        sizes (torch.Tensor, optional): Size of every graph (default: its
            rows of all kinds).
        check (callable, optional): Called with the blocks (graphs, or
            bins) and the widths (per kind, in the order of
            :obj:`row_graphs`) of every bucket before any slot is built.
        masked (list, optional): The kinds whose :obj:`masks` to make.
        bins (dict, optional): The graphs of a bucket share blocks,
            packed into bins (:func:`bin_graphs`) that hold, of each kind,
            at most the rows of the bucket's largest graph of that kind, or
            of a kind :obj:`bins` names, at most that many; the bins at
            least :data:`BIN_SLACK` times as many as the rows of some kind
            fill (rounded up, where they fill more than one; the others
            empty). Only for attention whose
            masks keep graphs apart by ids: not with :obj:`masked` or
            :obj:`padding`. (default: a block per graph)
    """
    if bins is not None and (masked or padding):
        raise ValueError("'bins' keeps graphs apart by ids only: it takes "
                         "no 'masked' kinds and no 'padding'")
    kinds = list(row_graphs)
    positions, lengths = zip(*(token_positions(row_graphs[kind], num_graphs)
                               for kind in kinds))
    pads = [(padding or {}).get(kind, 0) for kind in kinds]
    sizes = sum(lengths) if sizes is None else sizes
    order = torch.sort(sizes, descending=True, stable=True)[1]
    # host synchronisation, once: the bucket shapes depend on the sizes
    top, *rows = torch.stack([sizes, *lengths])[:, order].tolist()
    bounds = bucket_bounds(top, ratio)
    capacity = None if bins is None else [bins.get(kind) for kind in kinds]

    def arrange(ranges: List[Tuple[int, int]]
                ) -> Tuple[List[int], List[List[int]], List[List[int]]]:
        # per bucket its blocks and widths per kind, and per kind the first
        # slot of every graph within its bucket's slots
        shapes = [[max(kind[start:end]) + pad for kind, pad in
                   zip(rows, pads)] for start, end in ranges]
        if capacity is not None:
            return _binned(ranges, shapes, rows, capacity)
        return [end - start for start, end in ranges], shapes, [
            [i * shape[k] for (start, end), shape in zip(ranges, shapes)
             for i in range(end - start)] for k in range(len(kinds))]

    ranges = list(zip(bounds[:-1], bounds[1:]))
    blocks, shapes, offsets = arrange(ranges)
    if block is not None and len(ranges) > 1:  # or one bucket
        whole = arrange([(0, bounds[-1])])
        if block(whole[0][0], top[0], whole[1][0]) < BUCKET_GAIN * sum(
                block(count, top[start], shape) for count, (start, _), shape
                in zip(blocks, ranges, shapes)):
            bounds, ranges = [0, bounds[-1]], [(0, bounds[-1])]
            blocks, shapes, offsets = whole
    if check is not None:
        check(blocks, shapes)
    slots = {}
    for k, kind in enumerate(kinds):
        kind_widths = [shape[k] for shape in shapes]
        bucket_first = [0]  # the first slot of every bucket
        for count, width in zip(blocks, kind_widths):
            bucket_first.append(bucket_first[-1] + count * width)
        starts = [bucket_first[b] for b, (start, end) in enumerate(ranges)
                  for _ in range(start, end)]
        first = torch.tensor([s + o for s, o in zip(starts, offsets[k])],
                             dtype=torch.long, device=order.device)
        slots[kind] = bucket_slots(row_graphs[kind], num_graphs, order,
                                   first, bucket_first[-1], kind_widths,
                                   positions[k])
    masks = {kind: [None if min(rows[k][start:end]) == shape[k] else
                    torch.arange(shape[k], device=order.device) <
                    lengths[k][order[start:end]].view(-1, 1, 1, 1)
                    for (start, end), shape in zip(ranges, shapes)]
             for k, kind in enumerate(kinds) if kind in masked}
    return BucketLayout(order, bounds, slots,
                        dict(zip(kinds, zip(lengths, rows))), masks, ratio,
                        None if bins is None else blocks)


def _binned(ranges: List[Tuple[int, int]], shapes: List[List[int]],
            rows: List[List[int]], capacity: List[Optional[int]]
            ) -> Tuple[List[int], List[List[int]], List[List[int]]]:
    r"""The bins of every bucket (:func:`bin_graphs`), as wide as the
    bucket's :obj:`shapes` or the given :obj:`capacity` per kind: per
    bucket its bins (at least :data:`BIN_SLACK` times as many as its rows
    fill, rounded up, where they fill more than one) and its widths per
    kind, and per kind the first slot of every graph of a bucket within
    its bucket's slots, in bucket order."""
    counts, widths = [], []
    offsets: List[List[int]] = [[] for _ in rows]
    for (start, end), shape in zip(ranges, shapes):
        width = [w if cap is None else cap for w, cap in zip(shape, capacity)]
        graph_bins, within, loads = bin_graphs(
            [kind[start:end] for kind in rows], width)
        filled = max((sum(kind[start:end]) / w
                      for kind, w in zip(rows, width) if w > 0), default=0)
        # rows that fill at most one bin fit in one
        counts.append(max(len(loads), math.ceil(BIN_SLACK * filled)
                          if filled > 1 else 1))
        widths.append(width)
        for k, kind_within in enumerate(within):
            offsets[k].extend(b * width[k] + offset
                              for b, offset in zip(graph_bins, kind_within))
    return counts, widths, offsets


def pack(x: Tensor, slot_row: Tensor, fill: float = 0.0) -> Tensor:
    r"""Rows :obj:`[rows, *]` -> slots :obj:`[S, *]`, padding slots set to
    :obj:`fill`."""
    x = torch.cat([x, x.new_full((1, ) + x.shape[1:], fill)])
    return x.index_select(0, slot_row)


def unpack(x: Tensor, row_slot: Tensor) -> Tensor:
    r"""Slots :obj:`[S, *]` -> rows :obj:`[rows, *]` (rows without a slot
    get zeros)."""
    return torch.cat([x, x.new_zeros((1, ) + x.shape[1:])]).index_select(
        0, row_slot)


def padded_blocks(x: Tensor, layout: BucketLayout, kind: str,
                  fill: float = 0.0) -> List[Tensor]:
    r"""Rows :obj:`[rows, *]` of :obj:`kind` -> one block
    :obj:`[counts[b], widths[b], *]` per bucket, padding slots set to
    :obj:`fill` (:func:`pack`, then :meth:`BucketLayout.blocks`)."""
    return layout.blocks(pack(x, layout.slots[kind].slot_row, fill), kind)


def blocks(x: Tensor, counts: List[int], widths: List[int]) -> List[Tensor]:
    r"""Slots :obj:`[S, *]` as one block :obj:`[counts[b], widths[b], *]`
    per bucket (views)."""
    parts = [x] if len(counts) == 1 else \
        x.split([c * w for c, w in zip(counts, widths)])
    return [block.view((count, width) + x.shape[1:])
            for block, count, width in zip(parts, counts, widths)]
