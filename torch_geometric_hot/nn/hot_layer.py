from typing import Optional

import torch
from torch import Tensor

from torch_geometric_hot.nn.equivariant_linear import EquivariantLinear
from torch_geometric_hot.nn.hot_conv import HOTConv
from torch_geometric_hot.validation import check_features, \
    on_checked_features

NORMS = ('layer', 'batch')


class RowBatchNorm(torch.nn.BatchNorm1d):
    r"""Batch normalisation of every channel over the rows of a batch
    (:class:`torch.nn.BatchNorm1d` on :obj:`[rows, channels]`), which falls
    back to the running statistics for a training batch of one row (a
    batch of one graph at order 0), where batch statistics do not exist.
    With a :obj:`momentum` (the default), the batch counter
    :obj:`num_batches_tracked`, which only the cumulative average
    (:obj:`momentum=None`) reads, is not advanced: one kernel less per
    training step.

    Args:
        num_features (int): Channels.
        **kwargs: Further :class:`torch.nn.BatchNorm1d` arguments.

    Shapes:
        - **input:** :math:`(R, F)`
        - **output:** :math:`(R, F)`
    """
    def forward(self, x: Tensor) -> Tensor:
        if self.training and x.size(0) <= 1:
            return torch.nn.functional.batch_norm(
                x, self.running_mean, self.running_var, self.weight,
                self.bias, False, 0.0, self.eps)
        if self.training and self.track_running_stats and \
                self.momentum is not None and x.dim() == 2:
            return torch.nn.functional.batch_norm(
                x, self.running_mean, self.running_var, self.weight,
                self.bias, True, self.momentum, self.eps)
        return super().forward(x)


def norm_layer(norm: str, channels: int) -> torch.nn.Module:
    r"""The normalisation :obj:`norm` (``'layer'`` or ``'batch'``) of
    :obj:`channels` channels: :class:`torch.nn.LayerNorm` over the channels
    of every row, or :class:`RowBatchNorm` over the rows of the batch."""
    if norm not in NORMS:
        raise ValueError(f"'norm' must be one of {NORMS}, got {norm!r}")
    return torch.nn.LayerNorm(channels) if norm == 'layer' else \
        RowBatchNorm(channels)


class HOTLayer(torch.nn.Module):
    r"""The higher-order Transformer encoder block
    :math:`\mathrm{Enc}_{k \to l}` of `HOT
    <https://arxiv.org/abs/2110.14416>`_ (Eq. 8--9, App. A.2.1) with
    pre-layer normalisation:

    .. math::
        \mathbf{H} &= [\mathbf{A} +]\, \mathrm{Attn}_{k \to l}
        (\mathrm{LN}(\mathbf{A}))

        \mathrm{Enc}(\mathbf{A}) &= \mathbf{H} + L_2(\mathrm{GELU}(
        L_1(\mathrm{LN}(\mathbf{H}))))

    where :math:`L_1, L_2` are light (pointwise) :math:`l \to l` linear
    layers (HOT §4.1; plain linear layers for :math:`l \ne 2`), the residual
    around the attention exists when :math:`k = l` (and
    :obj:`residual=True`), and dropout follows the attention and both
    feed-forward layers. :math:`\mathrm{LN}` is layer normalisation (as in
    HOT) or, with :obj:`norm='batch'`, batch normalisation of every channel
    over all rows of the batch (every pair entry of every graph), as
    GraphGPS normalises its blocks on molecules. Layer norm keeps what all
    rows share, batch norm takes it out: on small molecule sets the
    differences between molecules, a small part of every row at
    initialisation, are fitted faster. Both are permutation equivariant;
    batch norm makes a training step depend on the batch (in evaluation it
    applies its running statistics, row by row).

    Args:
        channels (int): Width :math:`d` (input and output).
        in_order (int): Input order :math:`k`.
        out_order (int): Output order :math:`l`.
        heads (int, optional): Attention heads. (default: :obj:`1`)
        residual (bool, optional): Residual around the attention when the
            orders match. (default: :obj:`True`)
        dropout (float, optional): Dropout rate. (default: :obj:`0.0`)
        ffn_channels (int, optional): Hidden width of the feed-forward
            layers (default: :obj:`channels`, as in HOT).
        norm (str, optional): ``'layer'`` (layer norm, as in HOT) or
            ``'batch'`` (:class:`RowBatchNorm`). (default: ``'layer'``)
        **kwargs: Further :class:`HOTConv` arguments (``attention``,
            ``kernel``, ``classes``, ``head_channels``, ...).

    Shapes:
        as :class:`HOTConv`, with :math:`F_{in} = F_{out} = d`.
    """
    def __init__(self, channels: int, in_order: int, out_order: int,
                 heads: int = 1, residual: bool = True, dropout: float = 0.0,
                 ffn_channels: Optional[int] = None, norm: str = 'layer',
                 **kwargs) -> None:
        super().__init__()
        self.norm = norm
        self.channels = channels
        self.in_order, self.out_order = in_order, out_order
        self.residual = residual and in_order == out_order
        ffn_channels = ffn_channels or channels
        self.norm_attn = norm_layer(norm, channels)
        self.attn = HOTConv(channels, channels, in_order, out_order, heads,
                            dropout=dropout, **kwargs)
        self.norm_ffn = norm_layer(norm, channels)
        if out_order == 2:
            self.ffn_in = EquivariantLinear(channels, ffn_channels, 2, 2,
                                            'light')
            self.ffn_out = EquivariantLinear(ffn_channels, channels, 2, 2,
                                             'light')
        else:
            self.ffn_in = torch.nn.Linear(channels, ffn_channels)
            self.ffn_out = torch.nn.Linear(ffn_channels, channels)
        self.dropout = torch.nn.Dropout(dropout)

    def reset_parameters(self) -> None:
        for module in (self.norm_attn, self.attn, self.norm_ffn, self.ffn_in,
                       self.ffn_out):
            module.reset_parameters()

    def _ffn(self, layer, h: Tensor, view) -> Tensor:
        return layer(h, view) if self.out_order == 2 else layer(h)

    def forward(self, x: Tensor, view=None,
                hyperedge_index: Optional[Tensor] = None) -> Tensor:
        check_features(x, self.channels, self.norm_attn.weight.dtype)
        return on_checked_features(self._forward, x, view, hyperedge_index)

    def _forward(self, x: Tensor, view,
                 hyperedge_index: Optional[Tensor]) -> Tensor:
        h = self.dropout(self.attn(self.norm_attn(x), view, hyperedge_index))
        if self.residual:
            h = x + h
        f = self._ffn(self.ffn_in, self.norm_ffn(h), view)
        f = self._ffn(self.ffn_out, self.dropout(
            torch.nn.functional.gelu(f)), view)
        return h + self.dropout(f)

    def redraw_projection(self) -> None:
        self.attn.redraw_projection()

    def __repr__(self) -> str:
        norm = f', norm={self.norm!r}' if self.norm != 'layer' else ''
        return (f'{self.__class__.__name__}({self.channels}, order='
                f'{self.in_order}->{self.out_order}, heads={self.attn.heads},'
                f' attention={self.attn.attention!r}, '
                f'residual={self.residual}{norm})')
