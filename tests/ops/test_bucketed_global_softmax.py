import pytest
import torch

import torch_geometric_hot.ops.global_softmax_attention as module
from torch_geometric_hot.ops import bucketed_global_softmax, \
    softmax_class_attention, token_buckets
from torch_geometric_hot.ops.global_softmax_attention import \
    global_softmax_class_attention
from torch_geometric_hot.testing import global_class_cases, skewed_batch

ORDERS = [(2, 2), (2, 1), (2, 0), (1, 1), (1, 0), (1, 2)]
H, D = 2, 3


def attend_all(orders):
    in_order, out_order = orders
    for cls, target, view, q, k, v in global_class_cases(
            skewed_batch(out_order), in_order, out_order, H, D):
        yield cls, target, view, in_order, q, k, v


def outputs_and_grads(fn, q, k, v, seed=0):
    out = fn(q, k, v)
    w = torch.randn(out.shape, dtype=out.dtype,
                    generator=torch.Generator().manual_seed(seed))
    return [out, *torch.autograd.grad((out * w).sum(), (q, k, v))]


@pytest.mark.parametrize('orders', ORDERS)
def test_buckets_equal_one_block_and_enumerated_pairs(orders, monkeypatch):
    calls = []
    bucketed = module.bucketed_global_attention

    def spy(*args, **kwargs):
        calls.append(1)
        return bucketed(*args, **kwargs)

    monkeypatch.setattr(module, 'bucketed_global_attention', spy)
    for cls, target, view, in_order, q, k, v in attend_all(orders):
        def ours(q, k, v):
            return global_softmax_class_attention(cls, target, view,
                                                  in_order, q, k, v)

        before = len(calls)
        got = outputs_and_grads(ours, q, k, v)
        assert len(calls) == before + 1, cls.name  # the rule chose buckets
        expected = outputs_and_grads(
            lambda q, k, v: softmax_class_attention(
                cls, target, view, in_order, q, k, v)[0], q, k, v)
        with monkeypatch.context() as m:
            m.setattr(token_buckets, 'BUCKET_GAIN', float('inf'))
            block = outputs_and_grads(ours, q, k, v)
            m.setattr(module, 'BLOCK_ELEMENTS', 1)  # tiny query chunks
            m.setattr(token_buckets, 'BUCKET_GAIN', 2.0)
            chunked = outputs_and_grads(ours, q, k, v)
        assert len(calls) == before + 2
        for a, b, c, d in zip(got, expected, block, chunked):
            torch.testing.assert_close(a, b, rtol=0, atol=1e-10)
            torch.testing.assert_close(a, c, rtol=0, atol=1e-10)
            torch.testing.assert_close(a, d, rtol=0, atol=1e-10)


def test_rule_keeps_one_block_for_graphs_of_one_size():
    lengths = torch.tensor([5, 5, 4, 5])
    graph = torch.repeat_interleave(torch.arange(4), lengths)
    position = torch.cat([torch.arange(n) for n in lengths.tolist()])
    assert bucketed_global_softmax.global_buckets(
        graph, position, lengths, graph, position, lengths) is None
    lengths = torch.tensor([40, 2, 3, 1, 2, 2, 3])
    graph = torch.repeat_interleave(torch.arange(7), lengths)
    position = torch.cat([torch.arange(n) for n in lengths.tolist()])
    buckets = bucketed_global_softmax.global_buckets(
        graph, position, lengths, graph, position, lengths)
    assert buckets is not None
    assert [s[0] for s in buckets.shapes] == [1, 2, 3, 1]  # by q + k
