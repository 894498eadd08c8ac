r"""nn."""
from torch_geometric_hot.nn.equivariant_linear import EquivariantLinear
from torch_geometric_hot.nn.categorical_encoder import CategoricalEncoder

__all__ = ['EquivariantLinear', 'CategoricalEncoder']
from torch_geometric_hot.nn.simplicial_attention import SimplicialAttention
from torch_geometric_hot.nn.simplex_indexer import SimplexIndexer
from torch_geometric_hot.nn.expert_choice_router import ExpertChoiceRouter

__all__ += ['SimplicialAttention', 'SimplexIndexer', 'ExpertChoiceRouter']
