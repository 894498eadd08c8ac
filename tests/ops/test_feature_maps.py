import pytest
import torch

from torch_geometric_hot.ops import native
from torch_geometric_hot.ops.feature_maps import FeatureMap, favor_plus, \
    favor_plus_autograd, favor_plus_keys_queries

DTYPES = [torch.float32, torch.float64]
TOL = {torch.float32: dict(atol=1e-5, rtol=1e-4),
       torch.float64: dict(atol=1e-12, rtol=1e-10)}


def _inputs(dtype, rows=40, heads=3, dim=8, features=17, groups=3, seed=0):
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(rows, heads, dim, generator=gen, dtype=dtype) * 2
    w = torch.randn(features, dim, generator=gen, dtype=dtype)
    group = torch.randint(0, groups, (rows, ), generator=gen)
    return x.requires_grad_(), w, group


def _assert_matches_reference(x, w, args, dtype):
    out, ref = favor_plus(x, w, *args), favor_plus_autograd(x, w, *args)
    torch.testing.assert_close(out, ref, **TOL[dtype])
    grad = torch.randn_like(out)
    torch.testing.assert_close(torch.autograd.grad(out, x, grad)[0],
                               torch.autograd.grad(ref, x, grad)[0],
                               **TOL[dtype])


@pytest.mark.parametrize('native_mode', ['auto', 'off'])
@pytest.mark.parametrize('dtype', DTYPES)
@pytest.mark.parametrize('is_query,grouped', [(True, False), (False, False),
                                              (False, True)])
# (rows, d, r): the native kernels' vectors hold 4 or 8 lanes; r = 40 fills
# more than one register block, rows = 1 is only the (copied) last row
@pytest.mark.parametrize('rows,dim,features', [(40, 8, 17), (7, 5, 11),
                                               (1, 3, 40), (9, 16, 45)])
def test_favor_plus_matches_reference(native_mode, dtype, is_query, grouped,
                                      rows, dim, features):
    x, w, group = _inputs(dtype, rows=rows, dim=dim, features=features)
    with native.use_native(native_mode):
        _assert_matches_reference(x, w, (is_query, group if grouped else
                                         None, 3), dtype)


def test_favor_plus_across_threads():
    # enough rows for the native kernels to split them between threads
    x, w, group = _inputs(torch.float32, rows=6000, heads=4)
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        for is_query in (True, False):
            _assert_matches_reference(x, w, (is_query, group, 3),
                                      torch.float32)
    finally:
        torch.set_num_threads(threads)


@pytest.mark.parametrize('native_mode', ['auto', 'off'])
def test_favor_plus_gradcheck_of_normalised_features(native_mode):
    # The stabiliser is a constant to the backward pass; in a ratio over
    # the rows that share it, it cancels, so finite differences agree
    # (the operator's native kernels and its torch branch).
    x, w, group = _inputs(torch.float64, rows=12, heads=2, dim=4,
                          features=6)

    def per_query(x):
        phi = favor_plus(x, w, True)
        return phi / phi.sum(-1, keepdim=True)

    def per_group(x):
        phi = favor_plus(x, w, False, group, 3)
        total = phi.new_zeros(3, *phi.shape[1:]).index_add_(0, group, phi)
        return phi / total.sum(-1, keepdim=True)[group]

    with native.use_native(native_mode):
        assert torch.autograd.gradcheck(per_query, (x, ))
        assert torch.autograd.gradcheck(per_group, (x, ))


def test_favor_plus_stabiliser_is_per_group():
    # keys of one group do not move when another group's keys grow
    x, w, group = _inputs(torch.float64)
    out = favor_plus(x, w, False, group, 3)
    scaled = x.detach().clone()
    scaled[group == 2] *= 3
    moved = favor_plus(scaled, w, False, group, 3)
    keep = group != 2
    torch.testing.assert_close(out[keep], moved[keep])
    assert not torch.allclose(out[~keep], moved[~keep])


