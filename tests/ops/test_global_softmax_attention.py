import pytest
import torch

from torch_geometric_hot.data import PairView
from torch_geometric_hot.data.targets import resolve_targets
from torch_geometric_hot.ops import softmax_class_attention
from torch_geometric_hot.ops.basis import basis
from torch_geometric_hot.ops.global_softmax_attention import \
    global_softmax_class_attention
from torch_geometric_hot.testing import edge_case_batch, global_class_cases

ORDERS = [(2, 2), (2, 1), (2, 0), (1, 1), (1, 0), (1, 2)]
H, D = 2, 3


@pytest.mark.parametrize('orders', ORDERS)
def test_blocks_equal_enumerated_pairs(orders):
    in_order, out_order = orders
    for cls, target, view, q, k, v in global_class_cases(
            edge_case_batch(out_order), in_order, out_order, H, D):
        out = global_softmax_class_attention(cls, target, view, in_order,
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
    import torch_geometric_hot.ops.global_softmax_attention as module
    data = edge_case_batch(2)
    view = PairView.from_data(data)
    view, targets = resolve_targets(data.pair_x, view, 2, 2)
    cls = next(c for c in basis(2, 2) if c.name == '12')
    gen = torch.Generator().manual_seed(1)
    q = torch.randn(targets['diag'].num_rows, H, D, generator=gen,
                    dtype=torch.float64, requires_grad=True)
    k, v = (torch.randn(data.pair_x.size(0), H, D, generator=gen,
                        dtype=torch.float64) for _ in range(2))
    out = global_softmax_class_attention(cls, targets['diag'], view, 2, q, k,
                                         v)
    alone = (view.nodes_per_graph == 1)[view.batch]
    assert alone.any()
    assert torch.equal(out[alone], torch.zeros_like(out[alone]))
    (grad, ) = torch.autograd.grad(out.sum(), q)
    assert torch.isfinite(grad).all()
    monkeypatch.setattr(module, 'BLOCK_ELEMENTS', 1)
    torch.testing.assert_close(
        global_softmax_class_attention(cls, targets['diag'], view, 2, q, k,
                                       v), out)


def test_rejects_local_class():
    data = edge_case_batch(2)
    view = PairView.from_data(data)
    view, targets = resolve_targets(data.pair_x, view, 2, 2)
    cls = next(c for c in basis(2, 2) if c.kind == 'local')
    x = torch.zeros(data.pair_x.size(0), H, D)
    with pytest.raises(ValueError, match='not global'):
        global_softmax_class_attention(cls, targets[cls.part], view, 2,
                                       x[:targets[cls.part].num_rows], x, x)
