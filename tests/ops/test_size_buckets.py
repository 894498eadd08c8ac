import math

import pytest
import torch

from torch_geometric_hot.ops.size_buckets import (BIN_SLACK, bin_graphs,
                                                  bucket_bounds,
                                                  bucket_layout, pack,
                                                  squares, token_positions,
                                                  unpack)

# Many small graphs, 1-row and 0-row graphs, one much larger graph.
SKEWED = [3, 1, 4, 0, 2, 40, 3, 5, 1, 2, 6, 4]


def test_token_positions():
    position, lengths = token_positions(torch.tensor([1, 0, 1, 1, 0]), 3)
    assert position.tolist() == [0, 0, 1, 2, 1]
    assert lengths.tolist() == [2, 3, 0]


def test_bucket_bounds_keep_lengths_within_the_ratio():
    lengths = sorted(SKEWED, reverse=True)
    bounds = bucket_bounds(lengths, 1.25)
    assert bounds[0] == 0 and bounds[-1] == len(SKEWED) - 1  # no 0-length
    for start, end in zip(bounds[:-1], bounds[1:]):
        assert end > start
        assert all(lengths[i] * 1.25 > lengths[start]
                   for i in range(start, end))
    assert bucket_bounds([0, 0], 1.25) == [0]


def test_slots_of_graphs_in_no_bucket_point_past_the_slots():
    # graph 1 is empty: its graph row has no slot and unpacks to zeros
    layout = bucket_layout({'graph': torch.arange(3)}, 3,
                           sizes=torch.tensor([2, 0, 5]))
    assert layout.bounds == [0, 1, 2]
    slots = layout.slots['graph']
    assert slots.row_slot.tolist() == [1, 2, 0]
    assert slots.slot_row.tolist() == [2, 0]
    x = torch.tensor([[1.], [2.], [3.]])
    assert unpack(pack(x, slots.slot_row), slots.row_slot).view(-1) \
        .tolist() == [1., 0., 3.]


def test_one_block_unless_buckets_save_enough():
    def layout(lengths):
        rows = torch.repeat_interleave(torch.arange(len(lengths)),
                                       torch.tensor(lengths))
        return bucket_layout({'row': rows}, len(lengths),
                             block=squares).bounds

    assert bucket_bounds([40, 5, 4, 3]) == [0, 1, 2, 3, 4]
    assert layout([40, 5, 4, 3]) == [0, 1, 2, 3, 4]  # 6400 vs 1650
    assert bucket_bounds([4, 3, 3, 3]) == [0, 1, 4]
    assert layout([4, 3, 3, 3]) == [0, 4]  # 64 vs 43


def test_bin_graphs_first_fit():
    # largest first, each into the first bin that still holds it
    bins, offsets, loads = bin_graphs([[5, 4, 3, 3, 2]], [8])
    assert bins == [0, 1, 0, 1, 2]
    assert offsets == [[0, 0, 5, 4, 0]]
    assert loads == [[8], [7], [2]]
    # a bin holds every kind: the second kind sends graph 2 to a third
    # bin, where the first would hold 5 + 3 of the first kind
    bins, _, loads = bin_graphs([[5, 4, 3], [1, 1, 3]], [8, 3])
    assert bins == [0, 1, 2] and loads == [[5, 1], [4, 1], [3, 3]]
    # no bound: one bin
    assert bin_graphs([[5, 4, 3]], [None])[0] == [0, 0, 0]


def first_fit(rows, capacity):
    # each graph into the first bin with room for it, bin after bin
    loads, bins, offsets = [], [], [[] for _ in rows]
    for sizes in zip(*rows):
        b = next((b for b, load in enumerate(loads) if all(
            cap is None or used + size <= cap
            for used, size, cap in zip(load, sizes, capacity))), len(loads))
        if b == len(loads):
            loads.append([0] * len(sizes))
        bins.append(b)
        for k, size in enumerate(sizes):
            offsets[k].append(loads[b][k])
            loads[b][k] += size
    return bins, offsets, loads


@pytest.mark.parametrize('count', [0, 1, 9, 300])
def test_bin_graphs_equals_first_fit_bin_by_bin(count):
    # the search skips closed bins: the same bins as scanning them all
    g = torch.Generator().manual_seed(count)
    nodes = sorted(torch.randint(0, 30, (count, ), generator=g).tolist(),
                   reverse=True)
    off = [2 * n + int(torch.randint(0, 9, (1, ), generator=g))
           for n in nodes]
    rows = [nodes, [1] * count, off, [n + m for n, m in zip(nodes, off)]]
    capacity = [max(nodes, default=0), 4, None, max(rows[3], default=0)]
    assert bin_graphs(rows, capacity) == first_fit(rows, capacity)


def test_bins_share_blocks_within_the_largest_graph():
    # two kinds of rows and one graph row; 11 non-empty graphs
    a = torch.tensor(SKEWED)
    b = torch.tensor([2 * n + 1 if n else 0 for n in SKEWED])
    graphs = torch.arange(len(SKEWED))
    rows = {'a': torch.repeat_interleave(graphs, a),
            'b': torch.repeat_interleave(graphs, b),
            'graph': graphs[a > 0]}
    layout = bucket_layout(rows, len(SKEWED), float('inf'),
                           bins={'graph': 3})
    assert len(layout.counts) == 1
    blocks = layout.counts[0]
    widths = {kind: layout.slots[kind].widths[0] for kind in rows}
    assert widths == {'a': 40, 'b': 81, 'graph': 3}
    filled = max(a.sum() / 40, b.sum() / 81, 11 / 3)
    assert math.ceil(BIN_SLACK * filled) <= blocks < 11  # they share
    block_of = {}
    for kind, row_graph in rows.items():
        slots = layout.slots[kind]
        # every row its own slot, in its graph's block, within the width
        assert slots.row_slot.unique().numel() == row_graph.numel()
        assert bool((slots.row_slot < blocks * widths[kind]).all())
        assert torch.equal(slots.slot_row[slots.row_slot],
                           torch.arange(row_graph.numel()))
        for g, block in zip(row_graph.tolist(),
                            (slots.row_slot // widths[kind]).tolist()):
            assert block_of.setdefault(g, block) == block
    x = torch.randn(rows['b'].numel(), 2)
    slots = layout.slots['b']
    assert torch.equal(unpack(pack(x, slots.slot_row), slots.row_slot), x)


def test_bins_in_one_bucket_unless_buckets_save_enough():
    def layout(lengths):
        rows = torch.repeat_interleave(torch.arange(len(lengths)),
                                       torch.tensor(lengths))
        return bucket_layout({'row': rows}, len(lengths), 8.0, squares,
                             bins={})

    # the small graphs in bins of their own size: 1 + 45 blocks (40 and
    # the slack) of 100^2 and 10^2 score entries, where one bucket takes
    # 6 of 100^2
    skewed = layout([100] + [10] * 40)
    assert skewed.bounds == [0, 1, 41] and skewed.counts == [1, 45]
    # a few small graphs: one bucket of 6 bins of 100^2, against 6 of
    # 100^2 and 4 of 5^2
    close = layout([100] * 5 + [5] * 3)
    assert close.bounds == [0, 8] and close.counts == [6]


def test_bins_take_no_length_masks():
    rows = {'a': torch.tensor([0, 0, 1])}
    with pytest.raises(ValueError, match="'bins'"):
        bucket_layout(rows, 2, bins={}, masked=['a'])
    with pytest.raises(ValueError, match="'bins'"):
        bucket_layout(rows, 2, bins={}, padding={'a': 1})
