import pytest
import torch
from torch_geometric.data import Batch

from torch_geometric_hot.nn import SimplexIndexer
from torch_geometric_hot.testing import edge_case_graphs


@torch.no_grad()
def brute_force_pairs(indexer, x, batch, k):
    q, key, w = indexer.projections(x)
    pairs = set()
    for i in range(x.size(0)):
        same = (batch == batch[i]).nonzero().view(-1).tolist()
        score = {j: float((w[i] * (q[i] * key[j]).sum(-1).relu()).sum())
                 for j in same if j != i}
        best = sorted(score, key=score.get, reverse=True)[:k - 1]
        pairs |= {(i, j) for j in best + [i]}
    return sorted(pairs)


@pytest.mark.parametrize('k', [1, 2, 3, 50])
def test_pairs_are_the_top_k_and_tuples_their_paths(k, device):
    torch.manual_seed(0)
    indexer = SimplexIndexer(4, k=k, heads=3,
                             head_channels=5).double().to(device)
    with torch.no_grad():  # positive projections: tie-free scores
        indexer.lin.weight.abs_()
        indexer.lin.bias.abs_()
    batch = Batch.from_data_list(edge_case_graphs(4, device=device))
    x = batch.x.abs() + 0.1
    simplex_index, pair_index, pair_score = indexer(x, 2, batch.batch)
    assert sorted(map(tuple, pair_index.t().tolist())) == brute_force_pairs(
        indexer, x, batch.batch, k)
    assert pair_index.t().tolist() == sorted(pair_index.t().tolist())
    sizes = torch.bincount(batch.batch)
    kept = sizes.clamp(max=k)
    assert simplex_index.size(1) == int((sizes * kept**2).sum())
    pairs = set(map(tuple, pair_index.t().tolist()))
    for q, k1, k2 in simplex_index.t().tolist():
        assert (q, k1) in pairs and (k1, k2) in pairs
    q, key, w = indexer.projections(x)
    row, col = pair_index
    expected = (w[row] * (q[row] * key[col]).sum(-1).relu()).sum(-1)
    torch.testing.assert_close(pair_score, expected)


def test_bad_k_and_repr():
    with pytest.raises(ValueError, match="'k'"):
        SimplexIndexer(4, k=0)
    assert repr(SimplexIndexer(4)) == (
        'SimplexIndexer(4, k=8, heads=4, head_channels=16)')
