import pytest
import torch

from torch_geometric_hot.data.simplex_candidates import (dense_simplices,
                                                         neighbour_simplices)
from torch_geometric_hot.ops.simplicial_attention import (
    indexer_distillation_loss, simplicial_attention, simplicial_logits)
from torch_geometric_hot.testing.simplicial_reference import (
    dense_simplicial_attention)

FORMS = ['multilinear', 'determinant']


def qkv(n, order, heads=2, dim=None, dim_v=3, seed=0):
    gen = torch.Generator().manual_seed(seed)
    dim = dim or 2 * (order + 1)

    def draw(width):
        return torch.randn(n, heads, width, generator=gen,
                           dtype=torch.float64)

    return (draw(dim), [draw(dim) for _ in range(order)],
            [draw(dim_v) for _ in range(order)])


@pytest.mark.parametrize('order', [1, 2, 3])
@pytest.mark.parametrize('form', FORMS)
def test_dense_tuples_match_einsum_reference(order, form):
    sizes = [4, 1, 3]  # three graphs in one batch, each its own reference
    batch = torch.repeat_interleave(torch.arange(3), torch.tensor(sizes))
    query, keys, values = qkv(sum(sizes), order)
    index = dense_simplices(sum(sizes), order, batch)
    shuffled = index[:, torch.randperm(index.size(1))]
    out = simplicial_attention(query, keys, values, index, form)
    chunked = simplicial_attention(query, keys, values, shuffled, form,
                                   chunk_size=5)
    start = 0
    for size in sizes:
        part = slice(start, start + size)
        expected = dense_simplicial_attention(query[part],
                                              [k[part] for k in keys],
                                              [v[part] for v in values], form)
        torch.testing.assert_close(out[part], expected)
        torch.testing.assert_close(chunked[part], expected)
        start += size


@pytest.mark.parametrize('order', [2, 3])
def test_constant_last_slot_reduces_to_lower_order(order):
    # Paper App. F.1: K_N = V_N = 1 on dense tuples gives (N-1)-simplicial.
    query, keys, values = qkv(4, order)
    index = dense_simplices(4, order)
    ones = torch.ones_like(keys[-1])
    out = simplicial_attention(query, keys[:-1] + [ones],
                               values[:-1] + [torch.ones_like(values[-1])],
                               index)
    lower = simplicial_attention(query, keys[:-1], values[:-1],
                                 dense_simplices(4, order - 1))
    torch.testing.assert_close(out, lower)
    assert not torch.allclose(out, simplicial_attention(
        query, keys, values, index))


@pytest.mark.parametrize('order,slots', [(2, (0, 1)), (3, (0, 2)),
                                         (3, (1, 2))])
def test_swapping_key_slots(order, slots):
    query, keys, _ = qkv(4, order)
    index = dense_simplices(4, order)
    a, b = slots
    swapped_keys = list(keys)
    swapped_keys[a], swapped_keys[b] = keys[b], keys[a]
    rows = list(range(order + 1))
    rows[a + 1], rows[b + 1] = rows[b + 1], rows[a + 1]
    swapped_index = index[rows]
    for form, sign in [('multilinear', 1.0), ('determinant', -1.0)]:
        logits = simplicial_logits(query, keys, index, form)
        swapped = simplicial_logits(query, swapped_keys, swapped_index, form)
        torch.testing.assert_close(swapped, sign * logits)
        assert logits.abs().min() > 0  # the sign test can fail


def test_order_one_is_softmax_attention_restricted_to_tuples():
    n = 7
    query, keys, values = qkv(n, 1, dim=4)
    edge_index = torch.tensor([[0, 0, 1, 2, 2, 2, 3, 5],
                               [1, 2, 0, 0, 3, 5, 2, 2]])
    index = neighbour_simplices(edge_index, n, 1)
    out = simplicial_attention(query, keys, values, index)
    mask = torch.zeros(n, n, dtype=torch.bool)
    mask[edge_index[0], edge_index[1]] = True
    expected = torch.nn.functional.scaled_dot_product_attention(
        query.transpose(0, 1), keys[0].transpose(0, 1),
        values[0].transpose(0, 1), attn_mask=mask).transpose(0, 1)
    has_tuple = mask.any(1)
    torch.testing.assert_close(out[has_tuple], expected[has_tuple])
    assert torch.equal(out[~has_tuple], torch.zeros_like(out[~has_tuple]))


