import pytest
import torch
from torch_geometric.data import Batch

from torch_geometric_hot.data import walk_simplices
from torch_geometric_hot.nn import SimplicialAttention
from torch_geometric_hot.testing import edge_case_graphs
from torch_geometric_hot.transforms.add_simplex_view import AddSimplexView


@pytest.mark.parametrize('candidates', ['dense', 'neighbours', 'walks'])
def test_batched_view_equals_the_layer_generator(candidates, device):
    transform = AddSimplexView(order=2, candidates=candidates)
    graphs = [transform(g) for g in edge_case_graphs(8, device=device)]
    assert all(g.simplex_index.device == g.x.device for g in graphs)
    batch = Batch.from_data_list(graphs)
    torch.manual_seed(0)
    conv = SimplicialAttention(8, heads=2, order=2,
                               candidates=candidates).double().to(device)
    expected = conv(batch.x, batch.edge_index, batch.batch)
    given = conv(batch.x, batch=batch.batch,
                 simplex_index=batch.simplex_index)
    torch.testing.assert_close(given, expected)
    if candidates == 'walks':
        assert torch.equal(batch.simplex_index,
                           walk_simplices(batch.edge_index, batch.num_nodes,
                                          2))


def test_repr_and_bad_candidates():
    assert repr(AddSimplexView(3, 'neighbours', True)) == (
        "AddSimplexView(order=3, candidates='neighbours', include_self=True)")
    with pytest.raises(ValueError, match="'candidates'"):
        AddSimplexView(candidates='indexer')
