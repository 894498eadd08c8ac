import pytest
import torch

from torch_geometric_hot.data import PairView
from torch_geometric_hot.nn import HOTConv
from torch_geometric_hot.ops import use_path
from torch_geometric_hot.ops.attention.pairs import softmax_class_attention
from torch_geometric_hot.ops.attention.grouped import class_groups
from torch_geometric_hot.ops.attention.dropout import dropout_threshold, \
    keep_factors
from torch_geometric_hot.ops.grouped_softmax_attention import \
    grouped_softmax_attention, softmax_groups
from torch_geometric_hot.ops.key_groups import summary_keys
from torch_geometric_hot.ops.native import available, use_native
from torch_geometric_hot.testing import class_cases, skewed_batch

ORDERS = [(2, 2), (2, 1), (2, 0), (1, 1), (1, 0), (1, 2)]
MODES = ['on', 'off'] if available() else ['off']
H, D = 2, 3


def assert_same(outs, expected, **tolerance):
    for out, exp in zip(outs, expected):
        torch.testing.assert_close(out, exp, **tolerance)


@pytest.mark.parametrize('mode', MODES)
@pytest.mark.parametrize('orders', ORDERS)
@pytest.mark.parametrize('dropout', [0.0, 0.4])
def test_equals_enumerated_pairs(orders, mode, dropout, device):
    # every local and global class, forward and backward, float64: the
    # native kernel (on, CPU) and the operator's torch implementation (off,
    # and every other device); with dropout, the keys of a class's groups
    # (numbered in its pool) hashed as their input rows, as on the pairs
    in_order, out_order = orders
    seed = torch.tensor(11)
    for cls, target, view, q, k, v in class_cases(
            skewed_batch(out_order, device=device), in_order, out_order, H,
            D):
        expected = softmax_class_attention(cls, target, view, in_order, q,
                                           k, v, dropout, True, seed)[0]
        position = summary_keys(cls.pool[0], view, in_order).position
        with use_native(mode):
            out = grouped_softmax_attention(
                q, k.index_select(0, position), v.index_select(0, position),
                class_groups(cls, target, view, in_order), dropout, seed)
            w = torch.randn_like(out)
            grads = torch.autograd.grad((out * w).sum(), (q, k, v))
        torch.testing.assert_close(out, expected, atol=1e-12, rtol=1e-10)
        assert_same(grads, torch.autograd.grad((expected * w).sum(),
                                               (q, k, v)),
                    atol=1e-12, rtol=1e-10)


def random_groups(num_groups: int, rows: int, inputs: int, seed: int,
                  exclusions: int = 2):
    # queries and keys in random groups (some without queries or keys,
    # sizes on both sides of the row-layout limit), exclusions by ids
    gen = torch.Generator().manual_seed(seed)
    query_group = torch.randint(num_groups, (rows, ), generator=gen)
    big = inputs // 2  # group 0: more keys than the row layout takes
    key_group = torch.cat([torch.randint(num_groups - 2, (inputs - big, ),
                                         generator=gen),
                           torch.zeros(big, dtype=torch.long)])
    position = torch.randperm(inputs, generator=gen)
    query_ids = [torch.randint(-1, 4, (rows, ), generator=gen)
                 for _ in range(exclusions)]
    key_ids = [torch.randint(0, 4, (inputs, ), generator=gen)
               for _ in range(exclusions)]
    return softmax_groups(query_group, key_group, position, num_groups,
                          query_ids, key_ids)


@pytest.mark.parametrize('dtype,tolerance', [
    (torch.float64, dict(atol=1e-12, rtol=1e-12)),
    (torch.float32, dict(atol=1e-5, rtol=1e-5)),
])
def test_native_equals_torch(dtype, tolerance):
    if not available():
        pytest.skip('native kernels unavailable')
    groups = random_groups(12, 60, 70, seed=0)
    gen = torch.Generator().manual_seed(1)
    q = torch.randn(60, 3, 5, generator=gen, dtype=dtype)
    k = torch.randn(70, 3, 5, generator=gen, dtype=dtype)
    v = torch.randn(70, 2, 3, 3, generator=gen, dtype=dtype)[:, 1]  # strided
    w = torch.randn(60, 3, 3, generator=gen, dtype=dtype)
    results = []
    for mode in ('on', 'off'):
        inputs = [t.clone().requires_grad_() for t in (q, k, v)]
        with use_native(mode):
            out = grouped_softmax_attention(*inputs, groups)
            grads = torch.autograd.grad((out * w).sum(), inputs)
        results.append([out, *grads])
    assert_same(*results, **tolerance)
    assert results[0][0].abs().sum() > 0


