import torch

from torch_geometric_hot.ops.size_buckets import (bucket_bounds,
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
