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
def test_edge_cases_unit_rows(graph, device):
    data = edge_case_graphs(device=device)[graph]
    ids = AddRandomNodeId(16, seed=0)(data.clone()).random_node_id
    assert ids.shape == (data.num_nodes, 16) and ids.device == data.x.device
    assert torch.all(ids.abs() == 0.25)
    torch.testing.assert_close(ids.norm(dim=1),
                               torch.ones(data.num_nodes, device=device))


def test_seeded(device):
    data = edge_case_graphs(device=device)[0]
    a = AddRandomNodeId(16, seed=5)(data.clone()).random_node_id
    b = AddRandomNodeId(16, seed=5)(data.clone()).random_node_id
    assert torch.equal(a, b)
