import pytest
import torch

from torch_geometric_hot.data import PairView
from torch_geometric_hot.models import InvariantMLP
from torch_geometric_hot.nn import CategoricalEncoder
from torch_geometric_hot.testing import (assert_batch_independent,
                                         assert_permutation_equivariant,
                                         edge_case_graphs)
from torch_geometric_hot.transforms import AddSecondOrderView


def model(device, dtype=torch.float64):
    torch.manual_seed(0)
    return InvariantMLP(8, 3, num_layers=2, node_encoder=torch.nn.Linear(4, 8),
                        edge_encoder=torch.nn.Linear(2, 8)).to(device, dtype)


def on_graph(net, view=True):
    return lambda d: net(d.x, d.edge_index, d.edge_attr, d.batch,
                         view=PairView.from_data(d) if view else None)


def test_invariant_and_batch_independent(device):
    graphs = [
        AddSecondOrderView()(g)
        for g in edge_case_graphs(edge_dim=2, device=device)
    ]
    net = model(device).eval()
    for view in (True, False):
        assert_permutation_equivariant(on_graph(net, view), graphs[0],
                                       'graph')
        assert_permutation_equivariant(on_graph(net, view), graphs[4],
                                       'graph')
        assert_batch_independent(on_graph(net, view), graphs, 'graph')
    out = on_graph(net)(graphs[1])
    assert out.shape == (1, 3) and torch.isfinite(out).all()


def test_categorical_features_and_training_step(device):
    torch.manual_seed(0)
    graphs = edge_case_graphs(edge_dim=2, dtype=torch.float32)
    for g in graphs:
        g.x = torch.randint(0, 5, (g.num_nodes, 2))
        g.edge_attr = torch.randint(0, 3, (g.num_edges, 1))
    from torch_geometric.data import Batch
    batch = Batch.from_data_list(graphs).to(device)
    net = InvariantMLP(16, 1, num_layers=2,
                       node_encoder=CategoricalEncoder([5, 5], 16),
                       edge_encoder=CategoricalEncoder([3], 16)).to(device)
    target = torch.randn(len(graphs), 1).to(device)
    opt = torch.optim.Adam(net.parameters(), lr=1e-2)
    losses = []
    for _ in range(30):
        opt.zero_grad()
        loss = (on_graph(net)(batch) - target).pow(2).mean()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < 0.5 * losses[0]
    assert 'InvariantMLP(16, num_layers=2)' == repr(net)


def test_clear_errors_on_features_the_model_cannot_read():
    graph = edge_case_graphs(edge_dim=2, dtype=torch.float32)[4]
    net = InvariantMLP(8, 1, num_layers=1)
    with pytest.raises(ValueError, match="'x'.*dtype torch.int64.*encoder"):
        net(graph.x.long(), graph.edge_index)
    with pytest.raises(ValueError, match=r"'x'.*\[\*, 8\]"):
        net(graph.x, graph.edge_index)
    with pytest.raises(ValueError, match="'edge_attr'.*dtype"):
        net(torch.zeros(graph.num_nodes, 8), graph.edge_index,
            graph.edge_attr.long())