def dense_reference(q, k, v, groups, dropout: float, seed: int):
    # query by query: the softmax over the group's keys that its ids do
    # not exclude, times dropout's factors
    out = q.new_zeros(q.size(0), q.size(1), v.size(2))
    query_ptr, key_ptr = groups.queries.ptr.tolist(), groups.keys.ptr.tolist()
    for g in range(len(query_ptr) - 1):
        keys = groups.keys.rows[key_ptr[g]:key_ptr[g + 1]]
        ids = groups.key_ids[:, key_ptr[g]:key_ptr[g + 1]]
        for i in groups.queries.rows[query_ptr[g]:query_ptr[g + 1]].tolist():
            rows = keys[(ids != groups.query_ids[:, i:i + 1]).all(0)]
            if rows.numel() == 0:
                continue
            alpha = torch.softmax((q[i] * k[rows]).sum(-1), 0)
            if dropout:
                alpha = alpha * keep_factors(
                    torch.tensor(i), rows.unsqueeze(1),
                    torch.arange(q.size(1)), seed,
                    dropout_threshold(dropout), q.dtype)
            out[i] = (alpha.unsqueeze(-1) * v[rows]).sum(0)
    return out


@pytest.mark.parametrize('mode', MODES)
@pytest.mark.parametrize('dropout', [0.0, 0.3])
def test_equals_dense_reference(mode, dropout):
    # forward and backward, with and without dropout on the weights (the
    # native kernel's draws are the reference's)
    groups = random_groups(12, 60, 70, seed=6)
    gen = torch.Generator().manual_seed(7)
    q, k, v = (torch.randn(rows, 3, 4, generator=gen, dtype=torch.float64,
                           requires_grad=True) for rows in (60, 70, 70))
    w = torch.randn(60, 3, 4, generator=gen, dtype=torch.float64)
    with use_native(mode):
        out = grouped_softmax_attention(q, k, v, groups, dropout, seed=1234)
        grads = torch.autograd.grad((out * w).sum(), (q, k, v))
    expected = dense_reference(q, k, v, groups, dropout, seed=1234)
    torch.testing.assert_close(out, expected, atol=1e-12, rtol=1e-10)
    assert_same(grads, torch.autograd.grad((expected * w).sum(), (q, k, v)),
                atol=1e-12, rtol=1e-10)
    if dropout:  # the draws removed some weights, not all
        plain = dense_reference(q, k, v, groups, 0.0, seed=0)
        assert not torch.allclose(out, plain)


@pytest.mark.parametrize('mode', MODES)
@pytest.mark.parametrize('dropout', [0.0, 0.4])
def test_gradcheck(mode, dropout):
    groups = random_groups(5, 12, 20, seed=2, exclusions=1)
    gen = torch.Generator().manual_seed(3)
    inputs = [torch.randn(rows, 2, 3, generator=gen, dtype=torch.float64,
                          requires_grad=True) for rows in (12, 20, 20)]
    with use_native(mode):
        assert torch.autograd.gradcheck(
            lambda q, k, v: grouped_softmax_attention(q, k, v, groups,
                                                      dropout, seed=5),
            inputs)


@pytest.mark.parametrize('mode', MODES)
def test_query_without_keys_outputs_zero(mode):
    # every key of the group excluded, and a group without keys: zero
    # output and zero, finite gradients
    ids = torch.tensor([5, 5, 5])
    groups = softmax_groups(torch.tensor([0, 0, 1]), torch.tensor([0, 0]),
                            torch.tensor([1, 0]), 2,
                            [torch.tensor([5, 7, 7])], [ids[:2]])
    q, k, v = (torch.randn(3, 2, 4, dtype=torch.float64,
                           requires_grad=True) for _ in range(3))
    with use_native(mode):
        out = grouped_softmax_attention(q, k[:2], v[:2], groups)
        grads = torch.autograd.grad(out.sum(), (q, k, v))
    assert out[0].abs().max() == 0 and out[2].abs().max() == 0
    assert out[1].abs().max() > 0
    assert all(torch.isfinite(g).all() for g in grads)
    assert grads[0][0].abs().max() == 0 and grads[0][2].abs().max() == 0


