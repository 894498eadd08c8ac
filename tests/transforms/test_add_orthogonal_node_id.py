import pytest
import torch
from torch_geometric.data import Batch

from torch_geometric_hot.testing import edge_case_graphs, random_graph
from torch_geometric_hot.transforms import AddOrthogonalNodeId


def test_repr():
    assert repr(AddOrthogonalNodeId(8, seed=3)) == (
        "AddOrthogonalNodeId(dim=8, attr_name='orf_node_id', seed=3)")


@pytest.mark.parametrize('dim', [0, -2, None])
def test_bad_dim(dim):
    with pytest.raises(ValueError, match="'dim'"):
        AddOrthogonalNodeId(dim)


@pytest.mark.parametrize('graph', range(5))
def test_edge_cases_orthonormal_rows(graph, device):
    data = edge_case_graphs(device=device)[graph]
    ids = AddOrthogonalNodeId(8, seed=0)(data.clone()).orf_node_id
    n = data.num_nodes
    assert ids.shape == (n, 8) and torch.isfinite(ids).all()
    assert ids.device == data.x.device
    torch.testing.assert_close(ids @ ids.t(), torch.eye(n, device=device),
                               atol=1e-5, rtol=0)


def test_more_nodes_than_dim(device):
    ids = AddOrthogonalNodeId(4,
                              seed=0)(random_graph(10, 12,
                                                   device=device)).orf_node_id
    assert ids.shape == (10, 4)
    torch.testing.assert_close(ids.t() @ ids, torch.eye(4, device=device),
                               atol=1e-5, rtol=0)


def test_seeded_sequence_and_batching(device):
    graphs = [random_graph(n, 2 * n, seed=n, device=device) for n in (3, 5)]
    a = [AddOrthogonalNodeId(6, seed=1)(g.clone()) for g in graphs]
    transform = AddOrthogonalNodeId(6, seed=1)
    b = [transform(g.clone()) for g in graphs]
    assert torch.equal(a[0].orf_node_id, b[0].orf_node_id)
    assert not torch.equal(a[1].orf_node_id, b[1].orf_node_id)
    batch = Batch.from_data_list(b)
    assert batch.orf_node_id.shape == (8, 6)
