import contextlib

import pytest
import torch

from torch_geometric_hot.data import PairView
from torch_geometric_hot.data.targets import resolve_targets
import torch_geometric_hot.ops.attention.padded as module
from torch_geometric_hot.ops import size_buckets
from torch_geometric_hot.ops.attention.pairs import softmax_class_attention
from torch_geometric_hot.ops.basis import basis
from torch_geometric_hot.ops.attention.padded import \
    global_block_attention, global_buckets
from torch_geometric_hot.ops.key_groups import attention_index
from torch_geometric_hot.testing import OperatorCounter, \
    attach_order_inputs, cuda_layout, edge_case_batch, global_class_cases, \
    random_graph, skewed_batch

ORDERS = [(2, 2), (2, 1), (2, 0), (1, 1), (1, 0), (1, 2)]
H, D = 2, 3


def padded_class_attention(cls, target, view, in_order, q, k, v):
    # the padded path of one global class, from the class's index tensors
    return global_block_attention(
        q, k, v, *attention_index(cls, target, view, in_order))


@pytest.mark.parametrize('orders', ORDERS)
def test_blocks_equal_enumerated_pairs(orders):
    in_order, out_order = orders
    for cls, target, view, q, k, v in global_class_cases(
            edge_case_batch(out_order), in_order, out_order, H, D):
        out = padded_class_attention(cls, target, view, in_order,
                                     q, k, v)
        expected = softmax_class_attention(cls, target, view, in_order, q,
                                           k, v)[0]
        torch.testing.assert_close(out, expected, atol=1e-12, rtol=1e-10)
        w = torch.randn_like(out)
        grads = torch.autograd.grad((out * w).sum(), (q, k, v))
        expected_grads = torch.autograd.grad((expected * w).sum(), (q, k, v))
        for g, e in zip(grads, expected_grads):
            torch.testing.assert_close(g, e, atol=1e-12, rtol=1e-10)


def test_empty_group_outputs_zero_and_small_query_blocks(monkeypatch):
    # A 1-node graph: class 12 of 2->2 (diag query, all other diagonal
    # entries) has no key; its output and gradients are 0, not NaN. Tiny
    # query blocks must give the same result as one block.
    import torch_geometric_hot.ops.attention.padded as module
    data = edge_case_batch(2)
    view = PairView.from_data(data)
    view, targets = resolve_targets(data.pair_x, view, 2, 2)
    cls = next(c for c in basis(2, 2) if c.name == '12')
    gen = torch.Generator().manual_seed(1)
    q = torch.randn(targets['diag'].num_rows, H, D, generator=gen,
                    dtype=torch.float64, requires_grad=True)
    k, v = (torch.randn(data.pair_x.size(0), H, D, generator=gen,
                        dtype=torch.float64) for _ in range(2))
    out = padded_class_attention(cls, targets['diag'], view, 2, q, k,
                                 v)
    alone = (view.nodes_per_graph == 1)[view.batch]
    assert alone.any()
    assert torch.equal(out[alone], torch.zeros_like(out[alone]))
    (grad, ) = torch.autograd.grad(out.sum(), q)
    assert torch.isfinite(grad).all()
    monkeypatch.setattr(module, 'BLOCK_ELEMENTS', 1)
    torch.testing.assert_close(
        padded_class_attention(cls, targets['diag'], view, 2, q, k,
                               v), out)


def test_launch_bound_layout_takes_larger_query_chunks():
    # one graph of 3,600 pair entries: chunks of about 1,100 queries on the
    # CPU's layout, one chunk on CUDA's: fewer operators, the same outputs
    # and gradients
    data = attach_order_inputs(random_graph(600, 1500), 2)
    cls, target, view, q, k, v = next(
        case for case in global_class_cases(data, 2, 2, H, D)
        if case[1].part == 'off')
    assert target.num_rows * data.pair_x.size(0) > 2 * module.BLOCK_ELEMENTS

    def run(layout):
        with layout(), OperatorCounter() as counter:
            got = outputs_and_grads(lambda q, k, v: padded_class_attention(
                cls, target, view, 2, q, k, v), q, k, v)
        return got, counter.total

    cpu, cpu_ops = run(contextlib.nullcontext)
    cuda, cuda_ops = run(cuda_layout)
    for a, b in zip(cpu, cuda):
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-12)
    assert cuda_ops < cpu_ops, (cuda_ops, cpu_ops)


def outputs_and_grads(fn, q, k, v, seed=0):
    out = fn(q, k, v)
    w = torch.randn(out.shape, dtype=out.dtype,
                    generator=torch.Generator().manual_seed(seed))
    return [out, *torch.autograd.grad((out * w).sum(), (q, k, v))]


@pytest.mark.parametrize('orders', ORDERS)
def test_buckets_equal_one_block_and_enumerated_pairs(orders, monkeypatch):
    # many small graphs, 1-node and edgeless ones, one much larger graph
    layouts = []

    def spy(*args):
        layouts.append(global_buckets(*args))
        return layouts[-1]

    monkeypatch.setattr(module, 'global_buckets', spy)
    in_order, out_order = orders
    for cls, target, view, q, k, v in global_class_cases(
            skewed_batch(out_order), in_order, out_order, H, D):
        def ours(q, k, v):
            return padded_class_attention(cls, target, view,
                                          in_order, q, k, v)

        got = outputs_and_grads(ours, q, k, v)
        assert len(layouts[-1].counts) > 1, cls.name  # the rule: buckets
        expected = outputs_and_grads(
            lambda q, k, v: softmax_class_attention(
                cls, target, view, in_order, q, k, v)[0], q, k, v)
        with monkeypatch.context() as m:
            m.setattr(size_buckets, 'BUCKET_GAIN', float('inf'))
            block = outputs_and_grads(ours, q, k, v)
            assert len(layouts[-1].counts) == 1
            m.setattr(module, 'BLOCK_ELEMENTS', 1)  # tiny query chunks
            m.setattr(size_buckets, 'BUCKET_GAIN', 2.0)
            chunked = outputs_and_grads(ours, q, k, v)
        for a, b, c, d in zip(got, expected, block, chunked):
            torch.testing.assert_close(a, b, rtol=0, atol=1e-10)
            torch.testing.assert_close(a, c, rtol=0, atol=1e-10)
            torch.testing.assert_close(a, d, rtol=0, atol=1e-10)


def test_rule_keeps_one_block_for_graphs_of_one_size():
    lengths = torch.tensor([5, 5, 4, 5])
    graph = torch.repeat_interleave(torch.arange(4), lengths)
    buckets = global_buckets(graph, graph, 4)
    assert buckets.counts == [4]
    assert buckets.slots['query'].widths == [5]
    assert buckets.slots['key'].widths == [6]  # and the zero key
    lengths = torch.tensor([40, 2, 3, 1, 2, 2, 3])
    graph = torch.repeat_interleave(torch.arange(7), lengths)
    buckets = global_buckets(graph, graph, 7)
    assert buckets.counts == [1, 2, 3, 1]  # by queries + keys
    key_lengths = buckets.lengths['key'][0][buckets.order]
    assert [key_lengths[start:end].tolist() for start, end in
            zip(buckets.bounds[:-1], buckets.bounds[1:])] == \
        [[40], [3, 3], [2, 2, 2], [1]]