@pytest.mark.parametrize('is_query,grouped', [(True, False), (False, False),
                                              (False, True)])
def test_favor_plus_empty_input(is_query, grouped):
    x, w, _ = _inputs(torch.float32, rows=0)
    group = torch.zeros(0, dtype=torch.long) if grouped else None
    out = favor_plus(x, w, is_query, group, 1)
    assert out.shape == (0, 3, 17)
    out.sum().backward()
    assert x.grad.shape == x.shape


@pytest.mark.parametrize('native_mode,operator', [('auto', True),
                                                  ('off', False)])
def test_favor_plus_is_an_operator_where_the_native_kernels_apply(
        native_mode, operator):
    # elsewhere in eager mode an autograd function: no operator's dispatch
    from torch.utils._python_dispatch import TorchDispatchMode

    class Seen(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.namespaces = set()

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            self.namespaces.add(func.namespace)
            return func(*args, **(kwargs or {}))

    x, w, group = _inputs(torch.float32)
    with native.use_native(native_mode):
        if native_mode == 'auto' and not native.applies(x):
            pytest.skip('the native kernels do not build here')
        with Seen() as seen:
            favor_plus(x, w, False, group, 3).sum().backward()
    assert ('torch_geometric_hot' in seen.namespaces) == operator


@pytest.mark.parametrize('native_mode', ['auto', 'off'])
@pytest.mark.parametrize('grouped', [False, True])
@pytest.mark.parametrize('rows', [40, 1, 0])
def test_keys_and_queries_in_one_pass_match_two_maps(native_mode, grouped,
                                                     rows):
    keys, w, group = _inputs(torch.float64, rows=rows)
    queries = _inputs(torch.float64, rows=rows, seed=1)[0]
    args = (group if grouped else None, 3)
    with native.use_native(native_mode):
        got = favor_plus_keys_queries(keys, queries, w, *args)
        want = (favor_plus(keys, w, False, *args),
                favor_plus(queries, w, True))
        grads = [torch.randn_like(t) for t in want]
        for g, t in zip(got, want):
            torch.testing.assert_close(g, t, **TOL[torch.float64])
        for g, t in zip(torch.autograd.grad(got, (keys, queries), grads),
                        torch.autograd.grad(want, (keys, queries), grads)):
            torch.testing.assert_close(g, t, **TOL[torch.float64])


def test_keys_and_queries_in_one_pass_with_one_map_used():
    # a gradient reaches the queries' map only (the keys' is unused)
    keys, w, group = _inputs(torch.float64)
    queries = _inputs(torch.float64, seed=1)[0]
    with native.use_native('off'):
        got = favor_plus_keys_queries(keys, queries, w, group, 3)[1]
        want = favor_plus(queries, w, True)
        grad = torch.randn_like(want)
        got_k, got_q = torch.autograd.grad(got, (keys, queries), grad,
                                           allow_unused=True)
        assert got_k is None or not got_k.any()
        torch.testing.assert_close(
            got_q, torch.autograd.grad(want, queries, grad)[0],
            **TOL[torch.float64])


def test_keys_and_queries_of_other_row_counts_take_two_maps():
    keys, w, group = _inputs(torch.float32, rows=40)
    queries = _inputs(torch.float32, rows=3, seed=1)[0]
    got_k, got_q = favor_plus_keys_queries(keys, queries, w, group, 3)
    torch.testing.assert_close(got_k, favor_plus(keys, w, False, group, 3))
    torch.testing.assert_close(got_q, favor_plus(queries, w, True))


def test_feature_map_keys_and_queries():
    fm = FeatureMap(8, 'favor+', num_features=11, seed=0).double()
    keys, _, group = _inputs(torch.float64)
    queries = _inputs(torch.float64, seed=1)[0]
    with native.use_native('off'):
        got = fm.keys_and_queries(keys, queries, group, 3)
    torch.testing.assert_close(got[0], fm(keys, False, group, 3))
    torch.testing.assert_close(got[1], fm(queries, True))
    with pytest.raises(ValueError, match='head dimension 8'):
        fm.keys_and_queries(keys[..., :4], queries[..., :4])
    relu = FeatureMap(8, 'relu', seed=0).double()  # two maps
    torch.testing.assert_close(relu.keys_and_queries(keys, queries)[1],
                               relu(queries, True))


def test_favor_plus_trains_a_projection_through_the_reference():
    x, w, _ = _inputs(torch.float64)
    w.requires_grad_()
    favor_plus(x, w, True).sum().backward()
    assert w.grad is not None and torch.isfinite(w.grad).all()


def test_feature_map_uses_favor_plus():
    fm = FeatureMap(8, 'favor+', num_features=11, seed=0).double()
    x, _, group = _inputs(torch.float64)
    torch.testing.assert_close(
        fm(x, False, group, 3),
        favor_plus_autograd(x, fm.projection, False, group, 3))
    assert fm(x, True).shape == (40, 3, 11)


@pytest.mark.parametrize('native_mode', ['auto', 'off'])
@pytest.mark.parametrize('dtype', DTYPES)
def test_favor_plus_query_stabiliser_is_the_largest_logit(
        native_mode, dtype):
    # every logit below -|x|^2/2 (the value a padded feature would have):
    # the largest feature of a query row is still exactly exp(0) / sqrt(r)
    x, w, _ = _inputs(dtype, rows=6, dim=5, features=11)
    with native.use_native(native_mode):
        out = favor_plus(-x.detach().abs(), w.abs(), True)
    torch.testing.assert_close(out.amax(-1),
                               torch.full(out.shape[:-1], 11**-0.5,
                                          dtype=dtype))


def _passes(fm, fns, x):
    # per pass: whether the projection changed, and the count after it
    seen = []
    for fn in fns:
        before = fm.projection.clone()
        fn(x)
        seen.append((not torch.equal(before, fm.projection),
                     int(fm.calls_since_redraw)))
    return seen


def _training_pass(fm):
    def forward(x):
        fm.step()
        return fm(x, True)
    return forward


def test_compiled_passes_redraw_at_the_eager_interval_in_one_graph():
    x = torch.randn(5, 2, 4, dtype=torch.float64)
    eager = FeatureMap(4, redraw_interval=2, seed=0).double().train()
    expected = _passes(eager, [_training_pass(eager)] * 6, x)
    assert expected == [(False, 1), (False, 2), (True, 1), (False, 2),
                        (True, 1), (False, 2)]

    fm = FeatureMap(4, redraw_interval=2, seed=0).double().train()
    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    torch._dynamo.reset()
    compiled = torch.compile(_training_pass(fm), backend=backend,
                             fullgraph=True)
    # an eager pass among the compiled ones continues their count
    fns = [compiled] * 3 + [_training_pass(fm)] + [compiled] * 2
    assert _passes(fm, fns, x) == expected
    assert len(graphs) == 1
    torch._dynamo.reset()


def test_redraw_count_resumes_from_a_state_dict():
    fm = FeatureMap(4, redraw_interval=2, seed=0).train()
    fm.step()  # one pass counted
    resumed = FeatureMap(4, redraw_interval=2, seed=1).train()
    resumed.step()
    resumed.step()  # a redraw due at the next pass
    resumed.load_state_dict(fm.state_dict())
    x = torch.randn(3, 1, 4)
    assert _passes(resumed, [_training_pass(resumed)] * 2, x) == [
        (False, 2), (True, 1)]


def test_a_feature_map_built_under_inference_mode_maps_and_counts():
    # buffers made under inference_mode have no version counter
    with torch.inference_mode():
        fm = FeatureMap(4, redraw_interval=2, seed=0)
        x = torch.randn(3, 1, 4)
        expected = fm(x, False)
        fm.train()
        for _ in range(3):
            fm.step()
        assert int(fm.calls_since_redraw) == 1  # redrawn at the third pass
        fm.eval()
        assert not torch.equal(fm(x, False), expected)
