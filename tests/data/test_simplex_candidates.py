import itertools

import pytest
import torch

from torch_geometric_hot.data.simplex_candidates import (dense_simplices,
                                                         neighbour_simplices,
                                                         topk_pairs,
                                                         walk_simplices)
from torch_geometric_hot.testing import random_graph


def columns(index):
    return sorted(map(tuple, index.t().tolist()))


def adjacency(edge_index, n, include_self=False):
    nbrs = {i: set() for i in range(n)}
    for u, v in edge_index.t().tolist():
        nbrs[u].add(v)
    if include_self:
        for i in range(n):
            nbrs[i].add(i)
    return {i: sorted(s) for i, s in nbrs.items()}


@pytest.mark.parametrize('order', [1, 2, 3])
def test_dense_is_the_product_of_each_graph(order, device):
    sizes = [3, 1, 0, 2]  # graph 2 is empty
    batch = torch.repeat_interleave(torch.arange(4), torch.tensor(sizes))
    index = dense_simplices(sum(sizes), order, batch.to(device))
    assert index.device.type == device.type
    expected, start = [], 0
    for size in sizes:
        nodes = range(start, start + size)
        expected += list(itertools.product(nodes, repeat=order + 1))
        start += size
    assert index.tolist() == torch.tensor(expected).t().tolist()
    assert dense_simplices(0, order).shape == (order + 1, 0)


@pytest.mark.parametrize('order', [1, 2, 3])
@pytest.mark.parametrize('include_self', [False, True])
def test_neighbours_and_walks_match_brute_force(order, include_self, device):
    data = random_graph(7, 9, seed=1, device=device)
    edge_index = torch.cat([
        data.edge_index, data.edge_index[:, :3],
        torch.tensor([[4], [4]], device=device)
    ], dim=1)  # dup + loop
    nbrs = adjacency(edge_index, 7, include_self)
    neighbours = neighbour_simplices(edge_index, 7, order, include_self)
    assert columns(neighbours) == sorted(
        (q, ) + ks for q in range(7)
        for ks in itertools.product(nbrs[q], repeat=order))
    walks = walk_simplices(edge_index, 7, order, include_self)
    expected = [(q, ) for q in range(7)]
    for _ in range(order):
        expected = [w + (v, ) for w in expected for v in nbrs[w[-1]]]
    assert columns(walks) == sorted(expected)
    for index in (neighbours, walks):
        assert bool((index[0, 1:] >= index[0, :-1]).all())  # query-sorted
        assert index.device == edge_index.device


def test_empty_and_bad_edge_index():
    empty = torch.empty(2, 0, dtype=torch.long)
    assert walk_simplices(empty, 3, 2).shape == (3, 0)
    assert neighbour_simplices(empty, 3, 1, include_self=True).tolist() == [
        [0, 1, 2], [0, 1, 2]
    ]
    with pytest.raises(ValueError, match="'edge_index'.*\\[0, 3\\)"):
        walk_simplices(torch.tensor([[0], [3]]), 3, 1)
    with pytest.raises(ValueError, match="'edge_index' must have shape"):
        walk_simplices(torch.tensor([0, 1]), 3, 1)
    with pytest.raises(ValueError, match="'order'"):
        walk_simplices(empty, 3, 0)
    with pytest.raises(ValueError, match="'batch' must be sorted"):
        dense_simplices(3, 1, torch.tensor([1, 0, 1]))


def test_topk_pairs_keep_the_node_and_clamp_k(device):
    scores = torch.tensor([[
        [0., 5., 1., 9.], [3., 0., 2., 7.], [4., 6., 0., 1.], [0., 0., 0., 0.]
    ], [[0., 2., 0., 0.], [8., 0., 0., 0.], [0., 0., 0., 0.], [0., 0., 0., 0.]]
                           ], device=device)
    mask = torch.tensor(
        [[True, True, True, False], [True, True, False, False]], device=device)
    row, col = topk_pairs(scores, mask, 2)
    assert list(zip(row.tolist(), col.tolist())) == [
        (0, 0), (0, 1), (1, 1), (1, 0), (2, 2), (2, 1), (4, 4), (4, 5),
        (5, 5), (5, 4)
    ]
    row, col = topk_pairs(scores, mask, 10)  # clamped to the graph sizes
    assert row.numel() == 3 * 3 + 2 * 2
    assert bool((row // 4 == col // 4).all())  # never across graphs
    with pytest.raises(ValueError, match="'k'"):
        topk_pairs(scores, mask, 0)
