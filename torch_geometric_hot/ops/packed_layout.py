r"""Per-graph dense blocks for batches of small graphs: the rows of a
batch (nodes, off-diagonal pair entries, graphs) packed graph by graph into
padded slots, the graphs sorted by size into buckets
(:mod:`~torch_geometric_hot.ops.size_buckets`) so that a
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

from torch_geometric_hot.ops import size_buckets
from torch_geometric_hot.ops.plan_cache import view_plan
from torch_geometric_hot.ops.size_buckets import BUCKET_RATIO, Slots, \
    bucket_layout


class PackedLayout(NamedTuple):
    r"""The bucketed dense layout of the rows of a batch
    (:func:`packed_layout`).

    Attributes:
        counts (list): Graphs of every bucket.
        slots (dict): The :class:`~torch_geometric_hot.ops.size_buckets.Slots`
            of every kind of row (``'node'``, ``'graph'``, and ``'off'`` for
            pair entries).
        ratio (float): Largest ratio of graph sizes within one bucket.
    """
    counts: List[int]
    slots: Dict[str, Slots]
    ratio: float = BUCKET_RATIO

    def blocks(self, x: Tensor, kind: str) -> List[Tensor]:
        r"""Packed rows :obj:`[S, *]` of :obj:`kind` as one block
        :obj:`[G_b, L_b, *]` per bucket."""
        return size_buckets.blocks(x, self.counts, self.slots[kind].widths)


def packed_layout(view, pairs: bool,
                  ratio: float = BUCKET_RATIO) -> PackedLayout:
    r"""The bucketed dense layout of a batch, its graphs bucketed by their
    nodes (plus off-diagonal entries when :obj:`pairs`) into buckets of
    graphs within :obj:`ratio` of each other; with a ratio above
    :data:`~torch_geometric_hot.ops.size_buckets.BUCKET_RATIO` (the coarse
    layout of launch-bound devices), one block padded to the largest graph
    unless the buckets hold less than half of its entries
    (:func:`~torch_geometric_hot.ops.size_buckets.bucket_layout`).

    Args:
        view: :class:`~torch_geometric_hot.data.PairView` (needed when
            :obj:`pairs`) or :class:`~torch_geometric_hot.data.NodeView`.
        pairs (bool): Pack the off-diagonal pair entries too.
        ratio (float): Largest ratio of graph sizes within one bucket
            (:func:`~torch_geometric_hot.ops.size_buckets.bucket_bounds`).
    """
    nodes = view.nodes_per_graph
    edges = view.edges_per_graph if pairs else torch.zeros_like(nodes)
    kinds = {'node': view.batch,
             'graph': torch.arange(view.num_graphs, device=nodes.device)}
    if pairs:
        kinds['off'] = view.off_batch
    # a coarse (launch-bound) layout: one block unless the buckets hold
    # less than half of its entries
    layout = bucket_layout(
        list(kinds.values()), view.num_graphs, ratio,
        (lambda graphs, largest, _: graphs * largest**2)
        if ratio > BUCKET_RATIO else None, sizes=nodes + edges)
    counts, slots = layout.counts, dict(zip(kinds, layout.slots))
    return PackedLayout(counts, slots, ratio)


def cached_layout(view, pairs: bool,
                  ratio: float = BUCKET_RATIO) -> PackedLayout:
    r""":func:`packed_layout`, kept with the view when it keeps plans."""
    return view_plan(view, ('packed_layout', pairs, ratio),
                     lambda: packed_layout(view, pairs, ratio))
