r"""Multi-head self-attention over the tokens of a batch of graphs."""
from typing import NamedTuple, Optional, Tuple

import torch
from torch import Tensor
from torch.nn import Linear

from torch_geometric_hot.ops.feature_maps import FeatureMap
from torch_geometric_hot.ops.attention.tokens import (
    TokenLayout, grouped_linear_attention, per_graph_softmax_attention)
from torch_geometric_hot.ops.scatter import scatter_sum
from torch_geometric_hot.ops.softmax import grouped_softmax
from torch_geometric_hot.validation import check_batch, check_features

ATTENTIONS = ('softmax', 'performer')


class AttentionWeights(NamedTuple):
    r"""Per-head attention weights of every token over the tokens of its
    graph.

    Attributes:
        index (torch.Tensor): :obj:`[2, P]` (query token, key token), every
            ordered pair of tokens of one graph (:math:`P = \sum_g L_g^2`),
            grouped by query.
        weight (torch.Tensor): :obj:`[P, H]` the weight
            :math:`\alpha^h_{ts}` of each pair and head; the weights of a
            query sum to one per head.
    """
    index: Tensor
    weight: Tensor


def same_graph_pairs(token_batch: Tensor, num_graphs: int) -> Tensor:
    r"""Every ordered pair of tokens of one graph, :obj:`[2, P]` (query,
    key), grouped by query in token order, keys in token order."""
    order = torch.sort(token_batch, stable=True)[1]
    counts = torch.bincount(token_batch, minlength=num_graphs)
    first = torch.cumsum(counts, 0) - counts
    per_query = counts[token_batch]
    query = torch.repeat_interleave(
        torch.arange(token_batch.numel(), device=token_batch.device),
        per_query)
    offset = torch.arange(query.numel(), device=query.device) - \
        torch.repeat_interleave(torch.cumsum(per_query, 0) - per_query,
                                per_query)
    key = order[first[token_batch[query]] + offset]
    return torch.stack([query, key])


