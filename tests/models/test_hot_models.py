import pytest
import torch
from torch_geometric.data import Batch

from torch_geometric_hot.data import PairView
from torch_geometric_hot.models import (HOTGraphModel, HOTHyperedgeModel,
                                        HOTNodeModel, HOTSetToGraph)
from torch_geometric_hot.nn import CategoricalEncoder
from torch_geometric_hot.testing import (assert_batch_independent,
                                         assert_permutation_equivariant,
                                         edge_case_graphs, rows_per_graph)
from torch_geometric_hot.transforms import (AddHyperedgeView,
                                            AddSecondOrderView)

MODELS = [
    (HOTGraphModel, {}, 'graph', 0),
    (HOTNodeModel, {}, 'node', 1),
    (HOTSetToGraph, {}, 'other', 2),
    (HOTHyperedgeModel, {'k': 3}, 'other', 3),
]


def on_graph(model):
    r"""The model called on a graph as a PyG user calls it."""
    if isinstance(model, HOTHyperedgeModel):
        return lambda d: model(d.x, d.hyperedge_index, d.batch)
    if isinstance(model, HOTSetToGraph):
        return lambda d: model(d.x, d.edge_index, d.batch,
                               view=PairView.from_data(d))
    return lambda d: model(d.x, d.edge_index, d.edge_attr, d.batch,
                           view=PairView.from_data(d))


def graphs(device):
    out = []
    for g in edge_case_graphs(num_features=4, edge_dim=4, device=device):
        g = AddSecondOrderView()(g)
        out.append(AddHyperedgeView(3)(g))
    return out


@pytest.mark.parametrize('cls,kwargs,level,order', MODELS)
@pytest.mark.parametrize('attention', ['softmax', 'kernel'])
def test_models_equivariant_batch_independent_finite(cls, kwargs, level, order,
                                                     attention, device):
    torch.manual_seed(0)
    model = cls(4, 2, num_layers=1, heads=2, attention=attention, seed=0,
                edge_encoder=torch.nn.Identity(),
                **kwargs).double().to(device).eval()
    data = graphs(device)
    assert_permutation_equivariant(on_graph(model), data[0], level)
    assert_batch_independent(on_graph(model), data, rows_per_graph(order))
    out = on_graph(model)(Batch.from_data_list(data))
    assert torch.isfinite(out).all()


@pytest.mark.parametrize('attention', ['softmax', 'kernel'])
def test_batch_readout_norm_invariant_in_evaluation(attention, device):
    torch.manual_seed(0)
    model = HOTGraphModel(4, 2, num_layers=1, heads=2, attention=attention,
                          seed=0, edge_encoder=torch.nn.Identity(),
                          readout_norm='batch').double().to(device)
    assert isinstance(model.norm, torch.nn.BatchNorm1d)
    data = graphs(device)
    batch = Batch.from_data_list(data)
    model.train()
    first = on_graph(model)(batch)  # updates the running statistics
    assert torch.isfinite(first).all()
    model.eval()
    assert_permutation_equivariant(on_graph(model), data[0], 'graph')
    assert_batch_independent(on_graph(model), data, rows_per_graph(0))
    # the running statistics moved from their start (mean 0, variance 1)
    assert model.norm.running_mean.abs().sum() > 0
    with pytest.raises(ValueError, match='readout_norm'):
        HOTGraphModel(4, 2, readout_norm='group')


def test_checkpointing_gives_identical_gradients(device):
    torch.manual_seed(0)
    batch = Batch.from_data_list(graphs(device))
    model = HOTGraphModel(4, 1, num_layers=2, attention='kernel', seed=0,
                          edge_encoder=torch.nn.Identity()).double().to(device)
    grads = []
    for flag in (False, True):
        model.checkpoint = flag
        model.zero_grad()
        on_graph(model)(batch).sum().backward()
        grads.append([p.grad.clone() for p in model.parameters()
                      if p.grad is not None])
    for a, b in zip(*grads):
        torch.testing.assert_close(a, b)


def test_molecule_style_model_trains(device):
    torch.manual_seed(0)
    data = graphs('cpu')
    for g in data:
        g.x = torch.randint(0, 4, (g.num_nodes, 2))
        g.edge_attr = torch.randint(0, 3, (g.num_edges, 1))
        g.y = torch.randn(1, 1)
    batch = Batch.from_data_list(data).to(device)
    model = HOTGraphModel(16, 1, num_layers=2, heads=2, attention='kernel',
                          node_encoder=CategoricalEncoder([4, 4], 16),
                          edge_encoder=CategoricalEncoder([3], 16)).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    losses = []
    for _ in range(40):
        opt.zero_grad()
        loss = (model(batch.x, batch.edge_index, batch.edge_attr,
                      batch.batch) - batch.y).abs().mean()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < 0.5 * losses[0]
    assert 'HOTGraphModel(16, num_layers=3, order=2->0' in repr(model)
