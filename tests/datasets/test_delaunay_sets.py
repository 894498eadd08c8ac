import pytest
import torch

from torch_geometric_hot.data import PairView
from torch_geometric_hot.datasets import DelaunaySets
from torch_geometric_hot.datasets.delaunay_sets import (complete_edges,
                                                        delaunay_edges)
from torch_geometric_hot.transforms import AddSecondOrderView

pytest.importorskip('scipy')


def test_delaunay_edges_of_a_square_and_small_sets():
    # A unit square with its centre: 4 sides + 4 spokes, no diagonal.
    pos = torch.tensor([[0., 0.], [1., 0.], [1., 1.], [0., 1.], [.5, .5]])
    edges = delaunay_edges(pos)
    undirected = {tuple(sorted(e)) for e in edges.t().tolist()}
    assert undirected == {(0, 1), (1, 2), (2, 3), (0, 3), (0, 4), (1, 4),
                          (2, 4), (3, 4)}
    assert edges.size(1) == 16  # both directions
    assert delaunay_edges(torch.rand(1, 2)).size(1) == 0
    assert delaunay_edges(torch.rand(2, 2)).tolist() == [[0, 1], [1, 0]]
    assert delaunay_edges(torch.rand(3, 2)).size(1) == 6


def test_triangulation_satisfies_euler_and_the_empty_circle():
    gen = torch.Generator().manual_seed(0)
    pos = torch.rand(30, 2, generator=gen, dtype=torch.double)
    from scipy.spatial import ConvexHull, Delaunay
    edges = delaunay_edges(pos)
    hull = len(ConvexHull(pos.numpy()).vertices)
    assert edges.size(1) // 2 == 3 * 30 - 3 - hull  # planar triangulation
    for tri in Delaunay(pos.numpy()).simplices:  # empty circumcircle
        a, b, c = pos[torch.from_numpy(tri).long()]
        # Circumcentre o: |o - a| = |o - b| = |o - c|.
        lhs = 2 * torch.stack([b - a, c - a])
        rhs = torch.stack([b.pow(2).sum() - a.pow(2).sum(),
                           c.pow(2).sum() - a.pow(2).sum()])
        centre = torch.linalg.solve(lhs, rhs)
        radius = (a - centre).norm()
        assert ((pos - centre).norm(dim=1) >= radius - 1e-9).all()


def test_dataset_is_seeded_cached_and_aligned_with_the_pair_view(tmp_path):
    ds = DelaunaySets(str(tmp_path), 'train', num_sets=4, num_points=(5, 9),
                      pre_transform=AddSecondOrderView())
    again = DelaunaySets(str(tmp_path), 'train', num_sets=4,
                         num_points=(5, 9),
                         pre_transform=AddSecondOrderView())
    test = DelaunaySets(str(tmp_path), 'test', num_sets=4, num_points=(5, 9))
    assert len(ds) == 4 and 'num_points=5-9' in repr(ds)
    assert torch.equal(ds[2].x, again[2].x)
    assert not torch.equal(ds[0].x, test[0].x)
    for data in ds:
        n = data.num_nodes
        assert 5 <= n <= 9
        assert torch.equal(data.edge_index, complete_edges(n))
        target = delaunay_edges(data.x)
        label = torch.zeros(n, n)
        label[target[0], target[1]] = 1
        assert torch.equal(data.y, label[data.edge_index[0],
                                         data.edge_index[1]])
        view = PairView.from_data(data)
        assert torch.equal(view.off_row, data.edge_index[0])
        assert torch.equal(view.off_col, data.edge_index[1])


def test_bad_arguments(tmp_path):
    with pytest.raises(ValueError, match="'split'"):
        DelaunaySets(str(tmp_path), 'dev')
    with pytest.raises(ValueError, match="'num_points'"):
        DelaunaySets(str(tmp_path), num_points=(9, 5))
    with pytest.raises(ValueError, match="'num_sets'"):
        DelaunaySets(str(tmp_path), num_sets=-1)
