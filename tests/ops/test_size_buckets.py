import pytest
import torch

from torch_geometric_hot.models import TokenGT
from torch_geometric_hot.ops import size_buckets, token_attention
from torch_geometric_hot.ops.native import use_native
from torch_geometric_hot.ops.size_buckets import (bucket_bounds, bucket_plan,
                                                  bucket_slots,
                                                  buckets_or_block, pack,
                                                  unpack)
from torch_geometric_hot.ops.token_attention import (
    TokenBuckets, dense_softmax_attention_reference,
    per_graph_softmax_attention, token_buckets, token_layout)

# Many small graphs, 1-token and 0-token graphs, one much larger graph.
SKEWED = [3, 1, 4, 0, 2, 40, 3, 5, 1, 2, 6, 4]


def tokens(sizes, heads=2, dim=3, seed=0):
    gen = torch.Generator().manual_seed(seed)
    token_batch = torch.cat([
        torch.full((s, ), g, dtype=torch.long) for g, s in enumerate(sizes)
    ])
    token_batch = token_batch[torch.randperm(token_batch.numel(),
                                             generator=gen)]
    qkv = [torch.randn(token_batch.numel(), heads, dim, generator=gen,
                       dtype=torch.float64, requires_grad=True)
           for _ in range(3)]
    return qkv, token_batch, len(sizes)


def test_bucket_bounds_keep_lengths_within_the_ratio():
    lengths = sorted(SKEWED, reverse=True)
    bounds = bucket_bounds(lengths, 1.25)
    assert bounds[0] == 0 and bounds[-1] == len(SKEWED) - 1  # no 0-length
    for start, end in zip(bounds[:-1], bounds[1:]):
        assert end > start
        assert all(lengths[i] * 1.25 > lengths[start]
                   for i in range(start, end))
    assert bucket_bounds([0, 0], 1.25) == [0]


def test_every_token_has_its_own_slot_in_its_graphs_block():
    _, token_batch, num_graphs = tokens(SKEWED)
    slots = token_buckets(token_batch, num_graphs).slots
    T = token_batch.numel()
    assert torch.equal(slots.slot_row[slots.row_slot], torch.arange(T))
    assert int((slots.slot_row < T).sum()) == T
    assert torch.equal(slots.taken_row,
                       slots.slot_row.masked_fill(slots.slot_row == T, 0))


def test_slots_of_graphs_in_no_bucket_point_past_the_slots():
    # graph 1 is empty: its graph row has no slot and unpacks to zeros
    graphs = torch.arange(3)
    order, bounds = bucket_plan(torch.tensor([2, 0, 5]))
    assert bounds == [0, 1, 2]
    slots = bucket_slots(graphs, 3, order, [1, 1], [1, 1],
                         torch.zeros_like(graphs))
    assert slots.row_slot.tolist() == [1, 2, 0]
    assert slots.slot_row.tolist() == [2, 0]
    x = torch.tensor([[1.], [2.], [3.]])
    assert unpack(pack(x, slots.slot_row), slots.row_slot).view(-1) \
        .tolist() == [1., 0., 3.]


def test_one_block_unless_buckets_save_enough():
    def cost(start, end):
        return (end - start) * lengths[start]**2

    lengths = [40, 5, 4, 3]
    bounds = bucket_bounds(lengths)
    assert bounds == [0, 1, 2, 3, 4]
    assert buckets_or_block(bounds, cost) == bounds  # 6400 vs 1650
    lengths = [4, 3, 3, 3]
    assert bucket_bounds(lengths) == [0, 1, 4]
    assert buckets_or_block([0, 1, 4], cost) == [0, 4]  # 64 vs 43


