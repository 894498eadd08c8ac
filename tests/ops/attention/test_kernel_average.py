"""Kernel attention's average over a block's keys
(ops/attention/kernel_average.py): its written-out backward pass equals
autograd's (float64, 1e-12), passes gradcheck, handles queries that see
no key and totals under the least denominator, and keeps the dtypes of
autocast. The packed path that calls it against the dense reference:
test_paths.py."""
import pytest
import torch

from torch_geometric_hot.ops.attention.kernel_average import \
    kernel_average, kernel_average_autograd


def _block(G=3, C=2, H=2, Lq=4, Lk=5, D=3, dtype=torch.float64, seed=0):
    gen = torch.Generator().manual_seed(seed)
    score = torch.rand(G, 1, H, Lq, Lk, generator=gen, dtype=dtype) + 0.1
    v = torch.randn(G, C, H, Lk, D, generator=gen, dtype=dtype)
    hidden = torch.rand(G, C, 1, Lq, Lk, generator=gen) < 0.4
    hidden[0, 0, 0, 1] = True  # a query that sees no key
    hidden[-1, -1, 0, 2] = True
    return score, v, hidden


def _outputs_and_grads(fn, score, v, hidden, eps, grad):
    score, v = score.clone().requires_grad_(), v.clone().requires_grad_()
    out = fn(score, v, hidden, eps)
    out.backward(grad)
    return out, score.grad, v.grad


@pytest.mark.parametrize('classes', [1, 2])
def test_equals_autograd(classes):
    score, v, hidden = _block(C=classes)
    grad = torch.randn(3, classes, 2, 4, 3, dtype=torch.float64)
    expected = _outputs_and_grads(kernel_average_autograd, score, v, hidden,
                                  1e-6, grad)
    actual = _outputs_and_grads(kernel_average, score, v, hidden, 1e-6,
                                grad)
    for a, b in zip(actual, expected):
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12)
    assert actual[0][0, 0, :, 1].abs().max() == 0  # no key: 0 / eps
    assert actual[1].abs().sum() > 0 and actual[2].abs().sum() > 0


def test_totals_under_eps_take_no_gradient_through_the_clamp():
    # every total below eps: the denominator is eps, a constant
    score, v, hidden = _block(seed=1)
    score = score * 1e-3
    grad = torch.randn(3, 2, 2, 4, 3, dtype=torch.float64)
    expected = _outputs_and_grads(kernel_average_autograd, score, v, hidden,
                                  10.0, grad)
    actual = _outputs_and_grads(kernel_average, score, v, hidden, 10.0,
                                grad)
    for a, b in zip(actual, expected):
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12)


def test_gradcheck():
    score, v, hidden = _block(G=2, Lq=3, Lk=3, D=2)
    score.requires_grad_()
    v.requires_grad_()
    assert torch.autograd.gradcheck(
        lambda s, x: kernel_average(s, x, hidden, 1e-6), (score, v))


def test_empty_block():
    score, v, hidden = _block(G=1)
    score, v, hidden = score[:0], v[:0], hidden[:0]
    score.requires_grad_()
    v.requires_grad_()
    out = kernel_average(score, v, hidden, 1e-6)
    assert out.shape == (0, 2, 2, 4, 3)
    out.sum().backward()
    assert score.grad.shape == score.shape and v.grad.shape == v.shape


def test_autocast_keeps_the_dtypes_and_precision_of_autograd():
    score, v, hidden = _block(dtype=torch.float32)
    grad = torch.randn(3, 2, 2, 4, 3)
    s = score.to(torch.bfloat16)  # as a score product leaves it
    exact = _outputs_and_grads(kernel_average_autograd, s.double(),
                               v.double(), hidden, 1e-6, grad.double())
    with torch.autocast('cpu', dtype=torch.bfloat16):
        expected = _outputs_and_grads(kernel_average_autograd, s, v, hidden,
                                      1e-6, grad)
        actual = _outputs_and_grads(kernel_average, s, v, hidden, 1e-6,
                                    grad)
    for a, b, e in zip(actual, expected, exact):
        assert a.dtype == b.dtype
        # rounded as much as autograd's, no more
        error, autograd_error = [(t.double() - e).abs().max()
                                 for t in (a, b)]
        assert error <= 2 * autograd_error + 1e-3 * e.abs().max()
