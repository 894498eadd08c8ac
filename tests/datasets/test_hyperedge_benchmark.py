import numpy as np
import pytest
import torch

from torch_geometric_hot.datasets import (planted_hypergraph,
                                          read_hyperedge_npz)


def test_reader_makes_ids_global_per_type(tmp_path):
    nums_type = np.array([3, 2, 4])
    train = np.array([[0, 1, 3], [2, 0, 0]])
    test = np.array([[1, 1, 2]])
    np.savez(tmp_path / 'train_data.npz', train_data=train,
             nums_type=nums_type)
    np.savez(tmp_path / 'test_data.npz', test_data=test, nums_type=nums_type)
    data = read_hyperedge_npz(str(tmp_path))
    assert data.num_nodes == 9
    assert data.node_type.tolist() == [0, 0, 0, 1, 1, 2, 2, 2, 2]
    assert data.train_hyperedges.tolist() == [[0, 2], [4, 3], [8, 5]]
    assert data.test_hyperedges.tolist() == [[1], [4], [7]]


def test_reader_errors_name_the_problem(tmp_path):
    with pytest.raises(FileNotFoundError, match='train_data.npz'):
        read_hyperedge_npz(str(tmp_path))
    np.savez(tmp_path / 'train_data.npz', train_data=np.array([[0, 5]]),
             nums_type=np.array([2, 2]))
    np.savez(tmp_path / 'test_data.npz', test_data=np.array([[0, 1]]))
    with pytest.raises(ValueError, match='outside'):
        read_hyperedge_npz(str(tmp_path))
    np.savez(tmp_path / 'train_data.npz', train_data=np.array([[0, 1]]))
    with pytest.raises(ValueError, match="'nums_type'"):
        read_hyperedge_npz(str(tmp_path))


def test_planted_hypergraph_is_seeded_partite_and_split():
    data = planted_hypergraph((10, 6, 4), 200, seed=3)
    again = planted_hypergraph((10, 6, 4), 200, seed=3)
    assert torch.equal(data.train_hyperedges, again.train_hyperedges)
    both = torch.cat([data.train_hyperedges, data.test_hyperedges], 1)
    assert both.size(1) == torch.unique(both, dim=1).size(1)  # no repeats
    for t in range(3):  # slot t holds a node of type t
        assert (data.node_type[both[t]] == t).all()
    assert abs(data.test_hyperedges.size(1) - 0.2 * both.size(1)) <= 1
    with pytest.raises(ValueError, match="'nums_type'"):
        planted_hypergraph((5, ))
    with pytest.raises(ValueError, match="'p_in'"):
        planted_hypergraph(p_in=1.5)


def test_planted_communities_hold_the_hyperedges():
    def same_community(p_in):
        d = planted_hypergraph((40, 40, 40), 400, 4, p_in=p_in, seed=0)
        e = torch.cat([d.train_hyperedges, d.test_hyperedges], 1)
        c = d.community[e]
        return float(((c[0] == c[1]) & (c[1] == c[2])).float().mean())

    assert same_community(1.0) == 1.0
    assert same_community(0.0) < 0.2  # about 1/16 by chance
