import pytest
import torch
from torch_geometric.data import Batch, Data

from torch_geometric_hot.transforms import AddHyperedgeView


def test_all_triples_labelled_by_triangles_and_batched(device):
    # triangle 0-1-2 plus a pendant node 3
    edge_index = torch.tensor(
        [[0, 1, 1, 2, 2, 0, 2, 3], [1, 0, 2, 1, 0, 2, 3, 2]], device=device)
    data = AddHyperedgeView(3)(Data(edge_index=edge_index, num_nodes=4))
    assert data.hyperedge_index.shape == (3, 4)
    assert data.hyperedge_index.device == data.hyperedge_label.device == \
        edge_index.device
    positives = data.hyperedge_index[:, data.hyperedge_label == 1]
    assert positives.t().tolist() == [[0, 1, 2]]
    small = AddHyperedgeView(3)(Data(
        edge_index=torch.zeros(2, 0, dtype=torch.long, device=device),
        num_nodes=2))
    assert small.hyperedge_index.shape == (3, 0)
    batch = Batch.from_data_list([data, small, data])
    assert batch.hyperedge_index.shape == (3, 8)
    assert int(batch.hyperedge_index[:, 4:].min()) == 6  # node offset 4 + 2


def test_sampled_negatives_and_given_hyperedges(device):
    n = 30
    true = torch.tensor([[0, 1, 2], [3, 4, 5]], device=device).t()
    data = Data(edge_index=torch.zeros(2, 0, dtype=torch.long, device=device),
                num_nodes=n, hyperedges=true)
    out = AddHyperedgeView(3, max_candidates=100, num_negatives=5)(data)
    assert out.hyperedge_index.device == true.device
    assert out.hyperedge_index.size(1) == 2 + 10
    assert int(out.hyperedge_label.sum()) == 2
    cols = out.hyperedge_index.sort(dim=0)[0]
    assert (cols[1:] != cols[:-1]).all()
    assert repr(AddHyperedgeView(3)) == (
        "AddHyperedgeView(k=3, source='hyperedges', max_candidates=10000, "
        "num_negatives=5, seed=0)")
    with pytest.raises(ValueError, match="'hyperedges'"):
        AddHyperedgeView(3)(Data(edge_index=torch.zeros(2, 0,
                                                        dtype=torch.long),
                                 num_nodes=4, hyperedges=torch.zeros(
                                     2, 1, dtype=torch.long)))
    with pytest.raises(ValueError, match="'k'"):
        AddHyperedgeView(1)
