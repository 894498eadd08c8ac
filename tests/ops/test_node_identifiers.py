import pytest
import torch
from torch_geometric.data import Batch

from torch_geometric_hot.ops.node_identifiers import (
    batched_laplacian_node_ids, laplacian_node_ids, make_signs_canonical,
    orthogonal_node_ids, random_node_ids)
from torch_geometric_hot.testing import edge_case_graphs, random_graph


def gram(x):
    return x.t() @ x


@pytest.mark.parametrize('n,dim', [(1, 4), (3, 4), (4, 4), (9, 4)])
def test_orthogonal_node_ids_orthonormal(n, dim, device):
    gen = torch.Generator(device).manual_seed(0)
    p = orthogonal_node_ids(n, dim, gen, dtype=torch.float64)
    assert p.shape == (n, dim) and p.device.type == device.type
    cols = min(n, dim)
    # Columns are orthonormal (the padding ones are zero) ...
    expected = torch.zeros(dim, dim, dtype=torch.float64, device=device)
    expected[:cols, :cols] = torch.eye(cols, dtype=torch.float64)
    torch.testing.assert_close(gram(p), expected)
    # ... and rows are orthonormal when the graph fits.
    if n <= dim:
        torch.testing.assert_close(
            p @ p.t(), torch.eye(n, dtype=torch.float64, device=device))


def test_orthogonal_node_ids_batched_and_seeded(device):
    sizes = torch.tensor([3, 0, 5, 3, 1], device=device)
    a = orthogonal_node_ids(sizes, 4, torch.Generator(device).manual_seed(1))
    b = orthogonal_node_ids(sizes, 4, torch.Generator(device).manual_seed(1))
    assert a.shape == (12, 4) and a.device.type == device.type
    assert torch.equal(a, b)
    # Each graph is orthonormal on its own, and two equal-size graphs differ.
    g0, g3 = a[0:3], a[8:11]
    torch.testing.assert_close(g0 @ g0.t(), torch.eye(3, device=device),
                               atol=1e-5, rtol=0)
    assert not torch.allclose(g0, g3)


def test_draws_follow_the_device_and_generator(device):
    # The device of the generator decides where the identifiers are drawn;
    # a generator of another device is refused by name.
    for draw in (orthogonal_node_ids, random_node_ids):
        gen = torch.Generator(device).manual_seed(0)
        assert draw([2, 3], 4, gen).device.type == device.type
        assert draw([2, 3], 4, device=device).device.type == device.type
        if device.type != 'cpu':
            with pytest.raises(ValueError, match="'generator'"):
                draw([2, 3], 4, torch.Generator(), device=device)


def test_orthogonal_node_ids_haar_marginal():
    # Entries of a Haar orthogonal matrix have mean 0 and variance 1/n: a
    # missing sign correction of the QR would bias the diagonal positive.
    p = orthogonal_node_ids([4] * 4000, 4, torch.Generator().manual_seed(2),
                            torch.float64).view(4000, 4, 4)
    diag = torch.diagonal(p, dim1=1, dim2=2)
    assert diag.mean().abs() < 0.03
    assert (p.pow(2).mean() - 0.25).abs() < 0.01


def test_random_node_ids(device):
    p = random_node_ids([7, 2], 64, torch.Generator(device).manual_seed(0),
                        torch.float64)
    assert p.shape == (9, 64)
    assert torch.all(p.abs() == 64**-0.5)
    eye = torch.eye(9, dtype=torch.float64, device=device)
    torch.testing.assert_close(p.norm(dim=1), eye.diagonal())
    assert (p @ p.t() - eye).abs().max() < 0.6


def test_make_signs_canonical(device):
    v = torch.tensor([[0.1, -0.6], [-0.9, 0.6], [0.0, 0.1]], device=device)
    out = make_signs_canonical(v)
    expected = torch.tensor([[-0.1, 0.6], [0.9, -0.6], [0.0, -0.1]],
                            device=device)  # column 1 ties: first entry
    torch.testing.assert_close(out, expected)
    torch.testing.assert_close(make_signs_canonical(-v), out)
    # A batch of matrices is normalised matrix by matrix.
    both = make_signs_canonical(torch.stack([v, -2 * v]))
    torch.testing.assert_close(both, torch.stack([out, 2 * out]))


