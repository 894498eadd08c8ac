import pytest
import torch

from torch_geometric_hot.data import PairView
from torch_geometric_hot.nn import HOTLayer
from torch_geometric_hot.testing import (assert_batch_independent,
                                         assert_gradcheck,
                                         assert_permutation_equivariant,
                                         attach_order_inputs,
                                         edge_case_graphs, random_graph,
                                         rows_per_graph)


def run(layer, data):
    x = data.pair_x if layer.in_order == 2 else data.x
    return layer(x, PairView.from_data(data),
                 getattr(data, 'hyperedge_index', None))


@pytest.mark.parametrize('orders', [(2, 2), (2, 1), (2, 0), (1, 1), (1, 2),
                                    (1, 3)])
@pytest.mark.parametrize('attention', ['softmax', 'kernel'])
def test_block_is_equivariant_and_batch_independent(orders, attention, device):
    torch.manual_seed(0)
    layer = HOTLayer(3, *orders, heads=1, attention=attention,
                     seed=0).double().to(device).eval()
    assert layer.residual == (orders[0] == orders[1])
    data = attach_order_inputs(random_graph(6, 8, device=device), orders[1])
    assert_permutation_equivariant(lambda d: run(layer, d), data,
                                   'node' if orders[1] == 1 else 'other')
    graphs = [
        attach_order_inputs(g, orders[1], seed=k)
        for k, g in enumerate(edge_case_graphs(3, device=device))
        if g.num_nodes >= orders[1]
    ]
    assert_batch_independent(lambda d: run(layer, d), graphs,
                             rows_per_graph(orders[1]))


def test_residual_flag_and_gradcheck(device):
    torch.manual_seed(0)
    data = attach_order_inputs(random_graph(4, 4, device=device), 2)
    view = PairView.from_data(data)
    layer = HOTLayer(3, 2, 2, attention='kernel',
                     kernel='elu').double().to(device)
    x = data.pair_x.clone().requires_grad_()
    assert_gradcheck(lambda x: layer(x, view), (x, ))
    plain = HOTLayer(3, 2, 2, residual=False).double().to(device)
    assert not plain.residual and 'residual=False' in repr(plain)
