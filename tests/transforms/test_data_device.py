import pytest
import torch
from torch_geometric.data import Data

from torch_geometric_hot.transforms import (AddHyperedgeView,
                                            AddLaplacianNodeId,
                                            AddOrthogonalNodeId,
                                            AddRandomNodeId,
                                            AddSecondOrderView,
                                            AddSimplexView)
from torch_geometric_hot.transforms.data_device import data_device, \
    edge_index_or_empty


def test_device_and_edges_of_a_graph(device):
    x = torch.randn(3, 2, device=device)
    assert data_device(Data(x=x)) == x.device
    assert data_device(Data(num_nodes=3)) == torch.device('cpu')
    edges = edge_index_or_empty(Data(x=x))
    assert edges.shape == (2, 0) and edges.dtype == torch.long
    assert edges.device == x.device
    edge_index = torch.tensor([[0], [1]], device=device)
    assert edge_index_or_empty(Data(x=x, edge_index=edge_index)) is \
        edge_index


TRANSFORMS = {  # fresh per graph: the seeded ones draw in sequence
    'AddSecondOrderView': lambda: AddSecondOrderView(pair_x=True),
    'AddLaplacianNodeId': lambda: AddLaplacianNodeId(2),
    'AddOrthogonalNodeId': lambda: AddOrthogonalNodeId(2, seed=0),
    'AddRandomNodeId': lambda: AddRandomNodeId(2, seed=0),
    'AddSimplexView neighbours': lambda: AddSimplexView(
        candidates='neighbours'),
    'AddSimplexView walks': lambda: AddSimplexView(candidates='walks'),
    'AddHyperedgeView': lambda: AddHyperedgeView(3, seed=0),
}


@pytest.mark.parametrize('name', list(TRANSFORMS))
def test_a_graph_without_edge_index_is_a_graph_without_edges(name, device):
    x = torch.randn(4, 2, device=device)
    without = TRANSFORMS[name]()(Data(x=x))
    edgeless = TRANSFORMS[name]()(Data(x=x, edge_index=torch.empty(
        2, 0, dtype=torch.long, device=device)))
    assert set(edgeless.keys()) - set(without.keys()) == {'edge_index'}
    for key in without.keys():
        assert torch.equal(without[key], edgeless[key]), key
