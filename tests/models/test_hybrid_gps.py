import pytest
import torch
from torch_geometric.data import Batch

from torch_geometric_hot.data import PairView
from torch_geometric_hot.models import HybridGPS
from torch_geometric_hot.nn import HOTNodeConv, TokenNodeAttention
from torch_geometric_hot.testing import (assert_batch_independent,
                                         assert_permutation_equivariant,
                                         edge_case_graphs, random_graph)
from torch_geometric_hot.transforms import AddSecondOrderView

BLOCKS = ['hot', 'tokengt']


def model(block, task='graph', **kwargs):
    torch.manual_seed(0)
    attn = {'node_id_dim': 3} if block == 'tokengt' else {}
    return HybridGPS(8, 2, num_layers=2, global_block=block, heads=2,
                     task=task, node_encoder=torch.nn.Linear(4, 8),
                     edge_encoder=torch.nn.Linear(3, 8), attn_kwargs=attn,
                     seed=0, **kwargs).double()


def graphs(device):
    out = []
    gen = torch.Generator().manual_seed(1)
    for g in edge_case_graphs(num_features=4, edge_dim=3, device=device):
        g = AddSecondOrderView()(g)
        g.node_id = torch.randn(g.num_nodes, 3, generator=gen,
                                dtype=torch.float64).to(device)
        out.append(g)
    return out


def call(m):
    def run(d):
        extra = {'view': PairView.from_data(d)} if m.global_block == 'hot' \
            else {'node_id': d.node_id}
        return m(d.x, d.edge_index, d.edge_attr, d.batch, **extra)
    return run


def trained_statistics(m, device):
    m.to(device).train()
    call(m)(Batch.from_data_list(graphs(device)))
    return m.eval()


@pytest.mark.parametrize('block', BLOCKS)
@pytest.mark.parametrize('task', ['graph', 'node'])
def test_equivariant_and_batch_independent(block, task, device):
    m = trained_statistics(model(block, task), device)
    data = graphs(device)
    level = 'node' if task == 'node' else 'graph'
    assert_permutation_equivariant(call(m), data[0], level)
    assert_batch_independent(call(m), data, level)
    out = call(m)(Batch.from_data_list(data))
    assert out.shape == ((len(data), 2) if task == 'graph' else
                         (sum(g.num_nodes for g in data), 2))
    assert torch.isfinite(out).all()


@pytest.mark.parametrize('block', BLOCKS)
def test_view_and_identifiers_built_when_not_passed(block, device):
    m = trained_statistics(model(block), device)
    batch = Batch.from_data_list(graphs(device))
    if block == 'hot':  # the pair view built here is the one passed
        torch.testing.assert_close(
            m(batch.x, batch.edge_index, batch.edge_attr, batch.batch),
            call(m)(batch))
    else:
        out = m(batch.x, batch.edge_index, batch.edge_attr, batch.batch)
        assert out.shape == (batch.num_graphs, 2)
        assert torch.isfinite(out).all()
    one = random_graph(5, 6, 4, 3, device=device)  # no batch vector
    assert m(one.x, one.edge_index, one.edge_attr).shape == (1, 2)


@pytest.mark.parametrize('block', BLOCKS)
def test_layers_are_gps_layers_with_the_chosen_global_block(block):
    m = model(block)
    expected = HOTNodeConv if block == 'hot' else TokenNodeAttention
    assert all(isinstance(layer.attn, expected) for layer in m.layers)
    assert all(type(layer.conv).__name__ == 'GINEConv' for layer in m.layers)
    bare = HybridGPS(8, 1, num_layers=1, global_block=block, in_channels=4)
    assert type(bare.layers[0].conv).__name__ == 'GINConv'
    data = random_graph(5, 6, 4)
    assert bare(data.x.float(), data.edge_index).shape == (1, 1)


@pytest.mark.parametrize('block', BLOCKS)
def test_fits_a_batch(block, device):
    torch.manual_seed(0)
    data = [random_graph(n, 2 * n, 4, 3, seed=n, device=device)
            for n in range(3, 11)]
    batch = Batch.from_data_list(data)
    y = torch.randn(len(data), 2, dtype=torch.float64, device=device)
    m = model(block).to(device)
    opt = torch.optim.Adam(m.parameters(), lr=1e-2)
    losses = []
    for _ in range(60):
        opt.zero_grad()
        loss = (m(batch.x, batch.edge_index, batch.edge_attr, batch.batch)
                - y).square().mean()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < 0.1 * losses[0]


def test_clear_errors():
    data = random_graph(5, 6, 4, 3)
    with pytest.raises(ValueError, match="'global_block'"):
        HybridGPS(8, 1, global_block='gat')
    with pytest.raises(ValueError, match="'task'"):
        HybridGPS(8, 1, task='edge')
    with pytest.raises(ValueError, match="'num_layers'"):
        HybridGPS(8, 1, num_layers=0)
    m = model('hot')
    with pytest.raises(ValueError, match="'edge_attr' is needed"):
        m(data.x, data.edge_index)
    bare = HybridGPS(8, 1, in_channels=4).double()
    with pytest.raises(ValueError, match="'edge_attr' was given"):
        bare(data.x, data.edge_index, data.edge_attr)
    with pytest.raises(ValueError, match="'x' must be floating point"):
        HybridGPS(8, 1).double()(data.x, data.edge_index)


def test_repr():
    assert repr(HybridGPS(8, 1, num_layers=2, heads=2, edge_dim=3)) == (
        "HybridGPS(8, num_layers=2, global_block='hot', task='graph', "
        "attn=HOTNodeConv(8, 8, heads=2, attention='softmax', edge_dim=3))")
