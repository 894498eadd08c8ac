r"""Tools that measure how smoothing a stack of layers is (`Dussolle & Liò
2025 <https://arxiv.org/abs/2511.04624>`_, §3): the rank-collapse residual
of the token matrix per layer, the Lipschitz upper bound of unmasked
N-simplicial attention (Theorem 3.7) and an empirical local Lipschitz
constant from Jacobian power iteration; and how far TokenGT's heads
attend on the graph, in hops (`Kim et al. 2022
<https://arxiv.org/abs/2207.02505>`_)."""
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
from torch_geometric_hot.analysis.attention_distance import (
    hop_distances, mean_attention_distance, plot_attention_distance,
    token_endpoints)

__all__ += ['hop_distances', 'mean_attention_distance',
            'plot_attention_distance', 'token_endpoints']
