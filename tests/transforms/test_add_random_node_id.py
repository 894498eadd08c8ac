import pytest
import torch

from torch_geometric_hot.testing import edge_case_graphs
from torch_geometric_hot.transforms import AddRandomNodeId


def test_repr():
    assert repr(AddRandomNodeId(16)) == (
        "AddRandomNodeId(dim=16, attr_name='random_node_id', seed=None)")


def test_bad_dim():
    with pytest.raises(ValueError, match="'dim'"):
        AddRandomNodeId(0)


@pytest.mark.parametrize('graph', range(5))
def test_edge_cases_unit_rows(graph):
    data = edge_case_graphs()[graph]
    ids = AddRandomNodeId(16, seed=0)(data.clone()).random_node_id
    assert ids.shape == (data.num_nodes, 16)
    assert torch.all(ids.abs() == 0.25)
    torch.testing.assert_close(ids.norm(dim=1), torch.ones(data.num_nodes))


def test_seeded():
    data = edge_case_graphs()[0]
    a = AddRandomNodeId(16, seed=5)(data.clone()).random_node_id
    b = AddRandomNodeId(16, seed=5)(data.clone()).random_node_id
    assert torch.equal(a, b)
