r"""Layers, called like PyG convs: equivariant linear layers, higher-order
attention (HOT), TokenGT blocks, GPS layers with either as the global
block, N-simplicial attention and encoders."""
from torch_geometric_hot.nn.equivariant_linear import EquivariantLinear
from torch_geometric_hot.nn.categorical_encoder import CategoricalEncoder
from torch_geometric_hot.nn.hot_conv import (HOTConv, HOTConv1to0, HOTConv1to1,
                                             HOTConv1to2, HOTConv1toK,
                                             HOTConv2to0, HOTConv2to1,
                                             HOTConv2to2)
from torch_geometric_hot.nn.hot_layer import HOTLayer, RowBatchNorm
from torch_geometric_hot.nn.hot_node_conv import HOTNodeConv
from torch_geometric_hot.nn.pair_encoder import PairEncoder

__all__ = [
    'EquivariantLinear', 'CategoricalEncoder', 'HOTConv', 'HOTConv1to0',
    'HOTConv1to1', 'HOTConv1to2', 'HOTConv1toK', 'HOTConv2to0',
    'HOTConv2to1', 'HOTConv2to2', 'HOTLayer', 'HOTNodeConv', 'PairEncoder',
    'RowBatchNorm'
]
from torch_geometric_hot.nn.simplicial_attention import SimplicialAttention
from torch_geometric_hot.nn.simplex_indexer import SimplexIndexer
from torch_geometric_hot.nn.expert_choice_router import ExpertChoiceRouter

__all__ += ['SimplicialAttention', 'SimplexIndexer', 'ExpertChoiceRouter']
from torch_geometric_hot.nn.token_self_attention import (AttentionWeights,
                                                         TokenSelfAttention)
from torch_geometric_hot.nn.attention_recorder import AttentionRecorder
from torch_geometric_hot.nn.tokengt_embedding import TokenGTEmbedding
from torch_geometric_hot.nn.tokengt_layer import TokenGTLayer
from torch_geometric_hot.nn.tokengt_encoder import (TokenGTEncoder,
                                                    TokenGTOutput)

__all__ += [
    'TokenSelfAttention', 'TokenGTEmbedding', 'TokenGTLayer',
    'TokenGTEncoder', 'TokenGTOutput', 'AttentionWeights', 'AttentionRecorder'
]
from torch_geometric_hot.nn.token_node_attention import TokenNodeAttention
from torch_geometric_hot.nn.hybrid_gps_conv import HybridGPSConv

__all__ += ['TokenNodeAttention', 'HybridGPSConv']
