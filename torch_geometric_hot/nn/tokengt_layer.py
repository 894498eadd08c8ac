r"""One pre-LayerNorm Transformer block of TokenGT."""
from typing import Optional

import torch
import torch.nn.functional as F
from torch import Tensor
from torch.nn import LayerNorm, Linear

from torch_geometric_hot.nn.token_self_attention import TokenSelfAttention
from torch_geometric_hot.ops.attention.tokens import TokenLayout
from torch_geometric_hot.validation import check_batch, check_features


def drop_path(x: Tensor, p: float, training: bool, token_batch: Tensor,
              num_graphs: int) -> Tensor:
    r"""Stochastic depth per graph: the residual branch :obj:`x` of a whole
    graph is dropped with probability :obj:`p` (the others are rescaled by
    :math:`1/(1-p)`) during training."""
    if not training or p == 0.0:
        return x
    keep = torch.rand(num_graphs, device=x.device) >= p  # [B]
    scale = keep.to(x.dtype) / (1.0 - p)
    return x * scale[token_batch].unsqueeze(-1)


class TokenGTLayer(torch.nn.Module):
    r"""A pre-LayerNorm Transformer encoder block on graph tokens
    (`Kim et al. 2022 <https://arxiv.org/abs/2207.02505>`_, App. A.1):

    .. math::
        X &\leftarrow X + \mathrm{DropPath}(\mathrm{Dropout}(
        \mathrm{MSA}(\mathrm{LN}(X))))

        X &\leftarrow X + \mathrm{DropPath}(\mathrm{Dropout}(W_2\,
        \mathrm{Dropout}(\mathrm{GELU}(W_1 \mathrm{LN}(X)))))

    with :class:`TokenSelfAttention` restricted to each graph.

    Args:
        channels (int): Token width :math:`C`.
        heads (int, optional): Number of heads. (default: :obj:`1`)
        ffn_channels (int, optional): Hidden width of the feed-forward
            network. (default: :obj:`2 * channels`)
        dropout (float, optional): Dropout on the branches.
            (default: :obj:`0.`)
        drop_path (float, optional): Stochastic-depth probability per graph.
            (default: :obj:`0.`)
        **attention_kwargs: :obj:`attention`, :obj:`attention_dropout`,
            :obj:`num_features`, :obj:`redraw_interval`, :obj:`seed` of
            :class:`TokenSelfAttention`.

    Shapes:
        - **input:** tokens :math:`(T, C)`, token graph index :math:`(T)`
        - **output:** :math:`(T, C)`
    """
    def __init__(self, channels: int, heads: int = 1,
                 ffn_channels: Optional[int] = None, dropout: float = 0.0,
                 drop_path: float = 0.0, **attention_kwargs) -> None:
        super().__init__()
        if not 0.0 <= drop_path < 1.0:
            raise ValueError(f"'drop_path' must be in [0, 1), got "
                             f"{drop_path}")
        self.channels = channels
        self.dropout = dropout
        self.drop_path = drop_path
        ffn_channels = ffn_channels or 2 * channels
        self.attn_norm = LayerNorm(channels)
        self.attn = TokenSelfAttention(channels, heads, **attention_kwargs)
        self.ffn_norm = LayerNorm(channels)
        self.ffn_in = Linear(channels, ffn_channels)
        self.ffn_out = Linear(ffn_channels, channels)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        r"""Resets all learnable parameters."""
        for module in (self.attn_norm, self.attn, self.ffn_norm, self.ffn_in,
                       self.ffn_out):
            module.reset_parameters()

    def forward(self, x: Tensor, token_batch: Tensor, num_graphs: int,
                layout: Optional[TokenLayout] = None) -> Tensor:
        r"""Maps tokens :obj:`[T, C]` to :obj:`[T, C]`."""
        check_features(x, self.channels, self.attn_norm.weight.dtype)
        token_batch, num_graphs = check_batch(token_batch, x.size(0),
                                              num_graphs, 'token_batch')

        def branch(h: Tensor) -> Tensor:
            h = F.dropout(h, self.dropout, self.training)
            return drop_path(h, self.drop_path, self.training, token_batch,
                             num_graphs)

        x = x + branch(
            self.attn(self.attn_norm(x), token_batch, num_graphs, layout))
        h = F.gelu(self.ffn_in(self.ffn_norm(x)))
        h = self.ffn_out(F.dropout(h, self.dropout, self.training))
        return x + branch(h)

    def __repr__(self) -> str:
        return (f'{self.__class__.__name__}({self.channels}, '
                f'heads={self.attn.heads}, '
                f'attention={self.attn.attention!r})')
