import pytest
import torch
from torch.nn import Linear
from torch_geometric.nn import GINEConv

from torch_geometric_hot.models import (HOTGraphModel, HOTHyperedgeModel,
                                        HOTModel, HOTNodeModel,
                                        HOTSetToGraph, HybridGPS,
                                        InvariantMLP, TokenGT)
from torch_geometric_hot.nn import (CategoricalEncoder, EquivariantLinear,
                                    ExpertChoiceRouter, HOTConv, HOTConv1to0,
                                    HOTConv1to1, HOTConv1to2, HOTConv1toK,
                                    HOTConv2to0, HOTConv2to1, HOTConv2to2,
                                    HOTLayer, HOTNodeConv, HybridGPSConv,
                                    PairEncoder,
                                    SimplexIndexer, SimplicialAttention,
                                    TokenGTEmbedding, TokenGTEncoder,
                                    TokenGTLayer, TokenNodeAttention,
                                    TokenSelfAttention)

# every public layer and model (with the submodules its options add), as
# PyG users call reset_parameters() to re-initialise a model in place
MODULES = {
    'EquivariantLinear': lambda: EquivariantLinear(8, 8, 2, 2),
    'CategoricalEncoder': lambda: CategoricalEncoder([3, 4], 8),
    'HOTConv softmax': lambda: HOTConv(8, 8, 2, 2, heads=2),
    'HOTConv kernel': lambda: HOTConv(8, 8, 2, 2, heads=2,
                                      attention='kernel'),
    'HOTConv1to0': lambda: HOTConv1to0(8, 8),
    'HOTConv1to1': lambda: HOTConv1to1(8, 8),
    'HOTConv1to2': lambda: HOTConv1to2(8, 8),
    'HOTConv1toK': lambda: HOTConv1toK(8, 8, k=3),
    'HOTConv2to0': lambda: HOTConv2to0(8, 8),
    'HOTConv2to1': lambda: HOTConv2to1(8, 8),
    'HOTConv2to2': lambda: HOTConv2to2(8, 8),
    'HOTLayer 2->2': lambda: HOTLayer(8, 2, 2, heads=2),
    'HOTLayer 2->1': lambda: HOTLayer(8, 2, 1),
    'HOTNodeConv': lambda: HOTNodeConv(8, 8, heads=2, edge_dim=3),
    'PairEncoder': lambda: PairEncoder(8, Linear(3, 8), Linear(2, 8)),
    'SimplicialAttention': lambda: SimplicialAttention(8, heads=2),
    'SimplicialAttention indexer, router': lambda: SimplicialAttention(
        8, heads=2, candidates='indexer', capacity=0.5),
    'SimplexIndexer': lambda: SimplexIndexer(8),
    'ExpertChoiceRouter': lambda: ExpertChoiceRouter(8),
    'TokenSelfAttention softmax': lambda: TokenSelfAttention(8, heads=2),
    'TokenSelfAttention performer': lambda: TokenSelfAttention(
        8, heads=2, attention='performer'),
    'TokenGTEmbedding': lambda: TokenGTEmbedding(8, 8, edge_dim=3),
    'TokenGTLayer': lambda: TokenGTLayer(8, heads=2),
    'TokenGTEncoder': lambda: TokenGTEncoder(8, 8, 2, heads=2, edge_dim=3,
                                             seb=True),
    'InvariantMLP': lambda: InvariantMLP(8, 1, node_encoder=Linear(3, 8),
                                         edge_encoder=Linear(2, 8)),
    'HOTModel': lambda: HOTModel(8, 1, 2, 0, num_layers=2, head_layers=1),
    'HOTGraphModel': lambda: HOTGraphModel(
        8, 1, num_layers=2, node_encoder=Linear(3, 8),
        edge_encoder=Linear(2, 8)),
    'HOTNodeModel': lambda: HOTNodeModel(8, 2, num_layers=1),
    'HOTSetToGraph': lambda: HOTSetToGraph(8, 1, num_layers=1),
    'HOTHyperedgeModel': lambda: HOTHyperedgeModel(8, 1, k=3,
                                                   num_layers=1),
    'TokenGT': lambda: TokenGT(3, 8, 1, 2, node_encoder=Linear(3, 8),
                               edge_encoder=Linear(2, 8)),
    'TokenNodeAttention': lambda: TokenNodeAttention(8, 8, heads=2,
                                                     edge_dim=3),
    'HybridGPSConv': lambda: HybridGPSConv(
        8, GINEConv(Linear(8, 8), train_eps=True),
        TokenNodeAttention(8, 8, heads=2, edge_dim=8)),
    'HybridGPS hot': lambda: HybridGPS(
        8, 1, num_layers=2, heads=2, node_encoder=Linear(3, 8),
        edge_encoder=Linear(2, 8)),
    'HybridGPS tokengt': lambda: HybridGPS(8, 1, num_layers=1,
                                           global_block='tokengt',
                                           in_channels=3, edge_dim=2),
}


@pytest.mark.parametrize('name', list(MODULES))
def test_reset_parameters_reinitialises_every_parameter(name):
    torch.manual_seed(0)
    module = MODULES[name]()
    fresh = {key: p.detach().clone() for key, p in module.named_parameters()}
    assert fresh, f'{name} has no parameters'
    with torch.no_grad():  # a value no initialisation gives
        for p in module.parameters():
            p.fill_(7.0)
    module.reset_parameters()
    for key, p in module.named_parameters():
        assert not bool((p == 7.0).any()), f'{name}: {key} was not reset'
        # the same kind of values as at construction: constants (norms,
        # zero biases) the same constants, random draws random again, of
        # the same scale
        init = fresh[key]
        if init.numel() > 1 and bool((init == init.flatten()[0]).all()):
            assert torch.equal(p, init), key
        elif init.numel() >= 32:
            ratio = float(p.std() / init.std())
            assert 1 / 3 < ratio < 3, (key, ratio)