def path_graph(n):
    row = torch.arange(n - 1)
    return torch.stack([torch.cat([row, row + 1]), torch.cat([row + 1, row])])


def test_laplacian_node_ids_path_graph(device):
    # Path graph: eigenvalues 1 - cos(pi j / (n - 1)), all distinct.
    n, k = 6, 4
    ids = laplacian_node_ids(path_graph(n).to(device), n, k,
                             dtype=torch.float64)
    assert ids.device.type == device.type
    ids = ids.cpu()
    torch.testing.assert_close(gram(ids), torch.eye(k, dtype=torch.float64))
    deg = torch.tensor([1., 2, 2, 2, 2, 1], dtype=torch.float64)
    trivial = deg.sqrt() / deg.sqrt().norm()
    torch.testing.assert_close(ids[:, 0], trivial)
    adj = torch.zeros(n, n, dtype=torch.float64)
    adj[path_graph(n)[0], path_graph(n)[1]] = 1
    lap = torch.eye(n, dtype=torch.float64) - adj / torch.outer(
        deg.sqrt(), deg.sqrt())
    values = 1 - torch.cos(torch.pi * torch.arange(k) / (n - 1))
    torch.testing.assert_close(lap @ ids, ids * values.to(torch.float64))


def test_batched_laplacian_equals_each_graph_alone(device):
    # Graphs of equal and different sizes, isolated nodes, self-loops and
    # duplicate edges: every graph's rows are its own identifiers.
    graphs = edge_case_graphs() + [random_graph(7, 9, seed=5)]
    batch = Batch.from_data_list(graphs).to(device)
    ids = batched_laplacian_node_ids(batch.edge_index, batch.batch,
                                     len(graphs), 5, torch.float64)
    assert ids.shape == (batch.num_nodes, 5) and ids.device == batch.x.device
    for g, data in enumerate(graphs):
        alone = laplacian_node_ids(data.edge_index.to(device), data.num_nodes,
                                   5, dtype=torch.float64)
        rows = ids[batch.batch == g]
        # Equal projectors (bases of degenerate eigenspaces may differ).
        torch.testing.assert_close(rows @ rows.t(), alone @ alone.t(),
                                   atol=1e-8, rtol=0)


def test_laplacian_node_ids_sparse_matches_dense():
    data = random_graph(300, 900, seed=3)
    dense = laplacian_node_ids(data.edge_index, 300, 5, dtype=torch.float64)
    sparse = laplacian_node_ids(data.edge_index, 300, 5, dense_threshold=0,
                                dtype=torch.float64)
    # Same sign convention, so equal columns when the spectrum is simple;
    # compare the spanned subspaces otherwise (isolated nodes, components).
    proj_dense = dense @ dense.t()
    proj_sparse = sparse @ sparse.t()
    torch.testing.assert_close(proj_sparse, proj_dense, atol=1e-6, rtol=0)
    torch.testing.assert_close(gram(sparse), torch.eye(5,
                                                       dtype=torch.float64),
                               atol=1e-8, rtol=0)


def test_laplacian_node_ids_sparse_equals_dense_simple_spectrum():
    # A long path has a simple spectrum: same columns, same signs.
    n = 60
    dense = laplacian_node_ids(path_graph(n), n, 4, dtype=torch.float64)
    sparse = laplacian_node_ids(path_graph(n), n, 4, dense_threshold=0,
                                dtype=torch.float64)
    torch.testing.assert_close(sparse, dense, atol=1e-6, rtol=0)


def test_laplacian_sparse_path_returns_to_the_device(device):
    # ARPACK runs on the host; its result goes back to the edges' device.
    ids = laplacian_node_ids(path_graph(60).to(device), 60, 4,
                             dense_threshold=0)
    assert ids.device.type == device.type