@pytest.mark.parametrize('chunk_size', [None, 3])
def test_queries_without_tuples_get_zero_and_finite_gradients(chunk_size):
    query, keys, values = qkv(5, 2)
    for t in [query, *keys, *values]:
        t.requires_grad_()
    index = torch.tensor([[1, 1, 3, 3, 3, 1], [0, 2, 4, 4, 0, 1],
                          [2, 2, 0, 1, 1, 4]])
    out = simplicial_attention(query, keys, values, index,
                               chunk_size=chunk_size)
    assert torch.equal(out[[0, 2, 4]], torch.zeros_like(out[[0, 2, 4]]))
    out.pow(2).sum().backward()
    assert all(torch.isfinite(t.grad).all() for t in [query, *keys])
    empty = simplicial_attention(query, keys, values, index[:, :0])
    assert torch.equal(empty, torch.zeros_like(empty))


@pytest.mark.parametrize('form', FORMS)
@pytest.mark.parametrize('chunk_size', [None, 4])
def test_gradcheck(form, chunk_size):
    query, keys, values = qkv(3, 2, heads=1, dim=3, dim_v=2)
    index = dense_simplices(3, 2)[:, ::2]
    tensors = [query, *keys, *values]
    for t in tensors:
        t.requires_grad_()

    def fn(q, k1, k2, v1, v2):
        return simplicial_attention(q, [k1, k2], [v1, v2], index, form,
                                    chunk_size=chunk_size)

    assert torch.autograd.gradcheck(fn, tensors)


def test_alpha_is_returned_in_caller_order():
    query, keys, values = qkv(4, 2)
    index = dense_simplices(4, 2)
    shuffled = index[:, torch.randperm(index.size(1))]
    _, alpha = simplicial_attention(query, keys, values, index,
                                    return_alpha=True)
    _, chunked = simplicial_attention(query, keys, values, shuffled,
                                      chunk_size=7, return_alpha=True)
    # dense tuples are in lexicographic order: column = base-4 number
    position = shuffled[0] * 16 + shuffled[1] * 4 + shuffled[2]
    torch.testing.assert_close(chunked, alpha[position])


def test_bad_input():
    query, keys, values = qkv(4, 2)
    index = dense_simplices(4, 2)
    with pytest.raises(ValueError, match='simplex_index.*\\[0, 4\\)'):
        simplicial_attention(query, keys, values, index + 1)
    with pytest.raises(ValueError, match='N\\+1, T'):
        simplicial_attention(query, keys, values, index[:2])
    with pytest.raises(TypeError, match='torch.long'):
        simplicial_attention(query, keys, values, index.float())
    with pytest.raises(ValueError, match="keys\\[1\\]"):
        simplicial_attention(query, [keys[0], keys[1][:, :, :2]], values,
                             index)
    with pytest.raises(ValueError, match='one tensor per key slot'):
        simplicial_attention(query, keys, values[:1], index)
    with pytest.raises(ValueError, match='divisible by N\\+1 = 3'):
        q, k, v = qkv(4, 2, dim=4)
        simplicial_attention(q, k, v, index, 'determinant')
    with pytest.raises(ValueError, match="'form'"):
        simplicial_attention(query, keys, values, index, 'bilinear')


def test_indexer_distillation_loss():
    pair_index = torch.tensor([[0, 0, 1, 1, 1], [0, 1, 0, 1, 2]])
    simplex_index = torch.tensor([[0, 0, 0, 1, 1, 1], [0, 1, 1, 2, 0, 1],
                                  [1, 0, 1, 1, 0, 2]])
    alpha = torch.tensor([[0.25], [0.5], [0.25], [0.5], [0.1], [0.4]],
                         dtype=torch.float64)
    target = torch.tensor([0.25, 0.75, 0.1, 0.4, 0.5], dtype=torch.float64)
    exact = target.log().requires_grad_()
    for kind in ['kl', 'mse']:
        loss = indexer_distillation_loss(exact, pair_index, alpha,
                                         simplex_index, 3, kind)
        torch.testing.assert_close(loss, torch.zeros_like(loss))
        off = torch.zeros(5, dtype=torch.float64, requires_grad=True)
        loss = indexer_distillation_loss(off, pair_index, alpha,
                                         simplex_index, 3, kind)
        loss.backward()
        assert loss > 0 and off.grad.abs().sum() > 0
    with pytest.raises(ValueError, match="'kind'"):
        indexer_distillation_loss(off, pair_index, alpha, simplex_index, 3,
                                  'l1')
