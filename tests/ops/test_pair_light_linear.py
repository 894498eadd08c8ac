import pytest
import torch
from torch_geometric.data import Batch

from torch_geometric_hot.data import PairView
from torch_geometric_hot.ops import native
from torch_geometric_hot.ops.pair_light_linear import (
    _gather, _scatter, pair_light_linear)
from torch_geometric_hot.testing import (attach_order_inputs,
                                         complete_graph, edge_case_graphs,
                                         pair_light_linear_reference,
                                         random_graph)


def batched_edge_cases(all_transposes=False):
    # directed random graph (entries without a transpose), an isolated
    # node, 1-node and edgeless graphs, a self-loop and a duplicate edge;
    # or undirected graphs only (every entry has its transpose)
    graphs = [random_graph(6, 9, seed=2), complete_graph(3),
              *edge_case_graphs(3)[1:4]] if all_transposes else \
        [random_graph(6, 9, undirected=False, seed=2), *edge_case_graphs(3)]
    data = Batch.from_data_list(
        [attach_order_inputs(g, 2, seed=k) for k, g in enumerate(graphs)])
    view = PairView.from_data(data)
    assert view.all_transposes == all_transposes
    return data, view


def parameters(c_in, c_out, dtype, bias=True):
    gen = torch.Generator().manual_seed(0)
    weight = torch.randn(5, c_in, c_out, generator=gen, dtype=dtype)
    b = torch.randn(2, c_out, generator=gen, dtype=dtype) if bias else None
    return weight, b


# 'auto': the native entry passes where they build; 'off': torch's
@pytest.mark.parametrize('native_mode', ['auto', 'off'])
@pytest.mark.parametrize('dtype', [torch.float32, torch.float64])
@pytest.mark.parametrize('bias', [True, False])
@pytest.mark.parametrize('all_transposes', [False, True])
def test_matches_class_by_class_reference(native_mode, dtype, bias,
                                          all_transposes):
    data, view = batched_edge_cases(all_transposes)
    with native.use_native(native_mode):
        _assert_matches_reference(data, view, dtype, bias)


def _assert_matches_reference(data, view, dtype, bias):
    x = data.pair_x.to(dtype).requires_grad_()
    weight, b = parameters(3, 5, dtype, bias)
    inputs = [x, weight.requires_grad_()] + (
        [b.requires_grad_()] if bias else [])
    out = pair_light_linear(x, view, weight, b)
    expected = pair_light_linear_reference(x, view, weight, b)
    tol = dict(atol=1e-5, rtol=1e-4) if dtype == torch.float32 else \
        dict(atol=1e-12, rtol=1e-10)
    torch.testing.assert_close(out, expected, **tol)
    grad = torch.randn_like(out)
    got = torch.autograd.grad(out, inputs, grad)
    want = torch.autograd.grad(expected, inputs, grad)
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, **tol)


@pytest.mark.parametrize('native_mode', ['auto', 'off'])
def test_gradcheck(native_mode):
    data, view = batched_edge_cases()
    x = data.pair_x[:, :2].clone().requires_grad_()
    weight, b = parameters(2, 3, torch.float64)
    with native.use_native(native_mode):
        assert torch.autograd.gradcheck(
            lambda x, w, b: pair_light_linear(x, view, w, b),
            (x, weight.requires_grad_(), b.requires_grad_()))


@pytest.mark.parametrize('native_mode', ['auto', 'off'])
@pytest.mark.parametrize('all_transposes', [False, True])
def test_entry_scatter_is_the_adjoint_of_entry_gather(native_mode,
                                                      all_transposes):
    # <gather(y, nodes), g> = <y, G> + <nodes, S> for (G, S) = scatter(g)
    _, view = batched_edge_cases(all_transposes)
    gen = torch.Generator().manual_seed(1)
    C = 5
    y = torch.randn(view.num_entries, 2 * C, generator=gen,
                    dtype=torch.float64)
    nodes = torch.randn(view.num_nodes, 3 * C, generator=gen,
                        dtype=torch.float64)
    g = torch.randn(view.num_entries, C, generator=gen, dtype=torch.float64)
    indices = view.row, view.col, view.transpose, view.diag_pos
    with native.use_native(native_mode):
        out = _gather(y, nodes, *indices)
        grad_y, grad_nodes = _scatter(g, *indices, view.num_nodes)
    assert grad_y.shape == y.shape and grad_nodes.shape == nodes.shape
    torch.testing.assert_close((out * g).sum(), (y * grad_y).sum() +
                               (nodes * grad_nodes).sum())
    # the diagonal entries read only their node's first block
    torch.testing.assert_close(out[view.diag_pos], nodes[:, :C])
    assert (grad_y[view.diag_pos] == 0).all()


def test_entry_gather_and_scatter_across_threads(monkeypatch):
    # enough entries for the native gather and scatter to split them
    # between threads (the scatter's parts past the first add to node sums
    # of their own)
    view = PairView.build(random_graph(600, 6000, seed=3).edge_index, 600)
    assert view.num_entries > 2 * native.MIN_ROWS_PER_THREAD
    gen = torch.Generator().manual_seed(2)
    y = torch.randn(view.num_entries, 8, generator=gen)
    nodes = torch.randn(view.num_nodes, 12, generator=gen)
    g = torch.randn(view.num_entries, 4, generator=gen)
    indices = view.row, view.col, view.transpose, view.diag_pos

    def passes():
        return [_gather(y, nodes, *indices),
                *_scatter(g, *indices, view.num_nodes)]

    with native.use_native('off'):
        expected = passes()
    splits = []
    in_threads = native._in_threads
    monkeypatch.setattr(native, '_in_threads', lambda run, bounds, *rest: (
        splits.append(len(bounds) - 1), in_threads(run, bounds, *rest))[1])
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        with native.use_native('on') as on:
            got = passes()
    finally:
        torch.set_num_threads(threads)
    assert splits == ([2, 2] if on else [])
    for a, b in zip(got, expected):
        torch.testing.assert_close(a, b)


def test_empty_input():
    view = PairView.build(torch.empty(2, 0, dtype=torch.long), 0)
    x = torch.empty(0, 3, requires_grad=True)
    weight, b = parameters(3, 4, torch.float32)
    out = pair_light_linear(x, view, weight, b)
    assert out.shape == (0, 4)
    out.sum().backward()
    assert x.grad.shape == (0, 3)


def test_bad_input_is_named():
    data, view = batched_edge_cases()
    weight, b = parameters(3, 4, torch.float64)
    with pytest.raises(ValueError, match="'weight'.*5, 3"):
        pair_light_linear(data.pair_x, view, weight[:4], b)
    with pytest.raises(ValueError, match="'bias'.*2, 4"):
        pair_light_linear(data.pair_x, view, weight, b[:1])
    with pytest.raises(ValueError, match="'x'.*pair entry"):
        pair_light_linear(data.pair_x[1:], view, weight, b)
