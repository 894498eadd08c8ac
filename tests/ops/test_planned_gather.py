"""Gathers whose backward pass is a gather (ops/planned_gather.py): the
inverse index finds the one taken position that reads each row, stands a
padded position in for rows no taken position reads, and refuses
indices it cannot invert; with it, the gradient equals autograd's
scatter wherever padded positions have a zero gradient. The packed
attention that uses it against the dense reference: test_paths.py."""
import pytest
import torch

from torch_geometric_hot.ops.planned_gather import gather_rows, \
    inverse_index


def test_inverse_of_a_permutation():
    index = torch.randperm(7, generator=torch.Generator().manual_seed(0))
    inverse = inverse_index(index, torch.ones(7, dtype=torch.bool), 7)
    assert torch.equal(index[inverse], torch.arange(7))
    assert inverse.dtype == index.dtype


@pytest.mark.parametrize('dtype', [torch.int32, torch.int64])
def test_padding_stands_in_for_unread_rows(dtype):
    # rows 0..4; positions 1 and 4 are padding reading row 0; row 3 unread
    index = torch.tensor([2, 0, 4, 1, 0], dtype=dtype)
    taken = torch.tensor([True, False, True, True, True])
    inverse = inverse_index(index, taken, 5)
    assert inverse.tolist() == [4, 3, 0, 1, 2]


def test_refuses_what_it_cannot_invert():
    taken = torch.ones(3, dtype=torch.bool)
    # a row read twice by taken positions
    assert inverse_index(torch.tensor([0, 1, 1]), taken, 3) is None
    # a row read by none, and no padding to stand in for it
    assert inverse_index(torch.tensor([0, 1, 2]), taken, 4) is None


def test_empty_index():
    index = torch.zeros(0, dtype=torch.long)
    assert inverse_index(index, index.bool(), 0).numel() == 0
    assert inverse_index(index, index.bool(), 2) is None


def test_gradient_equals_the_scatter_where_padding_has_none():
    gen = torch.Generator().manual_seed(0)
    index = torch.tensor([3, 0, 1, 0, 2, 0])
    taken = torch.tensor([True, True, True, False, True, False])
    x = torch.randn(5, 2, 3, dtype=torch.float64, generator=gen)
    grad = torch.randn(6, 2, 3, dtype=torch.float64, generator=gen)
    grad[~taken] = 0  # padding: masked out or dropped after the gather
    inverse = inverse_index(index, taken, 5)
    a = x.clone().requires_grad_()
    b = x.clone().requires_grad_()
    out = gather_rows(a, index, inverse)
    torch.testing.assert_close(out, x.index_select(0, index))
    out.backward(grad)
    b.index_select(0, index).backward(grad)
    torch.testing.assert_close(a.grad, b.grad, rtol=0, atol=0)
    assert a.grad[4].abs().sum() == 0  # row 4: read by no position


def test_gradcheck_of_a_permutation():
    index = torch.tensor([2, 0, 3, 1])
    inverse = inverse_index(index, torch.ones(4, dtype=torch.bool), 4)
    x = torch.randn(4, 3, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(
        lambda t: gather_rows(t, index, inverse), (x, ))


def test_without_inverse_it_is_index_select():
    x = torch.randn(4, 3, requires_grad=True)
    index = torch.tensor([1, 1, 3])
    out = gather_rows(x, index)
    assert out.grad_fn.name() == 'IndexSelectBackward0'
