r"""The softmax attention of one class as an operator
(:mod:`~torch_geometric_hot.ops.attention.compiled`): its output equals
the eager attention's (on the CPU with the native kernels, the grouped
operator's), its backward pass (a recomputation) the eager gradients,
dropout included (the recomputation draws the forward pass's factors from
the seed), and :func:`torch.library.opcheck` passes for both operators."""
import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode

from torch_geometric_hot.ops import native
from torch_geometric_hot.ops.grouped_softmax_attention import \
    grouped_softmax_attention, softmax_groups
from torch_geometric_hot.ops.key_groups import attention_index
from torch_geometric_hot.ops.native import available, use_native
from torch_geometric_hot.validation import SizeLimitError, size_limit
from torch_geometric_hot.testing import class_cases, edge_case_batch

OPS = torch.ops.torch_geometric_hot
ORDERS = [(2, 2), (2, 1), (2, 0), (1, 1), (1, 0), (1, 2)]
MODES = ['on', 'off'] if available() else ['off']
H, D = 2, 3


def cases(in_order, out_order, device=torch.device('cpu')):
    for cls, target, view, q, k, v in class_cases(
            edge_case_batch(out_order).to(device), in_order, out_order, H,
            D):
        op = OPS.global_class_softmax if cls.kind == 'global' else \
            OPS.local_class_softmax
        yield cls, op, (q, k, v), attention_index(cls, target, view,
                                                  in_order)


def _grouped(q, k, v, query_group, key_group, key_position, num_groups,
             query_ids, key_ids, dropout, seed):
    return grouped_softmax_attention(q, k, v, softmax_groups(
        query_group, key_group, key_position, num_groups, query_ids,
        key_ids), dropout, seed)


def _eager(op, q):
    # the function the operator runs, called eagerly (autograd through it)
    from torch_geometric_hot.ops.attention.padded import \
        global_block_attention
    from torch_geometric_hot.ops.attention.pairs import local_pair_attention
    if native.applies(q):
        return _grouped
    return global_block_attention if op is OPS.global_class_softmax else \
        local_pair_attention


@pytest.mark.parametrize('mode', MODES)
@pytest.mark.parametrize('orders', ORDERS)
@pytest.mark.parametrize('dropout', [0.0, 0.5])
def test_operator_equals_eager_attention_and_gradients(orders, dropout,
                                                       device, mode):
    for cls, op, qkv, index in cases(*orders, device):
        seed = torch.tensor(7) if dropout else None  # a CPU seed
        with use_native(mode):
            out = op(*qkv, *index, dropout, seed)
            expected = _eager(op, out)(*qkv, *index, dropout, seed)
            w = torch.randn_like(out)
            grads = torch.autograd.grad((out * w).sum(), qkv)
        torch.testing.assert_close(out, expected, atol=1e-12, rtol=1e-10,
                                   msg=cls.name)
        expected_grads = torch.autograd.grad((expected * w).sum(), qkv)
        for g, e in zip(grads, expected_grads):
            torch.testing.assert_close(g, e, atol=1e-12, rtol=1e-10,
                                       msg=cls.name)


def test_dropout_draws_from_the_seed():
    cls, op, qkv, index = next(c for c in cases(2, 2) if c[0].name == '15')
    first = op(*qkv, *index, 0.5, torch.tensor(1))
    assert torch.equal(first, op(*qkv, *index, 0.5, torch.tensor(1)))
    assert not torch.equal(first, op(*qkv, *index, 0.5, torch.tensor(2)))


@pytest.mark.parametrize('dtype', [torch.float32, torch.float64])
def test_opcheck(dtype):
    for cls, op, qkv, index in cases(2, 2):
        if cls.name not in ('8', '15'):  # one local, one global class
            continue
        q, k, v = (t.detach().to(dtype).requires_grad_() for t in qkv)
        torch.library.opcheck(op, (q, k, v, *index, 0.0, None))
        grad = torch.randn(q.size(0), H, D, dtype=dtype)
        backward = OPS.global_class_softmax_backward \
            if op is OPS.global_class_softmax else \
            OPS.local_class_softmax_backward
        # the backward operator's fake implementation as the compiler sees
        # it (opcheck's modes run the operator's own ops and cannot follow
        # the functorch wrappers of torch.func.vjp inside it): the compiled
        # training steps of tests/models/test_compile.py trace it
        grouped = native.applies(q)
        torch.library.opcheck(backward, (grad, q.detach(), k.detach(),
                                         v.detach(), *index, 0.0, None,
                                         grouped),
                              test_utils='test_autograd_registration')
        args = (grad, q.detach(), k.detach(), v.detach(), *index, 0.0, None,
                grouped)
        with FakeTensorMode() as mode:
            fake = backward(*[mode.from_tensor(a) if isinstance(
                a, torch.Tensor) else [mode.from_tensor(t) for t in a]
                if isinstance(a, list) else a for a in args])
        for f, real in zip(fake, backward(*args)):
            assert f.shape == real.shape and f.dtype == real.dtype


@use_native('off')  # the torch operations (the native kernel pairs none)
def test_forward_checks_the_size_limit_and_backward_recomputes_past_it():
    # the forward pass checks the sizes it allocates; its recomputation in
    # the backward pass does not (it may run in an autograd thread that
    # does not see the limit set where the forward pass ran)
    for cls, op, qkv, index in cases(2, 2):
        if cls.name not in ('8', '15'):
            continue
        with size_limit(1), pytest.raises(SizeLimitError):
            op(*qkv, *index, 0.0, None)
        out = op(*qkv, *index, 0.0, None)
        with size_limit(1):
            grads = torch.autograd.grad(out.sum(), qkv)
        assert all(torch.isfinite(g).all() for g in grads)
