import pytest
import torch
from torch_geometric.data import Data

from torch_geometric_hot.transforms import AddSecondOrderView


def test_pair_features_of_vector_features(device):
    # 1-D node and edge features enter as one channel each
    edge_index = torch.tensor([[0, 1, 1], [1, 0, 2]], device=device)
    data = AddSecondOrderView(pair_x=True)(Data(
        x=torch.tensor([1.0, 2.0, 3.0], device=device),
        edge_index=edge_index,
        edge_attr=torch.tensor([4.0, 5.0, 6.0], device=device)))
    # diagonal entries [x_i | 0], then the edges (0,1), (1,0), (1,2)
    expected = torch.tensor([[1.0, 0], [2, 0], [3, 0], [0, 4], [0, 5],
                             [0, 6]], device=device)
    assert torch.equal(data.pair_x, expected)


def test_without_edge_features_the_edges_enter_as_zeros(device):
    edge_index = torch.tensor([[0, 1], [1, 0]], device=device)
    x = torch.tensor([[1.0, 2.0], [3.0, 4.0]], device=device)
    data = AddSecondOrderView(pair_x=True)(Data(x=x, edge_index=edge_index))
    assert torch.equal(data.pair_x, torch.cat([x, x.new_zeros(2, 2)]))


def test_a_graph_without_edge_index_has_no_edges(device):
    x = torch.randn(3, 2, device=device)
    data = AddSecondOrderView(pair_x=True)(Data(x=x))
    assert torch.equal(data.pair_index,
                       torch.arange(3, device=device).repeat(2, 1))
    assert torch.equal(data.pair_transpose, torch.arange(3, device=device))
    assert torch.equal(data.pair_x, x)


def test_bad_input_names_what_was_expected():
    edge_index = torch.tensor([[0], [1]])
    with pytest.raises(ValueError, match="needs 'num_nodes'"):
        AddSecondOrderView()(Data())
    with pytest.raises(ValueError, match="needs float node features 'x'"):
        AddSecondOrderView(pair_x=True)(Data(edge_index=edge_index,
                                             num_nodes=2))
    with pytest.raises(ValueError, match="needs float node features 'x'"):
        AddSecondOrderView(pair_x=True)(Data(
            x=torch.zeros(2, 3, dtype=torch.long), edge_index=edge_index))
