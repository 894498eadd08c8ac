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


@pytest.mark.parametrize('orders', [(2, 2), (2, 1), (2, 0), (1, 1),
                                    (1, 3)])
@pytest.mark.parametrize('norm', ['layer', 'batch'])
def test_block_equals_its_equations(orders, norm, device):
    # Eq. 8-9 with pre-normalisation, written out (evaluation mode):
    # H = [A +] Attn(N(A)), Enc(A) = H + L2(GELU(L1(N(H))))
    torch.manual_seed(0)
    layer = HOTLayer(3, *orders, heads=1, norm=norm).double().to(device)
    for module in (layer.norm_attn, layer.norm_ffn):
        with torch.no_grad():
            module.weight.normal_(), module.bias.normal_()
            if norm == 'batch':
                module.running_mean.normal_(), module.running_var.uniform_(
                    0.5, 2.0)
    layer.eval()
    data = attach_order_inputs(random_graph(6, 8, device=device), orders[1])
    view = PairView.from_data(data)
    x = data.pair_x if orders[0] == 2 else data.x

    def normalise(module, h):
        if norm == 'layer':
            mean = h.mean(-1, keepdim=True)
            var = h.var(-1, unbiased=False, keepdim=True)
        else:
            mean, var = module.running_mean, module.running_var
        return (h - mean) / (var + module.eps).sqrt() * module.weight + \
            module.bias

    def light(module, h):
        return module(h, view) if orders[1] == 2 else module(h)

    h = layer.attn(normalise(layer.norm_attn, x), view,
                   getattr(data, 'hyperedge_index', None))
    if orders[0] == orders[1]:
        h = x + h
    f = torch.nn.functional.gelu(light(layer.ffn_in,
                                       normalise(layer.norm_ffn, h)))
    torch.testing.assert_close(run(layer, data), h + light(layer.ffn_out, f))


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


@pytest.mark.parametrize('momentum', [0.1, None])
def test_row_batch_norm_equals_batch_norm(momentum):
    # outputs, gradients and running statistics of torch's BatchNorm1d;
    # the batch counter only where the cumulative average reads it
    torch.manual_seed(0)
    norm = RowBatchNorm(3, momentum=momentum).double()
    ref = torch.nn.BatchNorm1d(3, momentum=momentum).double()
    for step in range(3):
        x = (torch.randn(8, 3, dtype=torch.double) * 2 + 1
             ).requires_grad_()
        out, want = norm(x), ref(x)
        torch.testing.assert_close(out, want)
        seed = torch.randn_like(out)
        torch.testing.assert_close(
            torch.autograd.grad((out * seed).sum(), [x, norm.weight]),
            torch.autograd.grad((want * seed).sum(), [x, ref.weight]))
    torch.testing.assert_close(norm.running_mean, ref.running_mean)
    torch.testing.assert_close(norm.running_var, ref.running_var)
    assert int(norm.num_batches_tracked) == (3 if momentum is None else 0)
    norm.eval(), ref.eval()
    x = torch.randn(5, 3, dtype=torch.double)
    torch.testing.assert_close(norm(x), ref(x))


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
