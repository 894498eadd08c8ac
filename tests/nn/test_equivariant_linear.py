import pytest
import torch

from torch_geometric_hot.data import PairView
from torch_geometric_hot.nn import EquivariantLinear
from torch_geometric_hot.ops.layout_device import planned_for
from torch_geometric_hot.ops.basis import basis
from torch_geometric_hot.testing import (
    assert_batch_independent, assert_gradcheck, assert_permutation_equivariant,
    attach_order_inputs, complete_graph, dense_basis,
    dense_equivariant_linear, edge_case_graphs, pair_to_dense, random_graph,
    rows_per_graph, run_layer)

ORDERS = [(2, 2), (2, 1), (2, 0), (1, 1), (1, 0), (1, 2), (1, 3), (1, 4)]


@pytest.fixture(params=[None, 'cuda'], ids=['own_layout', 'cuda_layout'])
def layout(request):
    # the layout of the tensors' device, or a GPU's on any device ('mean'
    # parts there: one product of the gathered terms, ops.mean_linear)
    with planned_for(request.param):
        yield request.param


BIAS_LABELS = {0: [''], 1: ['o1'], 2: ['o1o2', 'o1|o2']}


def to_dense(out, data, out_order, n):
    if out_order == 2:
        return pair_to_dense(out, data.pair_index, n)
    return out[0] if out_order == 0 else out


def dense_input(data, in_order):
    n = data.num_nodes
    return pair_to_dense(data.pair_x, data.pair_index, n) if in_order == 2 \
        else data.x


@pytest.mark.parametrize('orders', ORDERS)
@pytest.mark.parametrize('normalize', ['sum', 'mean'])
def test_equals_dense_basis_on_complete_graph(orders, normalize, device,
                                              layout):
    in_order, out_order = orders
    n = 4 if in_order + out_order <= 4 else 5
    data = attach_order_inputs(complete_graph(n, device=device), out_order,
                               max_hyperedges=10**6)
    torch.manual_seed(1)
    layer = EquivariantLinear(3, 2, in_order, out_order,
                              normalize=normalize).double().to(device)
    out = run_layer(layer, data)
    weights = {c.partition: w for c, w in zip(layer.classes, layer.weight)}
    biases = dict(zip(BIAS_LABELS[out_order], layer.bias)) \
        if out_order <= 2 else None
    expected = dense_equivariant_linear(dense_input(data, in_order), weights,
                                        in_order, out_order, normalize,
                                        biases)
    if out_order >= 3:
        expected = expected[tuple(data.hyperedge_index)] + layer.bias[0]
    torch.testing.assert_close(to_dense(out, data, out_order, n), expected,
                               atol=1e-10, rtol=1e-10)


@pytest.mark.parametrize('orders', ORDERS)
def test_dense_oracle_covers_the_whole_basis(orders):
    in_order, out_order = orders
    labels = {c.partition for c in basis(in_order, out_order)}
    dense = dense_basis(max(in_order + out_order, 1), in_order, out_order)
    if out_order >= 3:  # only classes with distinct output positions
        dense = {label: b for label, b in dense.items()
                 if all(block.count('o') <= 1 for block in label.split('|'))}
    assert labels == set(dense)


@pytest.mark.parametrize('orders', ORDERS)
@pytest.mark.parametrize('normalize', ['sum', 'mean'])
def test_permutation_equivariant_on_sparse_graphs(orders, normalize, device,
                                                  layout):
    in_order, out_order = orders
    data = attach_order_inputs(random_graph(7, 9, device=device), out_order,
                               seed=3)
    layer = EquivariantLinear(3, 2, in_order, out_order,
                              normalize=normalize).double().to(device)
    level = 'node' if out_order == 1 else 'other'
    assert_permutation_equivariant(lambda d: run_layer(layer, d), data,
                                   level)


@pytest.mark.parametrize('orders', ORDERS)
@pytest.mark.parametrize('normalize', ['sum', 'mean'])
def test_batch_independent(orders, normalize, device, layout):
    in_order, out_order = orders
    graphs = [
        attach_order_inputs(g, out_order, seed=k)
        for k, g in enumerate(edge_case_graphs(3, device=device))
        if g.num_nodes >= out_order
    ]
    layer = EquivariantLinear(3, 2, in_order, out_order,
                              normalize=normalize).double().to(device)
    assert_batch_independent(lambda d: run_layer(layer, d), graphs,
                             rows_per_graph(out_order))