def test_ids_beyond_int32_take_the_torch_implementation():
    groups = softmax_groups(torch.tensor([0, 0]), torch.tensor([0, 0]),
                            torch.tensor([0, 1]), 1,
                            [torch.tensor([2**40, 3])],
                            [torch.tensor([2**40, 3])])
    assert groups.key_ids.dtype == torch.long
    q, k, v = (torch.randn(2, 1, 2, dtype=torch.float64) for _ in range(3))
    out = grouped_softmax_attention(q, k, v, groups)
    # each query sees the one key whose id differs from its own
    torch.testing.assert_close(out, v.flip(0))


@pytest.mark.parametrize('orders', [(2, 2), (1, 1)])
def test_layer_dropout_in_training_only(orders):
    # with dropout the layer on the grouped path: reproducible under
    # torch.manual_seed, different from evaluation, which equals a layer
    # without dropout (every path against the reference: test_paths.py)
    if not available():
        pytest.skip('native kernels unavailable')
    in_order, out_order = orders
    data = skewed_batch(out_order)
    x = data.pair_x if in_order == 2 else data.x
    view = PairView.from_data(data)
    torch.manual_seed(0)
    conv = HOTConv(3, 5, in_order, out_order, heads=2, head_channels=3,
                   attention='softmax', dropout=0.5).double()
    torch.manual_seed(0)
    plain = HOTConv(3, 5, in_order, out_order, heads=2, head_channels=3,
                    attention='softmax').double()
    outs = []
    for _ in range(2):
        torch.manual_seed(1)
        with use_path('grouped'):
            outs.append(conv(x, view))
    torch.testing.assert_close(outs[0], outs[1], atol=0, rtol=0)
    expected = plain(x, view)
    assert not torch.allclose(outs[0], expected)
    conv.eval()
    torch.testing.assert_close(conv(x, view), expected, atol=1e-12,
                               rtol=1e-12)


def test_groups_split_across_threads(monkeypatch):
    # every group a part of its own on two threads: the same result as one
    if not available():
        pytest.skip('native kernels unavailable')
    import torch_geometric_hot.ops.native as native
    groups = random_groups(12, 60, 70, seed=4)
    gen = torch.Generator().manual_seed(5)
    inputs = [torch.randn(rows, 2, 4, generator=gen, dtype=torch.float64)
              for rows in (60, 70, 70)]
    w = torch.randn(60, 2, 4, generator=gen, dtype=torch.float64)
    threads = torch.get_num_threads()
    results = []
    try:
        for count, cost in ((1, native.MIN_COST_PER_THREAD), (2, 1)):
            torch.set_num_threads(count)
            monkeypatch.setattr(native, 'MIN_COST_PER_THREAD', cost)
            leaves = [t.clone().requires_grad_() for t in inputs]
            out = grouped_softmax_attention(*leaves, groups, 0.3, seed=8)
            results.append([out, *torch.autograd.grad((out * w).sum(),
                                                      leaves)])
    finally:
        torch.set_num_threads(threads)
    assert_same(*results, atol=0, rtol=0)


def test_bad_input_names_the_argument():
    groups = softmax_groups(torch.tensor([0, 0]), torch.tensor([0, 0, 0]),
                            torch.arange(3), 1, [], [])
    q, k, v = torch.randn(2, 2, 4), torch.randn(3, 2, 4), torch.randn(3, 2, 5)
    with pytest.raises(ValueError, match="'k' must be"):
        grouped_softmax_attention(q, k[:, :, :3], v, groups)
    with pytest.raises(ValueError, match="'k' must be"):
        grouped_softmax_attention(q, k, v[:2], groups)
    with pytest.raises(ValueError, match="'v' must be"):
        grouped_softmax_attention(q, k, v.flatten(1), groups)
    with pytest.raises(ValueError, match="'groups' lists 2 query rows"):
        grouped_softmax_attention(q[:1], k, v, groups)
    with pytest.raises(ValueError, match="key rows up to 2 but 'k' has 2"):
        grouped_softmax_attention(q, k[:2], v[:2], groups)
    with pytest.raises(ValueError, match="'dropout' must be in"):
        grouped_softmax_attention(q, k, v, groups, dropout=1.0)
    with pytest.raises(ValueError, match="'seed' must be in"):
        grouped_softmax_attention(q, k, v, groups, dropout=0.1, seed=-1)
