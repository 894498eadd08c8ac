import pytest
import torch

from torch_geometric_hot.data import PairView
from torch_geometric_hot.nn import HOTLayer
from torch_geometric_hot.nn.hot_layer import RowBatchNorm
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


@pytest.mark.parametrize('orders', [(2, 2), (2, 0), (1, 1)])
@pytest.mark.parametrize('attention', ['softmax', 'kernel'])
def test_batch_norm_block_is_equivariant(orders, attention, device):
    torch.manual_seed(0)
    layer = HOTLayer(3, *orders, heads=1, attention=attention, seed=0,
                     norm='batch').double().to(device)
    assert isinstance(layer.norm_attn, RowBatchNorm)
    assert "norm='batch'" in repr(layer)
    data = attach_order_inputs(random_graph(6, 8, device=device), orders[1])
    level = 'node' if orders[1] == 1 else 'other'
    # training: statistics of the batch, equivariant (rows of one graph)
    assert_permutation_equivariant(lambda d: run(layer, d), data, level)
    layer.eval()  # running statistics: also batch independent
    assert_permutation_equivariant(lambda d: run(layer, d), data, level)
    graphs = [attach_order_inputs(g, orders[1], seed=k)
              for k, g in enumerate(edge_case_graphs(3, device=device))
              if g.num_nodes >= orders[1]]
    assert_batch_independent(lambda d: run(layer, d), graphs,
                             rows_per_graph(orders[1]))


def test_row_batch_norm_of_one_row_uses_running_statistics():
    torch.manual_seed(0)
    norm = RowBatchNorm(3).double()
    norm(torch.randn(8, 3, dtype=torch.double) * 2 + 1)  # moves the stats
    row = torch.randn(1, 3, dtype=torch.double)
    out = norm(row)  # training, one row: no batch statistics
    expected = (row - norm.running_mean) / (norm.running_var +
                                            norm.eps).sqrt()
    torch.testing.assert_close(out, expected * norm.weight + norm.bias)
    with pytest.raises(ValueError, match="'norm'"):
        HOTLayer(3, 2, 2, norm='group')
