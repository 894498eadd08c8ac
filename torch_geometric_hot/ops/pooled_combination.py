r"""Kernel attention of one output part from its key pools to its classes
(DESIGN §5.2) as one operation: the summaries and readings of
:func:`~torch_geometric_hot.ops.kernel_attention.pool_readings`, then
:func:`~torch_geometric_hot.ops.class_combination.combine_classes`.

Natively, the two run as one autograd function, so that their backward
passes share the gradient buffers of the keys, values and queries: the
combination writes the query gradient and adds to the (zero-filled) key
and value gradients, then the readings add theirs. Two separate functions
would each zero-fill a key and a value gradient of their own, and autograd
would add them into a third. Otherwise it is the two functions in turn
(their torch paths are the oracles).

The values may be given as their projection (:class:`ValueProjection`):
natively, they are then computed into the operation's workspace, not
saved but computed again for the backward pass, and their gradient too
lives in the workspace, reduced to the gradients of the projection's input
and weight inside the operation. At 10^5 edges a layer's values and their
gradient are 140 MB each: fresh tensors that size arrive as untouched pages
on every pass (see :mod:`~torch_geometric_hot.ops.native.workspace`).
"""
from typing import NamedTuple, Optional, Sequence, Union

import torch
from torch import Tensor

from torch_geometric_hot.ops import native
from torch_geometric_hot.ops.class_combination import Term, \
    check_combination, combination_table, combine_classes, \
    native_combination, native_combination_backward
from torch_geometric_hot.ops.kernel_attention import Pool, Reading, \
    check_pool_readings, native_pool_readings, \
    native_pool_readings_backward, pool_readings, uses_native_pools


class ValueProjection(NamedTuple):
    r"""Values :obj:`[P, slots, H, D]` given as the projection
    :math:`x W^\top` of :obj:`x [P, C]` by :obj:`weight [slots * H * D, C]`
    (rows slot-major, then head)."""
    x: Tensor
    weight: Tensor
    heads: int
    head_channels: int

    @property
    def shape(self) -> torch.Size:
        r"""The shape of the values."""
        H, D = self.heads, self.head_channels
        return torch.Size((self.x.size(0), self.weight.size(0) // (H * D), H,
                           D))

    def values(self) -> Tensor:
        r"""The values, computed (differentiably)."""
        return torch.nn.functional.linear(self.x, self.weight).view(
            self.shape)

    def values_into(self, scratch: native.Scratch) -> Tensor:
        r"""The values, computed into :obj:`scratch` (no autograd)."""
        flat = scratch.empty((self.x.size(0), self.weight.size(0)),
                             self.x.dtype)
        return torch.mm(self.x, self.weight.t(), out=flat).view(self.shape)


#: Where :func:`native_combination`'s saved tensors hold the values.
_VALUES = 5


class _PooledCombination(torch.autograd.Function):
    # inputs after the constants: phi_k, phi_q, then the values or, with a
    # projection (heads, head_channels), its x and weight; then positions
    @staticmethod
    def forward(ctx, pools, reads, table, slots, nonempty, eps, projection,
                phi_k, phi_q, values, weight, *positions):
        ctx.projection = projection
        with native.workspace() as scratch:  # the readings: temporaries
            data = values if projection is None else ValueProjection(
                values, weight, *projection).values_into(scratch)
            readings, plan = native_pool_readings(phi_k, data, phi_q,
                                                  pools, reads, scratch)
            out, saved = native_combination(ctx, table, readings, phi_q,
                                            phi_k, positions, data, slots,
                                            nonempty, eps)
        ctx.plan, ctx.reads = plan._replace(summaries=[]), reads
        saved[_VALUES] = values  # the values, or the projection's input
        ctx.save_for_backward(weight, *saved, *plan.summaries)
        return out

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad):
        weight, *saved = ctx.saved_tensors
        split = len(saved) - len(ctx.plan.pools)  # then the summaries
        _, _, _, phi_q, phi_k, values = saved[:_VALUES + 1]
        need_k, need_q, need_v, need_w = ctx.needs_input_grad[7:11]
        need_x = need_v  # with a projection, its input is in the slot
        with native.workspace() as scratch:  # the readings' gradients too
            if ctx.projection is None:
                grad_v = torch.zeros_like(values) if need_v else None
            else:
                projection = ValueProjection(values, weight, *ctx.projection)
                values = saved[_VALUES] = projection.values_into(scratch)
                need_v = need_x or need_w
                grad_v = scratch.zeros(values.shape, values.dtype) \
                    if need_v else None
            grad_k = torch.zeros_like(phi_k) if need_k else None
            grad_q = phi_q.new_empty(phi_q.shape) if need_q else None
            n_r = len(ctx.reading_shapes)
            grad_readings = native_combination_backward(
                ctx, saved[:split], grad,
                [True] * n_r + [need_q, need_k, need_v],
                into=(grad_q, grad_k, grad_v), scratch=scratch)[:n_r]
            native_pool_readings_backward(
                ctx.plan._replace(summaries=saved[split:]), phi_k, values,
                phi_q, ctx.reads, grad_readings, grad_k, grad_v, grad_q,
                need_q, scratch)
            grad_w = None
            if ctx.projection is not None and grad_v is not None:
                flat = grad_v.view(values.size(0), -1)
                grad_w = flat.t() @ projection.x if need_w else None
                grad_v = flat @ weight if need_x else None
        return (None, ) * 7 + (grad_k, grad_q, grad_v, grad_w) + \
            (None, ) * (split - 6)


