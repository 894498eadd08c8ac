import pytest
import torch
from torch_geometric.data import Batch
from torch_geometric.loader import DataLoader
from torch_geometric.nn import GINConv, global_add_pool

from torch_geometric_hot.data import PairView
from torch_geometric_hot.nn import HOTConv, HOTNodeConv
from torch_geometric_hot.testing import (assert_batch_independent,
                                         assert_gradcheck,
                                         assert_permutation_equivariant,
                                         edge_case_graphs, random_graph)

ATTENTIONS = ['kernel', 'softmax']


def layer(attention, device, edge_dim=3):
    torch.manual_seed(0)
    return HOTNodeConv(4, 8, heads=2, edge_dim=edge_dim, attention=attention,
                       seed=0).double().to(device).eval()


def on_graph(conv):
    return lambda d: conv(d.x, d.edge_index, d.edge_attr, d.batch)


@pytest.mark.parametrize('attention', ATTENTIONS)
def test_equals_lift_then_second_to_first_order_attention(attention, device):
    conv = layer(attention, device)
    data = random_graph(7, 12, edge_dim=3, dtype=torch.float64, device=device)
    view = PairView.build(data.edge_index, data.num_nodes)
    ref = HOTConv(8, 8, 2, 1, 2, attention=attention,
                  seed=0).double().to(device)
    ref.load_state_dict(conv.conv.state_dict())
    pair = view.lift(conv.lin_node(data.x), conv.lin_edge(data.edge_attr))
    expected = ref.eval()(pair, view)
    torch.testing.assert_close(on_graph(conv)(data), expected)
    # a view passed in is reused and gives the same result
    torch.testing.assert_close(
        conv(data.x, data.edge_index, data.edge_attr, view=view), expected)


@pytest.mark.parametrize('attention', ATTENTIONS)
def test_equivariant_and_batch_independent(attention, device):
    conv = layer(attention, device)
    graphs = edge_case_graphs(edge_dim=3, device=device)
    assert_permutation_equivariant(on_graph(conv), graphs[-1], 'node')
    assert_batch_independent(on_graph(conv), graphs, 'node')
    out = on_graph(conv)(Batch.from_data_list(graphs))
    assert torch.isfinite(out).all()


@pytest.mark.parametrize('attention', ATTENTIONS)
def test_gradcheck(attention, device):
    conv = layer(attention, device)
    data = random_graph(5, 6, edge_dim=3, dtype=torch.float64, device=device)
    x = data.x.clone().requires_grad_()
    e = data.edge_attr.clone().requires_grad_()
    assert_gradcheck(lambda x, e: conv(x, data.edge_index, e), (x, e))


class GINWithHOT(torch.nn.Module):
    def __init__(self, hidden: int):
        super().__init__()
        mlp = lambda i: torch.nn.Sequential(  # noqa: E731
            torch.nn.Linear(i, hidden), torch.nn.ReLU(),
            torch.nn.Linear(hidden, hidden))
        self.gin1 = GINConv(mlp(4))
        self.hot = HOTNodeConv(hidden, hidden, heads=2, edge_dim=3, seed=0)
        self.gin2 = GINConv(mlp(hidden))
        self.head = torch.nn.Linear(hidden, 1)

    def forward(self, x, edge_index, edge_attr, batch):
        x = self.gin1(x, edge_index).relu()
        x = self.hot(x, edge_index, edge_attr, batch).relu()  # one line
        x = self.gin2(x, edge_index)
        return self.head(global_add_pool(x, batch))


def test_drops_between_two_gin_layers_and_trains_on_a_loader_batch(device):
    torch.manual_seed(0)
    graphs = edge_case_graphs(edge_dim=3, dtype=torch.float32)
    for g in graphs:
        g.y = torch.randn(1, 1)
    batch = next(iter(DataLoader(graphs, batch_size=len(graphs)))).to(device)
    model = GINWithHOT(16).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    before = [p.detach().clone() for p in model.hot.parameters()]
    losses = []
    for _ in range(20):
        opt.zero_grad()
        out = model(batch.x, batch.edge_index, batch.edge_attr, batch.batch)
        loss = (out - batch.y).square().mean()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert out.shape == (len(graphs), 1)
    assert losses[-1] < losses[0]
    assert any(not torch.equal(a, b)
               for a, b in zip(before, model.hot.parameters()))


def test_clear_errors():
    conv = HOTNodeConv(4, 8, edge_dim=3)
    data = random_graph(5, 6, edge_dim=3, dtype=torch.float32)
    with pytest.raises(ValueError, match="'x'"):
        conv(data.x.long(), data.edge_index)
    with pytest.raises(ValueError, match="'edge_attr'"):
        conv(data.x, data.edge_index, data.edge_attr[:, :2])
    # dtypes other than the parameters': before a product fails in torch
    with pytest.raises(TypeError, match="'x' has dtype torch.float64 but "
                       "the layer's parameters are torch.float32"):
        conv(data.x.double(), data.edge_index)
    for edge_attr in (data.edge_attr.double(), data.edge_attr.half()):
        with pytest.raises(ValueError, match="'edge_attr' must be floating "
                           "point of dtype torch.float32 \\(that of 'x'\\)"):
            conv(data.x, data.edge_index, edge_attr)
    with pytest.raises(ValueError, match="'edge_dim'"):
        HOTNodeConv(4, 8)(data.x, data.edge_index, data.edge_attr)
    other = PairView.build(torch.tensor([[0, 1], [1, 2]]), 3)
    with pytest.raises(ValueError, match="'view'"):
        conv(data.x, data.edge_index, view=other)


def test_repr():
    assert repr(HOTNodeConv(4, 8, heads=2, edge_dim=3)) == (
        "HOTNodeConv(4, 8, heads=2, attention='kernel', edge_dim=3)")
