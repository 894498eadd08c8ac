import pytest
import torch

from torch_geometric_hot.datasets import synthetic_chains


def test_chains_carry_their_label_on_one_terminal():
    chains = synthetic_chains(12, 6, seed=3)
    labels = {int(c.y[0]) for c in chains}
    assert labels == {0, 1}
    for c in chains:
        assert c.edge_index.size(1) == 2 * 5
        assert (c.y == c.y[0]).all()
        hot = c.x.sum(1).nonzero().view(-1).tolist()
        assert hot in ([0], [5])
        assert int(c.x[hot[0]].argmax()) == int(c.y[0])
    again = synthetic_chains(12, 6, seed=3)
    assert all(torch.equal(a.x, b.x) for a, b in zip(chains, again))
    single = synthetic_chains(1, 1)[0]
    assert single.edge_index.shape == (2, 0) and single.x.sum() == 1
    with pytest.raises(ValueError, match='num_nodes'):
        synthetic_chains(1, 0)
