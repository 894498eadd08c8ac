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
bucket costs its own operations.
"""
from typing import Callable, Dict, List, NamedTuple, Optional, Sequence, \
    Tuple

import torch
from torch import Tensor

from torch_geometric_hot.ops.scatter import segment_counts

BUCKET_RATIO = 1.25
#: Buckets replace one padded block when that block holds at least this
#: many times their score entries.
BUCKET_GAIN = 2.0


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


def bucket_slots(row_graph: Tensor, num_graphs: int, order: Tensor,
                 counts: List[int], widths: List[int],
                 position: Tensor) -> Slots:
    r"""The slots of rows that belong to graphs, the graphs :obj:`order`
    packed bucket by bucket (:obj:`counts` graphs each), each graph of
    bucket :math:`b` given :obj:`widths[b]` slots.

    Args:
        row_graph (torch.Tensor): Graph of every row :obj:`[rows]`.
        num_graphs (int): Number of graphs.
        order (torch.Tensor): The graphs in bucket order
            (:func:`bucket_layout`).
        counts (list): Graphs of every bucket.
        widths (list): Slots per graph of every bucket.
        position (torch.Tensor): Position of every row in its graph
            (:func:`token_positions`).
    """
    device = row_graph.device
    total = sum(c * w for c, w in zip(counts, widths))
    width = torch.repeat_interleave(
        torch.tensor(widths, dtype=torch.long, device=device),
        torch.tensor(counts, dtype=torch.long, device=device))
    first = torch.full((num_graphs, ), -1, dtype=torch.long, device=device)
    first[order[:width.numel()]] = torch.cumsum(width, 0) - width
    row_first = first.index_select(0, row_graph)
    row_slot = torch.where(row_first < 0, total, row_first + position)
    slot_row = torch.full((total + 1, ), row_graph.numel(),
                          dtype=torch.long, device=device)
    slot_row[row_slot] = torch.arange(row_graph.numel(), device=device)
    slot_row = slot_row[:total]
    return Slots(slot_row, row_slot, widths,
                 slot_row.masked_fill(slot_row == row_graph.numel(), 0))


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
    """
    order: Tensor
    bounds: List[int]
    slots: Dict[str, Slots]
    lengths: Dict[str, Tuple[Tensor, List[int]]]
    masks: Dict[str, List[Optional[Tensor]]]
    ratio: float = BUCKET_RATIO

    @property
    def counts(self) -> List[int]:
        r"""Graphs of every bucket."""
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
                  masked: Sequence[str] = ()) -> BucketLayout:
    r"""The layout of rows of one or more kinds that belong to graphs: the
    graphs sorted by size and bucketed within :obj:`ratio`
    (:func:`bucket_bounds`), each graph of a bucket given, per kind, the
    most rows of that kind among the bucket's graphs plus :obj:`padding`.

    Args:
        row_graphs (dict): Graph of every row :obj:`[rows]`, per kind.
        num_graphs (int): Number of graphs.
        ratio (float, optional): Largest ratio of graph sizes within one
            bucket. (default: :data:`BUCKET_RATIO`)
        block (callable, optional): ``block(graphs, largest, widths)``, the
            score entries of a block of that many graphs, the largest of
            that size, given those slots per kind (e.g. :func:`squares`):
            then one block padded to the largest graph replaces buckets
            that do not save :data:`BUCKET_GAIN` times its entries.
            (default: buckets)
        padding (dict, optional): Extra slots per graph, per kind.
        sizes (torch.Tensor, optional): Size of every graph (default: its
            rows of all kinds).
        check (callable, optional): Called with the graphs and the widths
            (per kind, in the order of :obj:`row_graphs`) of every bucket
            before any slot is built.
        masked (list, optional): The kinds whose :obj:`masks` to make.
    """
    kinds = list(row_graphs)
    positions, lengths = zip(*(token_positions(row_graphs[kind], num_graphs)
                               for kind in kinds))
    pads = [(padding or {}).get(kind, 0) for kind in kinds]
    sizes = sum(lengths) if sizes is None else sizes
    order = torch.sort(sizes, descending=True, stable=True)[1]
    # host synchronisation, once: the bucket shapes depend on the sizes
    top, *rows = torch.stack([sizes, *lengths])[:, order].tolist()
    bounds = bucket_bounds(top, ratio)

    def widths(start: int, end: int) -> List[int]:
        return [max(kind[start:end]) + pad for kind, pad in zip(rows, pads)]

    ranges = list(zip(bounds[:-1], bounds[1:]))
    if block is not None and len(ranges) > 1 and block(
            bounds[-1], top[0], widths(0, bounds[-1])) < BUCKET_GAIN * sum(
                block(end - start, top[start], widths(start, end))
                for start, end in ranges):
        bounds, ranges = [0, bounds[-1]], [(0, bounds[-1])]
    counts = [end - start for start, end in ranges]
    shapes = [widths(start, end) for start, end in ranges]
    if check is not None:
        check(counts, shapes)
    slots = {kind: bucket_slots(row_graphs[kind], num_graphs, order, counts,
                                [shape[k] for shape in shapes], positions[k])
             for k, kind in enumerate(kinds)}
    masks = {kind: [None if min(rows[k][start:end]) == shape[k] else
                    torch.arange(shape[k], device=order.device) <
                    lengths[k][order[start:end]].view(-1, 1, 1, 1)
                    for (start, end), shape in zip(ranges, shapes)]
             for k, kind in enumerate(kinds) if kind in masked}
    return BucketLayout(order, bounds, slots,
                        dict(zip(kinds, zip(lengths, rows))), masks, ratio)


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
