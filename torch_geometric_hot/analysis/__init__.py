r"""Tools that measure how smoothing a stack of layers is (`Dussolle & Liò
2025 <https://arxiv.org/abs/2511.04624>`_, §3): the rank-collapse residual
of the token matrix per layer, the Lipschitz upper bound of unmasked
N-simplicial attention (Theorem 3.7) and an empirical local Lipschitz
constant from Jacobian power iteration."""
from torch_geometric_hot.analysis.rank_collapse import (
    token_residual, layerwise_token_residual)
from torch_geometric_hot.analysis.lipschitz_bound import (
    simplicial_lipschitz_bound)
from torch_geometric_hot.analysis.local_lipschitz import local_lipschitz
from torch_geometric_hot.analysis.without_residual import WithoutResidual

__all__ = [
    'token_residual', 'layerwise_token_residual',
    'simplicial_lipschitz_bound', 'local_lipschitz', 'WithoutResidual'
]
