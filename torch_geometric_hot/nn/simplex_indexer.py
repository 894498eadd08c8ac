r"""The indexer of Simplicial Path Sparse Attention."""
from typing import Optional, Tuple

import torch
from torch import Tensor
from torch.nn import Linear

from torch_geometric_hot.data.simplex_candidates import (csr, topk_pairs,
                                                         walk_simplices)
from torch_geometric_hot.ops.simplicial_attention import (
    indexer_dense_scores, indexer_pair_scores)
from torch_geometric_hot.validation import check_batch, check_features


class SimplexIndexer(torch.nn.Module):
    r"""Selects the tuples of *Simplicial Path Sparse Attention*
    (`Dussolle & Liò 2025 <https://arxiv.org/abs/2511.04624>`_, §2.3): a
    DeepSeek-Sparse-Attention-style indexer scores every pair of nodes of a
    graph,

    .. math::
        s_{ij} = \sum_{h=1}^{H_I} w_{ih}\,
        \mathrm{ReLU}(\langle q_{ih}, k_{jh} \rangle),

    with light projections :math:`q, k, w` of :math:`x`; every node keeps
    itself and its :math:`k - 1` best-scoring nodes of the same graph
    (:math:`k` clamped to the graph size), and the tuples are the paths
    :math:`q \to k_1 \to \dots \to k_N` along these pairs: :math:`n
    \min(k, n_g)^N` tuples.

    Gradient: the top-:math:`k` selection is not differentiable, so the
    indexer learns only through an auxiliary loss on :obj:`pair_score`
    (:func:`~torch_geometric_hot.ops.indexer_distillation_loss`, KL or MSE
    to the attention); without it the
    indexer keeps its initial (random) projections.

    Ties between scores are broken by :func:`torch.topk` (arbitrarily), so
    the selection is permutation equivariant only for tie-free scores.

    Args:
        in_channels (int): Node feature width.
        k (int, optional): Pairs per node, itself included. (default: 8)
        heads (int, optional): Indexer heads :math:`H_I`. (default: 4)
        head_channels (int, optional): Indexer width per head
            :math:`d_I`. (default: 16)

    Shapes:
        - **input:** :obj:`x [n, in_channels]`, :obj:`batch [n]` (sorted)
        - **output:** :obj:`simplex_index [N+1, T]`, :obj:`pair_index
          [2, P]` (sorted), :obj:`pair_score [P]`
    """
    def __init__(self, in_channels: int, k: int = 8, heads: int = 4,
                 head_channels: int = 16) -> None:
        super().__init__()
        if k < 1:
            raise ValueError(f"'k' must be an integer >= 1, got {k!r}")
        self.in_channels = in_channels
        self.k = k
        self.heads = heads
        self.head_channels = head_channels
        self.lin = Linear(in_channels, heads * (2 * head_channels + 1))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        self.lin.reset_parameters()

    def projections(self, x: Tensor) -> Tuple[Tensor, Tensor, Tensor]:
        r"""Indexer queries, keys :obj:`[n, H_I, d_I]` and head weights
        :obj:`[n, H_I]`."""
        h, d = self.heads, self.head_channels
        q, k, w = self.lin(x).split([h * d, h * d, h], dim=-1)
        return q.view(-1, h, d), k.view(-1, h, d), w

    def forward(self, x: Tensor, order: int,
                batch: Optional[Tensor] = None
                ) -> Tuple[Tensor, Tensor, Tensor]:
        r"""Returns :obj:`(simplex_index, pair_index, pair_score)`.

        Args:
            x (torch.Tensor): Node features :obj:`[n, in_channels]`.
            order (int): :math:`N`, the number of key slots.
            batch (torch.Tensor, optional): Sorted graph id per node.
        """
        check_features(x, self.in_channels, self.lin.weight.dtype)
        n = x.size(0)
        batch, _ = check_batch(batch, n, sorted=True, device=x.device)
        q, k, w = self.projections(x)
        if n == 0:
            empty = torch.empty(2, 0, dtype=torch.long, device=x.device)
            return (torch.empty(order + 1, 0, dtype=torch.long,
                                device=x.device), empty, w.new_zeros(0))
        with torch.no_grad():  # the selection has no gradient anyway
            scores, mask = indexer_dense_scores(q, k, w, batch)
            row, col = topk_pairs(scores, mask, self.k)
        node = torch.full((mask.numel(), ), -1, dtype=torch.long,
                          device=x.device)
        node[mask.flatten()] = torch.arange(n, device=x.device)
        rowptr, target = csr(torch.stack([node[row], node[col]]), n)
        source = torch.repeat_interleave(
            torch.arange(n, device=x.device), rowptr[1:] - rowptr[:-1])
        pair_index = torch.stack([source, target])  # sorted by (row, col)
        simplex_index = walk_simplices(pair_index, n, order)
        return simplex_index, pair_index, indexer_pair_scores(
            q, k, w, pair_index)

    def __repr__(self) -> str:
        return (f'{self.__class__.__name__}({self.in_channels}, k={self.k}, '
                f'heads={self.heads}, head_channels={self.head_channels})')
