r"""Properties of every public transform on random graphs (see
:mod:`robust_graphs`), each against a brute-force oracle, and of the views
the layers build from them (batched, their nodes shuffled)."""
import itertools

import numpy as np
import torch
from hypothesis import given
from hypothesis import strategies as st
from torch_geometric.data import Batch

from torch_geometric_hot.data import PairView
from torch_geometric_hot.transforms import (AddHyperedgeView,
                                            AddLaplacianNodeId,
                                            AddOrthogonalNodeId,
                                            AddRandomNodeId,
                                            AddSecondOrderView,
                                            AddSimplexView)

from robust_graphs import batches, graphs, shuffled_batch


def _edges(data, loops: bool = True):
    return {(u, v) for u, v in data.edge_index.t().tolist()
            if loops or u != v}


def _columns(index):
    return [tuple(c) for c in index.t().tolist()]


@given(data=graphs())
def test_second_order_view_entries(data):
    out = AddSecondOrderView(pair_x=True)(data.clone())
    n = data.num_nodes
    entries = _columns(out.pair_index)
    assert len(entries) == len(set(entries))
    assert set(entries) == {(i, i) for i in range(n)} | _edges(data, False)
    transpose = out.pair_transpose.tolist()
    for e, (i, j) in enumerate(entries):
        assert (transpose[e] == -1) == ((j, i) not in entries)
        if transpose[e] >= 0:
            assert entries[transpose[e]] == (j, i)
    assert torch.isfinite(out.pair_x).all()


@given(data_list=batches(), seed=st.integers(0, 2**16))
def test_pair_view_of_a_shuffled_batch(data_list, seed):
    batch, shuffled, perm = shuffled_batch(data_list, seed)
    view = PairView.build(shuffled.edge_index, shuffled.num_nodes,
                          shuffled.batch, shuffled.num_graphs)
    assert view.num_graphs == batch.num_graphs
    assert torch.equal(view.nodes_per_graph,
                       torch.bincount(batch.batch,
                                      minlength=batch.num_graphs))
    # every entry stays inside its graph
    assert torch.equal(view.batch[view.row], view.batch[view.col])


def _oracle_tuples(data, order, candidates, include_self):
    n = data.num_nodes
    out = {i: set() for i in range(n)}
    for u, v in _edges(data):
        out[u].add(v)
    if include_self:
        for i in range(n):
            out[i].add(i)
    if candidates == 'dense':
        return set(itertools.product(range(n), repeat=order + 1))
    tuples = set()
    for q in range(n):
        if candidates == 'neighbours':
            for keys in itertools.product(sorted(out[q]), repeat=order):
                tuples.add((q, ) + keys)
        else:
            walks = [(q, )]
            for _ in range(order):
                walks = [w + (v, ) for w in walks for v in out[w[-1]]]
            tuples |= set(walks)
    return tuples


@given(data=graphs(max_nodes=5), order=st.integers(1, 3),
       candidates=st.sampled_from(['dense', 'neighbours', 'walks']),
       include_self=st.booleans())
def test_simplex_view_equals_brute_force(data, order, candidates,
                                         include_self):
    out = AddSimplexView(order, candidates, include_self)(data.clone())
    tuples = _columns(out.simplex_index)
    assert len(tuples) == len(set(tuples))
    assert set(tuples) == _oracle_tuples(data, order, candidates,
                                         include_self)


@given(data=graphs(), k=st.integers(2, 4))
def test_hyperedge_view_labels_the_cliques(data, k):
    out = AddHyperedgeView(k)(data.clone())
    adjacent = _edges(data, False)
    adjacent |= {(v, u) for u, v in adjacent}
    candidates = _columns(out.hyperedge_index)
    assert len(candidates) == len(set(candidates))
    for c, label in zip(candidates, out.hyperedge_label.tolist()):
        assert list(c) == sorted(set(c)) and len(c) == k
        clique = all((u, v) in adjacent
                     for u, v in itertools.combinations(c, 2))
        assert label == float(clique)
    n = data.num_nodes
    assert len(candidates) == (len(list(itertools.combinations(range(n), k)))
                               if n >= k else 0)


@given(data=graphs(), k=st.integers(1, 8))
def test_laplacian_node_ids_are_eigenvectors(data, k):
    out = AddLaplacianNodeId(k)(data.clone())
    ids = out.lap_node_id.double().numpy()
    n = data.num_nodes
    assert ids.shape == (n, k) and np.isfinite(ids).all()
    if n == 0:
        return
    adjacency = np.zeros((n, n))
    for u, v in _edges(data, False):
        adjacency[u, v] = adjacency[v, u] = 1.0
    degree = adjacency.sum(1)
    scale = np.where(degree > 0, degree, 1.0)**-0.5 * (degree > 0)
    laplacian = np.eye(n) - scale[:, None] * adjacency * scale[None, :]
    cols = ids[:, :min(n, k)]
    values = np.einsum('nc,nm,mc->c', cols, laplacian, cols)
    np.testing.assert_allclose(laplacian @ cols, cols * values, atol=1e-4)
    np.testing.assert_allclose(cols.T @ cols, np.eye(cols.shape[1]),
                               atol=1e-4)


@given(data=graphs(), dim=st.integers(1, 8), seed=st.integers(0, 2**16))
def test_seeded_node_ids(data, dim, seed):
    n = data.num_nodes
    orf = AddOrthogonalNodeId(dim, seed=seed)(data.clone()).orf_node_id
    assert orf.shape == (n, dim) and torch.isfinite(orf).all()
    if 0 < n <= dim:  # the rows of a random orthogonal matrix
        torch.testing.assert_close(orf @ orf.t(), torch.eye(n), atol=1e-5,
                                   rtol=0)
    rnd = AddRandomNodeId(dim, seed=seed)(data.clone()).random_node_id
    assert rnd.shape == (n, dim)
    torch.testing.assert_close(rnd.abs(), torch.full_like(rnd, dim**-0.5))


@given(data_list=batches())
def test_views_survive_batching(data_list):
    # per-graph views, batched by the stock collate, equal the batch's own
    batch = Batch.from_data_list([AddSecondOrderView()(d.clone())
                                  for d in data_list])
    given_view = PairView.from_data(batch)
    built = PairView.build(batch.edge_index, batch.num_nodes, batch.batch,
                           batch.num_graphs)
    assert set(_columns(torch.stack([given_view.row, given_view.col]))) == \
        set(_columns(torch.stack([built.row, built.col])))
    assert torch.equal(given_view.entry_batch.sort().values,
                       built.entry_batch.sort().values)
