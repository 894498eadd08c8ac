r"""Expert-choice token routing per graph."""
import math
from typing import Optional, Tuple

import torch
from torch import Tensor
from torch.nn import Linear

from torch_geometric_hot.ops.scatter import segment_counts
from torch_geometric_hot.validation import check_batch, check_features

GATES = ('sigmoid', 'identity')


def top_fraction_per_graph(score: Tensor, batch: Tensor,
                           capacity: float) -> Tensor:
    r"""Indices (sorted) of the :math:`\lceil \mathrm{capacity} \cdot n_g
    \rceil` highest-scoring nodes of every graph (at least one node of every
    non-empty graph). Ties are broken by node order.

    Args:
        score (torch.Tensor): Scores :obj:`[n]`.
        batch (torch.Tensor): Graph id of every node :obj:`[n]`.
        capacity (float): Fraction of each graph's nodes, in :math:`(0, 1]`.
    """
    n = score.numel()
    # Host synchronisation: the number of graphs sizes the per-graph quotas.
    num_graphs = int(batch.max()) + 1 if n else 0
    sizes = segment_counts(batch, num_graphs)
    quota = torch.ceil(sizes.double() * capacity).long().clamp(min=1)
    by_score = torch.argsort(score.detach(), descending=True, stable=True)
    order = by_score[torch.argsort(batch[by_score], stable=True)]
    start = torch.cumsum(sizes, 0) - sizes
    rank = torch.arange(n, device=score.device) - start[batch[order]]
    return order[rank < quota[batch[order]]].sort().values


class ExpertChoiceRouter(torch.nn.Module):
    r"""Expert-choice routing (`Dussolle & Liò 2025
    <https://arxiv.org/abs/2511.04624>`_, §2.3, after Raposo et al. 2024):
    in every graph the top :math:`K = \lceil \mathrm{capacity} \cdot n_g
    \rceil` nodes by :math:`s_i = \langle x_i, w \rangle` are updated,

    .. math::
        x_i' = \begin{cases} x_i + g(s_i)\, f(x)_i & i \in
        \mathrm{TopK}_g(s) \\ x_i & \text{otherwise,} \end{cases}

    where :math:`f` is computed on the selected nodes only. The gate
    :math:`g(s_i)` multiplies the update, so :math:`w` receives a gradient.
    The paper uses :math:`g(s) = s` (``gate='identity'``); the default
    ``'sigmoid'`` keeps the update scale bounded.

    Args:
        in_channels (int): Node feature width.
        capacity (float, optional): Fraction of each graph's nodes that is
            routed, in :math:`(0, 1]`. (default: :obj:`0.5`)
        gate (str, optional): ``'sigmoid'`` or ``'identity'``.
            (default: ``'sigmoid'``)

    Shapes:
        - **input:** :obj:`x [n, in_channels]`, :obj:`batch [n]`
        - **output:** :obj:`index [K_total]` (sorted), :obj:`gate [K_total]`
    """
    def __init__(self, in_channels: int, capacity: float = 0.5,
                 gate: str = 'sigmoid') -> None:
        super().__init__()
        if not 0.0 < capacity <= 1.0 or math.isnan(capacity):
            raise ValueError(f"'capacity' must lie in (0, 1], got "
                             f"{capacity!r}")
        if gate not in GATES:
            raise ValueError(f"'gate' must be one of {GATES}, got {gate!r}")
        self.in_channels = in_channels
        self.capacity = capacity
        self.gate = gate
        self.lin = Linear(in_channels, 1, bias=False)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        self.lin.reset_parameters()

    def forward(self, x: Tensor,
                batch: Optional[Tensor] = None) -> Tuple[Tensor, Tensor]:
        r"""Returns the routed nodes and their gates
        :math:`g(s_i)` (differentiable)."""
        check_features(x, self.in_channels, self.lin.weight.dtype)
        batch, _ = check_batch(batch, x.size(0), device=x.device)
        score = self.lin(x).squeeze(-1)  # [n]
        index = top_fraction_per_graph(score, batch, self.capacity)
        gate = score.index_select(0, index)
        return index, gate.sigmoid() if self.gate == 'sigmoid' else gate

    @staticmethod
    def combine(x: Tensor, index: Tensor, gate: Tensor,
                update: Tensor) -> Tensor:
        r""":math:`x` with :math:`g(s_i) \cdot \mathrm{update}_i` added to
        the routed rows :obj:`index` (:obj:`update [K_total, C]`), in the
        dtype of :obj:`x` (under autocast the update may be narrower)."""
        return x.index_add(0, index, (gate.unsqueeze(-1) * update).to(
            x.dtype))

    def __repr__(self) -> str:
        return (f'{self.__class__.__name__}({self.in_channels}, '
                f'capacity={self.capacity}, gate={self.gate!r})')
