r"""Gathers of rows whose backward pass is a gather too.

The backward pass of :obj:`x.index_select(0, index)` is a scatter: a zero
fill of :obj:`x`'s shape and an :obj:`index_add` (on a GPU two launches,
and atomic additions). Where every row of :obj:`x` is read by one
position of :obj:`index` at most, apart from positions whose gradient is
known to be zero (the padding of a packed block, which reads some row and
is masked out or dropped after), the gradient of row :math:`r` is the
gradient at the one position :math:`p(r)` that reads it, and the backward
pass is one gather, :obj:`grad.index_select(0, inverse)`, with no fill
and no atomics:

.. math::
    \bar{x}_r = \bar{y}_{p(r)}.

:func:`inverse_index` makes :math:`p` once per batch (a plan, where the
loader's workers make plans: it reads the index's values), and
:func:`gather_rows` takes it.
"""
from typing import Optional

import torch
from torch import Tensor


def inverse_index(index: Tensor, taken: Tensor,
                  num_rows: int) -> Optional[Tensor]:
    r"""The position of :obj:`index` that reads each of :obj:`num_rows`
    rows, for :func:`gather_rows`: among the positions :obj:`taken`, the
    one that reads it, and for a row that none reads, a position outside
    :obj:`taken` (its gradient is zero). :obj:`None` where that does not
    exist: a row read twice by positions of :obj:`taken`, or a row read by
    none of them and no position outside them. It reads the values of
    :obj:`index` (a device synchronisation, on a GPU).

    Args:
        index (torch.Tensor): The rows that each position reads :obj:`[M]`.
        taken (torch.Tensor): The positions whose gradient may be nonzero
            :obj:`[M]` (bool).
        num_rows (int): The rows gathered from.

    :rtype: :class:`torch.Tensor` :obj:`[num_rows]` (of :obj:`index`'s
        dtype) or :obj:`None`
    """
    count = index.numel()
    # padding positions write a spare row; a row read twice covers fewer
    # rows than there are taken positions
    target = torch.where(taken, index.long(), num_rows)
    inverse = torch.full((num_rows + 1, ), -1, device=index.device,
                         dtype=index.dtype)
    inverse.index_copy_(0, target, torch.arange(
        count, device=index.device, dtype=index.dtype))
    spare, inverse = inverse[num_rows], inverse[:num_rows]
    read = inverse >= 0
    if int(read.sum()) != int(taken.sum()):
        return None
    if not bool(read.all()):
        if spare < 0:
            return None
        inverse = inverse.masked_fill(~read, spare)
    return inverse


class _GatherRows(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: Tensor, index: Tensor, inverse: Tensor) -> Tensor:
        ctx.save_for_backward(inverse)
        return x.index_select(0, index)

    @staticmethod
    def backward(ctx, grad: Tensor):
        inverse, = ctx.saved_tensors
        return grad.index_select(0, inverse), None, None


def gather_rows(x: Tensor, index: Tensor,
                inverse: Optional[Tensor] = None) -> Tensor:
    r""":obj:`x.index_select(0, index)`, whose backward pass is the gather
    :obj:`grad.index_select(0, inverse)` where :obj:`inverse`
    (:func:`inverse_index`) is given: the caller guarantees a zero
    gradient at every position that :obj:`inverse_index` was told is not
    taken."""
    if inverse is None:
        return x.index_select(0, index)
    return _GatherRows.apply(x, index, inverse)