class TokenSelfAttention(torch.nn.Module):
    r"""Multi-head self-attention in which every token attends to the tokens
    of its own graph only (the MSA of TokenGT,
    `Kim et al. 2022 <https://arxiv.org/abs/2207.02505>`_):

    .. math::
        \mathrm{MSA}(X)_t = W_O \Big\Vert_{h=1}^{H} \sum_{s : g(s) = g(t)}
        \alpha^h_{ts} W_V^h x_s, \qquad
        \alpha^h_{ts} \propto \kappa(W_Q^h x_t, W_K^h x_s)

    with :math:`\kappa(q, k) = \exp(q^\top k / \sqrt{d})` (``'softmax'``,
    exact, through fused
    :func:`~torch.nn.functional.scaled_dot_product_attention` on per-graph
    blocks) or its Performer FAVOR+ estimate
    :math:`\phi(q)^\top \phi(k)` (``'performer'``, linear in the number of
    tokens, computed on the flat token list with per-graph sums).

    Args:
        channels (int): Token width :math:`C`.
        heads (int, optional): Number of heads :math:`H` (must divide
            :obj:`channels`). (default: :obj:`1`)
        attention (str, optional): ``'softmax'`` or ``'performer'``.
            (default: ``'softmax'``)
        attention_dropout (float, optional): Dropout on the softmax weights
            (training only; ignored by ``'performer'``). (default: :obj:`0.`)
        num_features (int, optional): Performer random features :math:`r`
            (default: :math:`\lceil d \ln d \rceil`).
        redraw_interval (int, optional): Redraw the Performer projection
            every this many training forward passes. (default: :obj:`None`)
        seed (int, optional): Seed of the Performer projection.
            (default: :obj:`None`)

    Shapes:
        - **input:** tokens :math:`(T, C)`, token graph index :math:`(T)`
        - **output:** :math:`(T, C)`
    """
    def __init__(self, channels: int, heads: int = 1,
                 attention: str = 'softmax', attention_dropout: float = 0.0,
                 num_features: Optional[int] = None,
                 redraw_interval: Optional[int] = None,
                 seed: Optional[int] = None) -> None:
        super().__init__()
        if attention not in ATTENTIONS:
            raise ValueError(f"'attention' must be one of {ATTENTIONS}, got "
                             f"{attention!r}")
        if heads < 1 or channels % heads != 0:
            raise ValueError(f"'heads' ({heads}) must be positive and divide "
                             f"'channels' ({channels})")
        self.channels = channels
        self.heads = heads
        self.attention = attention
        self.attention_dropout = attention_dropout
        self.qkv = Linear(channels, 3 * channels)
        self.out = Linear(channels, channels)
        self.feature_map = None
        if attention == 'performer':
            self.feature_map = FeatureMap(channels // heads, 'favor+',
                                          num_features, redraw_interval,
                                          seed)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        r"""Resets all learnable parameters."""
        self.qkv.reset_parameters()
        self.out.reset_parameters()

    def redraw_projection(self) -> None:
        r"""Draws new Performer random features (no-op for softmax)."""
        if self.feature_map is not None:
            self.feature_map.redraw_projection()

    def forward(self, x: Tensor, token_batch: Tensor, num_graphs: int,
                layout: Optional[TokenLayout] = None) -> Tensor:
        r"""
        Args:
            x (torch.Tensor): Tokens, shape :obj:`[T, C]`.
            token_batch (torch.Tensor): Graph of every token, :obj:`[T]`.
            num_graphs (int): Number of graphs.
            layout (optional): The tokens' layout, as
                ``ops.attention.tokens.token_layout`` returns it, reused
                across layers (softmax only).
        """
        check_features(x, self.channels, self.qkv.weight.dtype)
        token_batch, num_graphs = check_batch(token_batch, x.size(0),
                                              num_graphs, 'token_batch')
        q, k, v = self._qkv(x)  # 3 x [T, H, d]
        if self.feature_map is None:
            p = self.attention_dropout if self.training else 0.0
            out = per_graph_softmax_attention(q, k, v, token_batch,
                                              num_graphs, p, layout)
        else:
            self.feature_map.step()
            k_feat, q_feat = self.feature_map.keys_and_queries(
                k, q, token_batch, num_graphs)
            out = grouped_linear_attention(q_feat, k_feat, v, token_batch,
                                           num_graphs)
        return self.out(out.reshape(x.size(0), self.channels))

    @torch.no_grad()
    def attention_weights(self, x: Tensor, token_batch: Tensor,
                          num_graphs: int) -> AttentionWeights:
        r"""The weights :math:`\alpha^h_{ts}` that :meth:`forward` applies
        to the same input, for every pair of tokens of one graph and every
        head: :math:`\mathrm{softmax}_s(q_t^\top k_s / \sqrt{d})` for
        ``'softmax'`` (before attention dropout), and
        :math:`\phi(q_t)^\top \phi(k_s) / \sum_{s'} \phi(q_t)^\top
        \phi(k_{s'})` for ``'performer'`` (the current projection).
        Computed apart from :meth:`forward`, which never forms them: for
        analysis (see :class:`~torch_geometric_hot.nn.AttentionRecorder`),
        :math:`O(\sum_g L_g^2)` memory.

        Args:
            x (torch.Tensor): Tokens, shape :obj:`[T, C]` (the input of
                :meth:`forward`).
            token_batch (torch.Tensor): Graph of every token, :obj:`[T]`.
            num_graphs (int): Number of graphs.
        """
        check_features(x, self.channels, self.qkv.weight.dtype)
        token_batch, num_graphs = check_batch(token_batch, x.size(0),
                                              num_graphs, 'token_batch')
        q, k, _ = self._qkv(x)
        index = same_graph_pairs(token_batch, num_graphs)
        query, key = index
        if self.feature_map is None:
            logits = (q[query] * k[key]).sum(-1) * q.size(-1)**-0.5
            weight = grouped_softmax(logits, query, x.size(0))
        else:
            q_feat = self.feature_map(q, is_query=True)
            k_feat = self.feature_map(k, is_query=False, group=token_batch,
                                      num_groups=num_graphs)
            scores = (q_feat[query] * k_feat[key]).sum(-1)
            weight = scores / scatter_sum(scores, query, x.size(0))[query]
        return AttentionWeights(index, weight)

    def _qkv(self, x: Tensor) -> Tuple[Tensor, Tensor, Tensor]:
        return self.qkv(x).view(x.size(0), 3, self.heads,
                                self.channels // self.heads).unbind(dim=1)

    def __repr__(self) -> str:
        return (f'{self.__class__.__name__}({self.channels}, '
                f'heads={self.heads}, attention={self.attention!r})')