@pytest.mark.parametrize('sizes', [SKEWED, [1, 1, 1], [7, 0, 1], [1]])
def test_buckets_equal_one_padded_block_and_the_reference(sizes,
                                                          monkeypatch):
    (q, k, v), token_batch, num_graphs = tokens(sizes)
    buckets = token_buckets(token_batch, num_graphs)
    out = per_graph_softmax_attention(q, k, v, token_batch, num_graphs,
                                      layout=buckets)
    monkeypatch.setattr(size_buckets, 'BUCKET_GAIN', float('inf'))
    one = token_buckets(token_batch, num_graphs)
    assert len(one.counts) == 1
    block = per_graph_softmax_attention(q, k, v, token_batch, num_graphs,
                                        layout=one)
    ref = dense_softmax_attention_reference(q, k, v, token_batch,
                                            num_graphs)
    torch.testing.assert_close(out, block, rtol=0, atol=1e-10)
    torch.testing.assert_close(out, ref, rtol=0, atol=1e-10)
    grad = torch.randn_like(out)
    ours = torch.autograd.grad(out, (q, k, v), grad)
    theirs = torch.autograd.grad(block, (q, k, v), grad)
    for a, b in zip(ours, theirs):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-10)


def test_bucketed_attention_gradcheck():
    (q, k, v), token_batch, _ = tokens([5, 1, 2, 2], heads=1, dim=2)
    buckets = token_buckets(token_batch, 4)
    assert len(buckets.counts) == 3
    assert torch.autograd.gradcheck(
        lambda q, k, v: per_graph_softmax_attention(q, k, v, token_batch, 4,
                                                    layout=buckets),
        (q, k, v))


def test_layout_rule_buckets_skewed_batches_only():
    _, token_batch, num_graphs = tokens(SKEWED)
    assert len(token_buckets(token_batch, num_graphs).counts) > 1
    with use_native('off'):  # the padded layouts are the default then
        assert isinstance(token_layout(token_batch, num_graphs),
                          TokenBuckets)
    _, token_batch, num_graphs = tokens([4, 4, 4, 3])  # little padding
    assert len(token_buckets(token_batch, num_graphs).counts) == 1
    _, token_batch, num_graphs = tokens([9])  # one graph: no padding
    buckets = token_buckets(token_batch, num_graphs)
    assert buckets.counts == [1] and buckets.masks == [None]


def molecules_batch(sizes, seed=0):
    gen = torch.Generator().manual_seed(seed)
    edges, batch, start = [], [], 0
    for g, n in enumerate(sizes):
        if n > 1:  # a path plus a chord, both directions
            src = torch.arange(n - 1)
            pairs = torch.stack([src, src + 1])
            if n > 3:
                pairs = torch.cat([pairs, torch.tensor([[0], [n - 1]])], 1)
            edges.append(torch.cat([pairs, pairs.flip(0)], 1) + start)
        batch.append(torch.full((n, ), g))
        start += n
    edge_index = torch.cat(edges, 1)
    x = torch.randn(start, 5, generator=gen, dtype=torch.float64)
    edge_attr = torch.randn(edge_index.size(1), 2, generator=gen,
                            dtype=torch.float64)
    return x, edge_index, edge_attr, torch.cat(batch)


@use_native('off')  # the padded layouts (the native kernel pads nothing)
def test_tokengt_output_and_gradients_equal_with_and_without_buckets(
        monkeypatch):
    # 1-node graphs, a 0-edge graph, one graph much larger than the rest.
    sizes = [3, 1, 4, 2, 30, 1, 5, 3]
    x, edge_index, edge_attr, batch = molecules_batch(sizes)
    torch.manual_seed(0)
    model = TokenGT(5, 16, 1, 2, heads=4, edge_dim=2, node_id='orf',
                    seed=0).double().eval()

    def run():
        model.zero_grad()
        out = model(x, edge_index, edge_attr, batch)
        out.square().sum().backward()
        return out, [p.grad.clone() for p in model.parameters()]

    layouts = []
    built = token_attention.token_buckets

    def spy(*args, **kwargs):
        layouts.append(built(*args, **kwargs))
        return layouts[-1]

    monkeypatch.setattr(token_attention, 'token_buckets', spy)
    out, grads = run()
    assert len(layouts) == 1  # once per batch
    assert len(layouts[0].counts) > 1  # the rule chose buckets
    monkeypatch.setattr(size_buckets, 'BUCKET_GAIN', float('inf'))
    ref, ref_grads = run()
    assert len(layouts) == 2 and len(layouts[1].counts) == 1
    torch.testing.assert_close(out, ref, rtol=0, atol=1e-10)
    for a, b in zip(grads, ref_grads):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-10)
