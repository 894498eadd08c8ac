import pytest
import torch

from torch_geometric_hot.data import PairView
from torch_geometric_hot.nn import PairEncoder
from torch_geometric_hot.testing import edge_case_graphs


def test_features_enter_the_pair_view_encoded(device):
    torch.manual_seed(0)
    node = torch.nn.Linear(4, 8).to(device, torch.float64)
    edge = torch.nn.Linear(2, 8).to(device, torch.float64)
    encoder = PairEncoder(8, node, edge)
    for data in edge_case_graphs(edge_dim=2, device=device):
        view = PairView.from_data(data)
        out = encoder(data.x, data.edge_attr, view)
        expected = view.lift(node(data.x), edge(data.edge_attr))
        assert torch.equal(out, expected)
    assert torch.equal(PairEncoder(8, node, order=1)(data.x), node(data.x))
    assert repr(encoder) == 'PairEncoder(8, order=2)'


def test_bad_input_names_what_was_expected():
    with pytest.raises(ValueError, match="'order' must be 1 or 2"):
        PairEncoder(8, order=3)
    x = torch.randn(3, 8)
    with pytest.raises(ValueError, match="'view' is required"):
        PairEncoder(8)(x)
    with pytest.raises(ValueError, match=r"'x' \(no node_encoder given\) "
                       r"has dtype torch.int64"):
        PairEncoder(8)(torch.zeros(3, 2, dtype=torch.long))
    view = PairView.build(torch.tensor([[0, 1], [1, 0]]), 2)
    with pytest.raises(ValueError, match=r"'edge_attr' \(no edge_encoder "
                       r"given\) has dtype torch.int64"):
        PairEncoder(8)(torch.randn(2, 8), torch.zeros(2, 3, dtype=torch.long),
                       view)
    with pytest.raises(ValueError, match=r"after its encoder must have "
                       r"shape \[\*, 8\]"):
        PairEncoder(8, torch.nn.Linear(8, 4))(x)


def test_edge_features_are_checked_by_their_own_name():
    view = PairView.build(torch.tensor([[0, 1, 1, 2], [1, 0, 2, 1]]), 3)
    x, edge_attr = torch.randn(3, 8), torch.randn(4, 8)
    nan = edge_attr.clone()
    nan[2, 0] = float('nan')
    with pytest.raises(ValueError, match=r"'edge_attr' holds NaN or "
                       r"infinite values \(first in row 2\)"):
        PairEncoder(8)(x, nan, view)
    with pytest.raises(ValueError, match=r"'x' holds NaN"):
        PairEncoder(8)(torch.full((3, 8), float('inf')), edge_attr, view)
    with pytest.raises(TypeError, match=r"'edge_attr' is torch.float64 but "
                       r"'x' is torch.float32"):
        PairEncoder(8)(x, edge_attr.double(), view)
    with pytest.raises(ValueError, match=r"'edge_attr' has 3 rows but the "
                       r"view has 4 edges"):
        PairEncoder(8)(x, edge_attr[:3], view)
    with pytest.raises(ValueError, match=r"'edge_feat' must have shape "
                       r"\[4, 8\]"):
        view.lift(x, edge_attr[:3])
