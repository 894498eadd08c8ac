r"""Every entry's bias by its part (the diagonal or off the diagonal) as a
product, :math:`B = P b` with the entries' part indicator :math:`P`
:obj:`[entries, 2]` and the parts' biases :math:`b` :obj:`[2, C]`.

Where the layers add the bias in the same product as their weights
(:func:`torch.addmm`), a gather :obj:`bias[part]` would do as well
forward, but its backward pass is a zero fill and an ``index_add`` in
which every entry lands on one of two rows: on a GPU, two launches and
atomic additions that all contend for the same few addresses. The
product's backward pass is one product, :math:`P^\top \partial B`.
"""
import torch
from torch import Tensor


def part_indicator(off: Tensor) -> Tensor:
    r"""The part indicator :obj:`[entries, 2]` (float: the diagonal's
    column first) from whether each entry is off the diagonal
    :obj:`off` :obj:`[entries]` (bool)."""
    return torch.stack([~off, off], dim=1).float()


def part_bias(bias: Tensor, indicator: Tensor) -> Tensor:
    r"""Every entry's bias :obj:`[entries, C]`: its part's row of
    :obj:`bias` :obj:`[2, C]`, by the :func:`part_indicator`
    :obj:`indicator`."""
    return indicator.to(bias.dtype) @ bias