def test_classes_selection_and_repr():
    light = EquivariantLinear(4, 4, 2, 2, classes='light')
    assert [c.name for c in light.classes] == ['1', '2', '3', '4', '5']
    local = EquivariantLinear(4, 4, 2, 2, classes='local')
    assert all(c.kind != 'global' for c in local.classes)
    assert len(local.classes) == 11
    assert 'order=2->2' in repr(local) and 'classes=11' in repr(local)
    with pytest.raises(ValueError, match='classes'):
        EquivariantLinear(4, 4, 2, 2, classes=['99'])
    with pytest.raises(ValueError, match='normalize'):
        EquivariantLinear(4, 4, 2, 2, normalize='max')
    with pytest.raises(ValueError, match='in_order'):
        EquivariantLinear(4, 4, 3, 3)


def test_bad_input_is_named():
    data = attach_order_inputs(random_graph(5, 6), 2)
    view = PairView.from_data(data)
    layer = EquivariantLinear(3, 2, 2, 2).double()
    with pytest.raises(ValueError, match="'x'.*pair entry"):
        layer(data.pair_x[:-1], view)
    with pytest.raises(ValueError, match='3 channels'):
        layer(data.pair_x[:, :2], view)
    with pytest.raises(TypeError, match='PairView'):
        layer(data.pair_x, None)
    node_layer = EquivariantLinear(3, 2, 1, 3).double()
    with pytest.raises(ValueError, match='hyperedge_index.*distinct'):
        node_layer(data.x, None, torch.tensor([[0, 0, 1], [1, 2, 3]]).t())
    with pytest.raises(ValueError, match='hyperedge_index.*shape'):
        node_layer(data.x, None, torch.tensor([[0, 1], [1, 2]]))


@pytest.mark.parametrize('orders', ORDERS)
@pytest.mark.parametrize('normalize', ['sum', 'mean'])
def test_gradcheck(orders, normalize, device, layout):
    in_order, out_order = orders
    data = attach_order_inputs(random_graph(5, 4, device=device), out_order,
                               max_hyperedges=10)
    view = PairView.from_data(data)
    layer = EquivariantLinear(3, 2, in_order, out_order,
                              normalize=normalize).double().to(device)
    x = (data.pair_x if in_order == 2 else data.x).clone().requires_grad_()
    he = getattr(data, 'hyperedge_index', None)
    assert_gradcheck(lambda x: layer(x, view, he), (x, ))


def test_float32_matches_float64(device):
    data = attach_order_inputs(random_graph(8, 12, device=device), 2)
    view = PairView.from_data(data)
    layer = EquivariantLinear(3, 2, 2, 2, normalize='mean').double().to(device)
    expected = layer(data.pair_x, view)
    got = layer.float()(data.pair_x.float(), view)
    torch.testing.assert_close(got.double(), expected, atol=1e-5, rtol=1e-4)


def test_mean_layers_sharing_a_view_equal_fresh_views(device, layout):
    # the class counts are kept with the view, per output part and dtype
    data = attach_order_inputs(random_graph(8, 12, device=device), 2)
    shared = PairView.from_data(data)
    for dtype in (torch.float64, torch.float32):
        for out_order in (2, 1, 0, 2):
            layer = EquivariantLinear(3, 2, 2, out_order,
                                      normalize='mean').to(device, dtype)
            x = data.pair_x.to(dtype)
            out = layer(x, shared)
            assert out.dtype == dtype
            torch.testing.assert_close(out,
                                       layer(x, PairView.from_data(data)))


def test_light_pair_layer_equals_dense_basis(device):
    # the light 2->2 layer runs as one operation (ops.pair_light_linear),
    # whatever the order its classes are given in
    data = attach_order_inputs(complete_graph(4, device=device), 2)
    torch.manual_seed(1)
    for classes in ('light', ['3', '5', '1', '4', '2']):
        layer = EquivariantLinear(3, 2, 2, 2,
                                  classes=classes).double().to(device)
        weights = dict(zip([c.partition for c in layer.classes],
                           layer.weight))
        biases = dict(zip(BIAS_LABELS[2], layer.bias))
        expected = dense_equivariant_linear(dense_input(data, 2), weights,
                                            2, 2, 'sum', biases)
        out = to_dense(run_layer(layer, data), data, 2, 4)
        torch.testing.assert_close(out, expected, atol=1e-10, rtol=1e-10)


