r"""Ready models built from the layers: HOT graph, node, set-to-graph and
hyperedge models, the invariant MLP, TokenGT and GPS hybrids with HOT or
TokenGT attention."""
from torch_geometric_hot.models.invariant_mlp import InvariantMLP
from torch_geometric_hot.models.hot import (HOTModel, HOTGraphModel,
                                            HOTNodeModel, HOTSetToGraph,
                                            HOTHyperedgeModel)

__all__ = [
    'InvariantMLP', 'HOTModel', 'HOTGraphModel', 'HOTNodeModel',
    'HOTSetToGraph', 'HOTHyperedgeModel'
]
from torch_geometric_hot.models.tokengt import TokenGT

__all__ += ['TokenGT']
from torch_geometric_hot.models.hybrid_gps import HybridGPS

__all__ += ['HybridGPS']