def _check_projection(projection: ValueProjection) -> None:
    x, weight = projection.x, projection.weight
    width = projection.heads * projection.head_channels
    if x.dim() != 2 or weight.dim() != 2 or weight.size(1) != x.size(1) \
            or width < 1 or weight.size(0) % width or weight.dtype != x.dtype:
        raise ValueError(f"a value projection needs 'x' [P, C] and 'weight' "
                         f"[slots * {width}, C] of one dtype, got "
                         f"{tuple(x.shape)} {x.dtype} and "
                         f"{tuple(weight.shape)} {weight.dtype}")


def pooled_combination(terms: Sequence[Sequence[Term]],
                       pools: Sequence[Pool], reads: Sequence[Reading],
                       phi_q: Tensor, phi_k: Tensor,
                       positions: Sequence[Tensor],
                       values: Union[Tensor, ValueProjection],
                       slots: Sequence[int], nonempty: Tensor,
                       eps: float = 1e-6) -> Tensor:
    r""":func:`~torch_geometric_hot.ops.class_combination.combine_classes`
    of the readings that
    :func:`~torch_geometric_hot.ops.kernel_attention.pool_readings` makes
    of :obj:`pools` and :obj:`reads`.

    Args:
        terms (list): Per class, its
            :class:`~torch_geometric_hot.ops.class_combination.Term` list
            (reading terms index :obj:`reads`).
        pools (list): The summaries (:class:`Pool`).
        reads (list): Their readings (:class:`Reading`).
        values (torch.Tensor or ValueProjection): The values
            :obj:`[P, slots, H, D]`, or their projection.
        phi_q, phi_k, positions, slots, nonempty, eps: As in
            :func:`~torch_geometric_hot.ops.class_combination.combine_classes`.

    :rtype: :class:`torch.Tensor` :obj:`[rows, classes, H, D]`
    """
    projection: Optional[ValueProjection] = None
    if isinstance(values, ValueProjection):
        _check_projection(values)
        projection, values = values, values.x
    if not uses_native_pools(phi_k, values, phi_q, pools, reads):
        if projection is not None:
            values = projection.values()
        return combine_classes(
            terms, pool_readings(phi_k, values, phi_q, pools, reads), phi_q,
            phi_k, positions, values, slots, nonempty, eps)
    shaped = values if projection is None else torch.empty(
        projection.shape, dtype=values.dtype, device='meta')
    check_pool_readings(phi_k, shaped, phi_q, pools, reads, True)
    D = shaped.size(-1)
    widths = [len(pools[r.pool].slots if r.slots is None else r.slots) * D +
              1 for r in reads]
    check_combination(terms, widths, phi_q, phi_k, positions, shaped, slots,
                      nonempty)
    return _PooledCombination.apply(
        tuple(pools), tuple(reads),
        combination_table(terms, nonempty.device), tuple(slots),
        nonempty.to(torch.uint8).contiguous(), eps,
        None if projection is None else (projection.heads,
                                         projection.head_channels),
        phi_k.contiguous(), phi_q.contiguous(), values.contiguous(),
        None if projection is None else projection.weight.contiguous(),
        *[p.contiguous() for p in positions])