def test_light_pair_layer_equivariant_and_batch_independent(device):
    layer = EquivariantLinear(3, 2, 2, 2, classes='light').double().to(device)
    data = attach_order_inputs(
        random_graph(7, 9, undirected=False, device=device), 2)
    assert_permutation_equivariant(lambda d: run_layer(layer, d), data,
                                   'other')
    graphs = [
        attach_order_inputs(g, 2, seed=k)
        for k, g in enumerate(edge_case_graphs(3, device=device))
    ]
    assert_batch_independent(lambda d: run_layer(layer, d), graphs,
                             rows_per_graph(2))


@pytest.mark.parametrize('native_mode', ['off', 'auto'])
def test_stacked_outputs_equal_each_layer(native_mode, device):
    # light 2->2 layers (with and without bias) as one, and a layer that
    # is not light (run as itself)
    from torch_geometric_hot.nn.equivariant_linear import stacked_outputs
    from torch_geometric_hot.ops.native import use_native
    data = attach_order_inputs(random_graph(7, 12, seed=3, device=device),
                               2)
    view = PairView.from_data(data)
    torch.manual_seed(0)
    layers = [EquivariantLinear(3, 4, 2, 2, 'light'),
              EquivariantLinear(3, 2, 2, 2, 'light', bias=False),
              EquivariantLinear(3, 5, 2, 2, 'light')]
    assert all(layer._light_pair is not None for layer in layers)
    mixed = layers[:1] + [EquivariantLinear(3, 2, 2, 2)]
    for stack in (layers, mixed):
        stack = [layer.double().to(device) for layer in stack]
        x = data.pair_x.clone().requires_grad_()
        params = [p for layer in stack for p in layer.parameters()]
        with use_native(native_mode):
            outs = stacked_outputs(stack, x, view)
            expected = [layer(x, view) for layer in stack]
        assert [o.shape for o in outs] == [e.shape for e in expected]
        seeds = [torch.randn_like(e) for e in expected]
        grads = torch.autograd.grad(
            sum((o * s).sum() for o, s in zip(outs, seeds)), [x] + params)
        expected_grads = torch.autograd.grad(
            sum((e * s).sum() for e, s in zip(expected, seeds)),
            [x] + params)
        for a, b in zip(outs + list(grads), expected + list(expected_grads)):
            torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize('native_mode', ['auto', 'off'])
def test_stacked_outputs_with_a_given_bias(native_mode, device):
    # a bias given to a layer without its own: the same as the layer with
    # that bias, gradients included (the given bias's too)
    from torch_geometric_hot.nn.equivariant_linear import stacked_outputs
    from torch_geometric_hot.ops.native import use_native
    data = attach_order_inputs(random_graph(7, 12, seed=3, device=device),
                               2)
    view = PairView.from_data(data)
    torch.manual_seed(0)
    plain = EquivariantLinear(3, 5, 2, 2, 'light', bias=False)
    layers = [EquivariantLinear(3, 4, 2, 2, 'light'), plain]
    layers = [layer.double().to(device) for layer in layers]
    biased = EquivariantLinear(3, 5, 2, 2, 'light').double().to(device)
    with torch.no_grad():
        biased.weight.copy_(plain.weight)
    bias = biased.bias.detach().clone().requires_grad_()
    x = data.pair_x.clone().requires_grad_()
    with use_native(native_mode):
        out = stacked_outputs(layers, x, view, biases=[None, bias])[1]
        expected = biased(x, view)
    torch.testing.assert_close(out, expected, rtol=1e-12, atol=1e-12)
    seed = torch.randn_like(out)
    for a, b in zip(torch.autograd.grad((out * seed).sum(), [x, bias]),
                    torch.autograd.grad((expected * seed).sum(),
                                        [x, biased.bias])):
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12)


def test_stacked_outputs_reject_misplaced_biases():
    from torch_geometric_hot.nn.equivariant_linear import stacked_outputs
    data = attach_order_inputs(random_graph(5, 6, seed=1), 2)
    view = PairView.from_data(data)
    light = [EquivariantLinear(3, 4, 2, 2, 'light').double(),
             EquivariantLinear(3, 4, 2, 2, 'light', bias=False).double()]
    bias = torch.zeros(2, 4, dtype=torch.float64)
    with pytest.raises(ValueError, match="'biases'"):  # its own bias
        stacked_outputs(light, data.pair_x, view, biases=[bias, None])
    with pytest.raises(ValueError, match="'biases'"):  # one per layer
        stacked_outputs(light, data.pair_x, view, biases=[None])
    mixed = light[:1] + [EquivariantLinear(3, 4, 2, 2, bias=False).double()]
    with pytest.raises(ValueError, match="'biases'"):  # not run as one
        stacked_outputs(mixed, data.pair_x, view, biases=[None, bias])
