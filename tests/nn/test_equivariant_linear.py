import itertools

import pytest
import torch
from torch_geometric.data import Batch

from torch_geometric_hot.data import PairView
from torch_geometric_hot.nn import EquivariantLinear
from torch_geometric_hot.ops.basis import basis, output_parts
from torch_geometric_hot.transforms import AddSecondOrderView
from torch_geometric_hot.testing import (assert_batch_independent,
                                         assert_permutation_equivariant,
                                         complete_graph,
                                         dense_equivariant_linear,
                                         edge_case_graphs, pair_to_dense,
                                         random_graph)

ORDERS = [(2, 2), (2, 1), (2, 0), (1, 1), (1, 0), (1, 2), (1, 3), (1, 4)]
BIAS_LABELS = {0: [''], 1: ['o1'], 2: ['o1o2', 'o1|o2']}


def all_tuples(n, k):
    tuples = [t for t in itertools.permutations(range(n), k)]
    return torch.tensor(tuples, dtype=torch.long).t().reshape(k, -1)


def run(layer, data, view=None):
    view = view if view is not None else PairView.from_data(data)
    x = data.pair_x if layer.in_order == 2 else data.x
    hyper = getattr(data, 'hyperedge_index', None)
    return layer(x, view, hyperedge_index=hyper)


def attach_inputs(data, in_order, out_order, channels=3, seed=0):
    gen = torch.Generator().manual_seed(seed)
    data = AddSecondOrderView()(data)
    view = PairView.from_data(data)
    data.pair_x = torch.randn(view.num_entries, channels, generator=gen,
                              dtype=torch.float64)
    data.x = torch.randn(data.num_nodes, channels, generator=gen,
                         dtype=torch.float64)
    if out_order >= 3:
        data.hyperedge_index = all_tuples(data.num_nodes, out_order)
    return data


@pytest.mark.parametrize('orders', ORDERS)
@pytest.mark.parametrize('normalize', ['sum', 'mean'])
def test_equals_dense_basis_on_complete_graph(orders, normalize):
    in_order, out_order = orders
    n = 4 if in_order + out_order <= 4 else 5
    data = attach_inputs(complete_graph(n), in_order, out_order)
    torch.manual_seed(1)
    layer = EquivariantLinear(3, 2, in_order, out_order,
                              normalize=normalize).double()
    view = PairView.from_data(data)
    out = run(layer, data, view)

    weights = {c.partition: w for c, w in zip(layer.classes, layer.weight)}
    parts = output_parts(out_order)
    labels = BIAS_LABELS.get(out_order, [None])
    biases = {l: b for l, b in zip(labels, layer.bias)} if out_order <= 2 \
        else None
    x_dense = pair_to_dense(data.pair_x, torch.stack([view.row, view.col]),
                            n) if in_order == 2 else data.x
    expected = dense_equivariant_linear(x_dense, weights, in_order, out_order,
                                        normalize, biases)
    if out_order == 2:
        got = pair_to_dense(out, torch.stack([view.row, view.col]), n)
    elif out_order == 0:
        got = out[0]
    elif out_order == 1:
        got = out
    else:
        he = data.hyperedge_index
        expected = expected[tuple(he)] + layer.bias[0]
        got = out
    assert len(parts) == (2 if out_order == 2 else 1)
    torch.testing.assert_close(got, expected, atol=1e-10, rtol=1e-10)


@pytest.mark.parametrize('orders', ORDERS)
def test_dense_oracle_covers_the_whole_basis(orders):
    in_order, out_order = orders
    from torch_geometric_hot.testing import dense_basis
    labels = {c.partition for c in basis(in_order, out_order)}
    dense = dense_basis(max(in_order + out_order, 1), in_order, out_order)
    if out_order >= 3:  # only classes with distinct output positions
        outs = [f'o{a + 1}' for a in range(out_order)]
        dense = {l: b for l, b in dense.items()
                 if all(sum(o in block for o in outs) == 1
                        for block in l.split('|') if 'o' in block)}
    assert labels == set(dense)


def graphs_for(in_order, out_order, dtype=torch.float64):
    graphs = edge_case_graphs(num_features=3, dtype=dtype)
    return [attach_inputs(g, in_order, min(out_order, 2) if g.num_nodes <
                          out_order else out_order, seed=k)
            for k, g in enumerate(graphs)]


@pytest.mark.parametrize('orders', ORDERS)
@pytest.mark.parametrize('normalize', ['sum', 'mean'])
def test_permutation_equivariant_on_sparse_graphs(orders, normalize):
    in_order, out_order = orders
    data = attach_inputs(random_graph(7, 9, num_features=3), in_order,
                         out_order, seed=3)
    layer = EquivariantLinear(3, 2, in_order, out_order,
                              normalize=normalize).double()
    level = {2: 'entry', 1: 'node', 0: 'graph'}.get(out_order, 'hyperedge')
    assert_permutation_equivariant(lambda d: run(layer, d), data, level)


@pytest.mark.parametrize('orders', ORDERS)
@pytest.mark.parametrize('normalize', ['sum', 'mean'])
def test_batch_independent(orders, normalize):
    in_order, out_order = orders
    graphs = [g for g in graphs_for(in_order, out_order)
              if out_order < 3 or g.num_nodes >= out_order]
    if out_order >= 3:
        for g in graphs:
            g.hyperedge_index = all_tuples(g.num_nodes, out_order)[:, :30]
    layer = EquivariantLinear(3, 2, in_order, out_order,
                              normalize=normalize).double()
    levels = {
        2: lambda d: PairView.from_data(d).num_entries,
        1: 'node',
        0: 'graph'
    }.get(out_order, 'hyperedge_index')
    assert_batch_independent(lambda d: run(layer, d), graphs, levels)


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
    data = attach_inputs(random_graph(5, 6, num_features=3), 2, 2)
    view = PairView.from_data(data)
    layer = EquivariantLinear(3, 2, 2, 2)
    with pytest.raises(ValueError, match="'x'.*pair entry"):
        layer(data.pair_x[:-1].float(), view)
    with pytest.raises(ValueError, match='3 channels'):
        layer(data.pair_x[:, :2].float(), view)
    with pytest.raises(TypeError, match='PairView'):
        layer(data.pair_x.float(), None)
    node_layer = EquivariantLinear(3, 2, 1, 3)
    with pytest.raises(ValueError, match='hyperedge_index'):
        node_layer(data.x.float(), None, torch.tensor([[0, 1], [0, 2],
                                                        [1, 3]]).t())


def test_gradcheck():
    data = attach_inputs(random_graph(4, 4, num_features=3), 2, 2)
    view = PairView.from_data(data)
    for normalize in ('sum', 'mean'):
        layer = EquivariantLinear(3, 2, 2, 2, normalize=normalize).double()
        x = data.pair_x.clone().requires_grad_()
        assert torch.autograd.gradcheck(lambda x: layer(x, view), (x, ))


def test_float32_matches_float64():
    data = attach_inputs(random_graph(8, 12, num_features=3), 2, 2)
    view = PairView.from_data(data)
    layer = EquivariantLinear(3, 2, 2, 2, normalize='mean').double()
    expected = layer(data.pair_x, view)
    got = layer.float()(data.pair_x.float(), view)
    torch.testing.assert_close(got.double(), expected, atol=1e-5, rtol=1e-4)
