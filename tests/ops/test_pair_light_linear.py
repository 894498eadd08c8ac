import pytest
import torch
from torch_geometric.data import Batch

from torch_geometric_hot.data import PairView
from torch_geometric_hot.ops.pair_light_linear import (
    pair_light_linear, pair_light_linear_reference)
from torch_geometric_hot.testing import (attach_order_inputs,
                                         complete_graph, edge_case_graphs,
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


@pytest.mark.parametrize('dtype', [torch.float32, torch.float64])
@pytest.mark.parametrize('bias', [True, False])
@pytest.mark.parametrize('all_transposes', [False, True])
def test_matches_class_by_class_reference(dtype, bias, all_transposes):
    data, view = batched_edge_cases(all_transposes)
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


def test_gradcheck():
    data, view = batched_edge_cases()
    x = data.pair_x[:, :2].clone().requires_grad_()
    weight, b = parameters(2, 3, torch.float64)
    assert torch.autograd.gradcheck(
        lambda x, w, b: pair_light_linear(x, view, w, b),
        (x, weight.requires_grad_(), b.requires_grad_()))


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
