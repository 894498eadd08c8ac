r"""Per-graph dense blocks for batches of small graphs: the rows of a
batch (nodes, off-diagonal pair entries, graphs) packed graph by graph into
padded slots, the graphs sorted by size into buckets
(:func:`~torch_geometric_hot.ops.token_buckets.bucket_plan`) so that a
batch of many small graphs and a few larger ones is not padded to its
largest graph.

Bucket :math:`b` holds :math:`G_b` graphs and gives each of them
:math:`N_b` node slots (the most nodes of its graphs), :math:`M_b`
off-diagonal entry slots and one graph slot. Slots are numbered bucket
after bucket, graph after graph, so that the slots of one kind and one
bucket reshape to a :obj:`[G_b, width, *]` block. An empty graph takes no
bucket. The layout depends on the graph sizes only and is built once per
batch (kept with the view, :class:`~torch_geometric_hot.data.PlanCache`).
"""
from typing import Dict, List, NamedTuple

import torch
from torch import Tensor

from torch_geometric_hot.ops.plan_cache import view_plan
from torch_geometric_hot.ops.token_attention import token_positions
from torch_geometric_hot.ops.token_buckets import BUCKET_RATIO, bucket_plan

#: Largest ratio of graph sizes within one bucket on devices other than the
#: CPU (GPUs), where each bucket's operations are kernel launches that cost
#: more than the padding of coarser buckets; on the CPU the ratio is
#: :data:`~torch_geometric_hot.ops.token_buckets.BUCKET_RATIO`.
LAUNCH_BOUND_BUCKET_RATIO = 8.0


class Slots(NamedTuple):
    r"""The slots of one kind of row of a :class:`PackedLayout`.

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


class PackedLayout(NamedTuple):
    r"""The bucketed dense layout of the rows of a batch
    (:func:`packed_layout`).

    Attributes:
        counts (list): Graphs of every bucket.
        slots (dict): The :class:`Slots` of every kind of row
            (``'node'``, ``'graph'``, and ``'off'`` for pair entries).
    """
    counts: List[int]
    slots: Dict[str, Slots]

    def blocks(self, x: Tensor, kind: str) -> List[Tensor]:
        r"""Packed rows :obj:`[S, *]` of :obj:`kind` as one block
        :obj:`[G_b, L_b, *]` per bucket."""
        widths = self.slots[kind].widths
        return [block.view((count, width) + x.shape[1:])
                for block, count, width in zip(
                    x.split([c * w for c, w in zip(self.counts, widths)]),
                    self.counts, widths)]


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


def _slots(row_group: Tensor, num_groups: int, order: Tensor,
           counts: List[int], widths: List[int]) -> Slots:
    device = row_group.device
    total = sum(c * w for c, w in zip(counts, widths))
    width = torch.repeat_interleave(
        torch.tensor(widths, dtype=torch.long, device=device),
        torch.tensor(counts, dtype=torch.long, device=device))
    first = torch.full((num_groups, ), -1, dtype=torch.long, device=device)
    first[order[:width.numel()]] = torch.cumsum(width, 0) - width
    row_first = first.index_select(0, row_group)
    row_slot = torch.where(row_first < 0, total, row_first + token_positions(
        row_group, num_groups)[0])
    slot_row = torch.full((total + 1, ), row_group.numel(),
                          dtype=torch.long, device=device)
    slot_row[row_slot] = torch.arange(row_group.numel(), device=device)
    slot_row = slot_row[:total]
    return Slots(slot_row, row_slot, widths,
                 slot_row.masked_fill(slot_row == row_group.numel(), 0))


def packed_layout(view, pairs: bool) -> PackedLayout:
    r"""The bucketed dense layout of a batch, its graphs bucketed by their
    nodes (plus off-diagonal entries when :obj:`pairs`), coarser off the
    CPU (:data:`LAUNCH_BOUND_BUCKET_RATIO`).

    Args:
        view: :class:`~torch_geometric_hot.data.PairView` (needed when
            :obj:`pairs`) or :class:`~torch_geometric_hot.data.NodeView`.
        pairs (bool): Pack the off-diagonal pair entries too.
    """
    nodes = view.nodes_per_graph
    edges = view.edges_per_graph if pairs else torch.zeros_like(nodes)
    ratio = BUCKET_RATIO if nodes.device.type == 'cpu' else \
        LAUNCH_BOUND_BUCKET_RATIO
    order, bounds = bucket_plan(nodes + edges, ratio)
    # host synchronisation: the block sizes of the buckets
    sorted_nodes, sorted_edges = torch.stack([nodes, edges])[:, order] \
        .tolist()
    ranges = list(zip(bounds[:-1], bounds[1:]))
    counts = [end - start for start, end in ranges]
    num_graphs = view.num_graphs
    graphs = torch.arange(num_graphs, device=nodes.device)
    slots = {
        'node': _slots(view.batch, num_graphs, order, counts,
                       [max(sorted_nodes[s:e]) for s, e in ranges]),
        'graph': _slots(graphs, num_graphs, order, counts,
                        [1] * len(counts)),
    }
    if pairs:
        slots['off'] = _slots(view.off_batch, num_graphs, order, counts,
                              [max(sorted_edges[s:e]) for s, e in ranges])
    return PackedLayout(counts, slots)


def cached_layout(view, pairs: bool) -> PackedLayout:
    r""":func:`packed_layout`, kept with the view when it keeps plans."""
    return view_plan(view, ('packed_layout', pairs),
                     lambda: packed_layout(view, pairs))
