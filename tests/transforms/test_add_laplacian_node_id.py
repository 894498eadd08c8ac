import pytest
import torch
from torch_geometric.data import Data

from torch_geometric_hot.testing import edge_case_graphs, random_graph
from torch_geometric_hot.transforms import AddLaplacianNodeId


def test_repr():
    assert repr(AddLaplacianNodeId(4)) == (
        "AddLaplacianNodeId(k=4, attr_name='lap_node_id', "
        "dense_threshold=1000)")


@pytest.mark.parametrize('k', [0, -1, 2.5])
def test_bad_k(k):
    with pytest.raises(ValueError, match="'k'"):
        AddLaplacianNodeId(k)


def test_bad_edge_index():
    transform = AddLaplacianNodeId(3)
    with pytest.raises(ValueError, match="'edge_index'"):
        transform(Data(edge_index=torch.tensor([[0, 5]]).t(), num_nodes=3))
    with pytest.raises(ValueError, match="'edge_index'"):
        transform(Data(edge_index=torch.zeros(3, 2, dtype=torch.long),
                       num_nodes=3))
    with pytest.raises(TypeError, match="'edge_index'"):
        transform(Data(edge_index=torch.zeros(2, 2), num_nodes=3))


@pytest.mark.parametrize('graph', range(5))
def test_edge_cases_orthonormal_columns(graph, device):
    data = edge_case_graphs(device=device)[graph]
    k = 5
    ids = AddLaplacianNodeId(k)(data.clone()).lap_node_id
    n = data.num_nodes
    assert ids.shape == (n, k) and ids.dtype == torch.float
    assert torch.isfinite(ids).all() and ids.device == data.x.device
    cols = min(n, k)
    expected = torch.zeros(k, k, device=device)
    expected[:cols, :cols] = torch.eye(cols)
    torch.testing.assert_close(ids.t() @ ids, expected, atol=1e-5, rtol=0)


def test_isolated_and_disconnected(device):
    # Two triangles and an isolated node: eigenvalue 0 twice (one
    # eigenvector per triangle), the isolated node has eigenvalue 1.
    tri = torch.tensor([[0, 1], [1, 2], [2, 0]], device=device)
    edges = torch.cat([tri, tri + 3]).t()
    data = Data(edge_index=edges, num_nodes=7)
    ids = AddLaplacianNodeId(7)(data).lap_node_id.double()
    torch.testing.assert_close(
        ids.t() @ ids, torch.eye(7, dtype=torch.float64, device=device),
        atol=1e-6, rtol=0)
    null_space = ids[:, :2]
    projector = null_space @ null_space.t()
    expected = torch.zeros(7, 7, dtype=torch.float64, device=device)
    expected[:3, :3] = expected[3:6, 3:6] = 1 / 3
    torch.testing.assert_close(projector, expected, atol=1e-6, rtol=0)


def test_deterministic_and_sign_stable(device):
    data = random_graph(40, 60, seed=1, device=device)
    a = AddLaplacianNodeId(6)(data.clone()).lap_node_id
    b = AddLaplacianNodeId(6)(data.clone()).lap_node_id
    assert torch.equal(a, b)
    top = a.abs().argmax(dim=0)
    assert (a[top, torch.arange(6, device=device)] > 0).all()


def test_sparse_path_is_deterministic(device):
    data = random_graph(200, 500, seed=2, device=device)
    transform = AddLaplacianNodeId(4, dense_threshold=10)
    a = transform(data.clone()).lap_node_id
    b = transform(data.clone()).lap_node_id
    assert torch.equal(a, b)


def test_direction_and_self_loops_ignored(device):
    # A directed edge list, a self-loop and a duplicate give the same ids
    # as the simple undirected graph.
    directed = Data(
        edge_index=torch.tensor([[0, 1], [1, 2], [2, 2], [1, 2]],
                                device=device).t(), num_nodes=4)
    simple = Data(
        edge_index=torch.tensor([[0, 1], [1, 0], [1, 2], [2, 1]],
                                device=device).t(), num_nodes=4)
    a = AddLaplacianNodeId(4)(directed).lap_node_id
    b = AddLaplacianNodeId(4)(simple).lap_node_id
    torch.testing.assert_close(a, b)


def test_custom_attr_name(device):
    data = AddLaplacianNodeId(2, attr_name='pe')(random_graph(
        5, 6, device=device))
    assert data.pe.shape == (5, 2) and 'lap_node_id' not in data
