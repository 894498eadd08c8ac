r"""Kernel attention from the key pools to the classes of one or more
output parts (``docs/design.md``, "Kernel attention") as one operation:
the summaries and readings of
:func:`~torch_geometric_hot.ops.kernel_attention.pool_readings`, then per
part :func:`~torch_geometric_hot.ops.class_combination.combine_classes`.

Natively, these run as one autograd function, so that their backward
passes share the gradient buffers of the keys, values and queries: the
combinations write the query gradient and add to the (zero-filled) key
and value gradients, then the readings add theirs. Separate functions
would each zero-fill a key and a value gradient of their own, and autograd
would add them into a third. The parts share the pools too: the two parts
of a 2→2 layer (diagonal and off-diagonal entries) read the same row,
column and graph summaries, which are then built once, and the groups
read directly from their keys are visited once for the readings of both.
Otherwise it is the functions in turn (their torch paths are the oracles).

The values may be given as their projection (:class:`ValueProjection`):
natively, they are then computed into the operation's workspace, not
saved but computed again for the backward pass, and their gradient too
lives in the workspace, reduced to the gradients of the projection's input
and weight inside the operation. At 10^5 edges a layer's values and their
gradient are 140 MB each: fresh tensors that size arrive as untouched pages
on every pass (see :mod:`~torch_geometric_hot.ops.native.workspace`).
"""
from typing import Dict, List, NamedTuple, Optional, Sequence, Tuple, Union

import torch
from torch import Tensor

from torch_geometric_hot.ops import kernel_attention, native
from torch_geometric_hot.ops.class_combination import READING, Term, \
    check_combination, combination_table, combine_classes
from torch_geometric_hot.ops.kernel_attention import Pool, PoolPlan, \
    Reading, check_pool_readings, native_pool_readings, \
    native_pool_readings_backward, plan_pool_readings, pool_readings, \
    uses_native_pools


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


class CombinationPart(NamedTuple):
    r"""One output part of :func:`pooled_combination`: per class its
    :class:`~torch_geometric_hot.ops.class_combination.Term` list (reading
    terms index the operation's readings, which must read exactly the
    part's query rows), the single-key positions :obj:`[rows]`, per class
    its value slot, and :obj:`nonempty [rows, classes]`. The parts' query
    rows follow each other in order."""
    terms: Sequence[Sequence[Term]]
    positions: Sequence[Tensor]
    slots: Sequence[int]
    nonempty: Tensor


class _Layout(NamedTuple):
    # a part as the native operation sees it: its combination table, value
    # slots, query rows, readings (indices into the operation's) and
    # number of single-key positions
    table: native.CombinationTable
    slots: Tuple[int, ...]
    rows: slice
    readings: Tuple[int, ...]
    num_positions: int


def _part_tensors(layout: Sequence[_Layout],
                  tensors: Sequence[Tensor]) -> List[List[Tensor]]:
    # per part: nonempty, then its positions
    out, start = [], 0
    for part in layout:
        out.append(list(tensors[start:start + 1 + part.num_positions]))
        start += 1 + part.num_positions
    return out


class _PooledCombination(torch.autograd.Function):
    # inputs after the constants: phi_k, phi_q, then the values or, with a
    # projection (heads, head_channels), its x and weight; then per part
    # its nonempty mask and positions
    @staticmethod
    def forward(ctx, pools, reads, layout, plan, eps, projection, phi_k,
                phi_q, values, weight, *tensors):
        ctx.projection, ctx.layout, ctx.eps = projection, layout, eps
        with native.workspace() as scratch:  # the readings: temporaries
            data = values if projection is None else ValueProjection(
                values, weight, *projection).values_into(scratch)
            readings, plan = native_pool_readings(phi_k, data, phi_q,
                                                  pools, reads, scratch,
                                                  plan)
            results = [native.combine(
                part.table, [readings[r] for r in part.readings],
                phi_q[part.rows], phi_k, positions, data, part.slots,
                nonempty, eps) for part, (nonempty, *positions) in zip(
                    layout, _part_tensors(layout, tensors))]
        ctx.plan, ctx.reads = plan._replace(summaries=[]), reads
        ctx.reading_shapes = [r.shape for r in readings]
        # values: the values, or the projection's input
        ctx.save_for_backward(weight, phi_q, phi_k, values, *plan.summaries,
                              *[t for result in results for t in result],
                              *tensors)
        return tuple(out for out, _ in results)

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, *grads):
        weight, phi_q, phi_k, values, *saved = ctx.saved_tensors
        layout = ctx.layout
        summaries = saved[:len(ctx.plan.pools)]
        results = saved[len(summaries):len(summaries) + 2 * len(layout)]
        tensors = saved[len(summaries) + 2 * len(layout):]
        need_k, need_q, need_v, need_w = ctx.needs_input_grad[6:10]
        need_x = need_v  # with a projection, its input is in the slot
        with native.workspace() as scratch:  # the readings' gradients too
            if ctx.projection is None:
                grad_v = torch.zeros_like(values) if need_v else None
            else:
                projection = ValueProjection(values, weight, *ctx.projection)
                values = projection.values_into(scratch)
                need_v = need_x or need_w
                grad_v = scratch.zeros(values.shape, values.dtype) \
                    if need_v else None
            grad_k = torch.zeros_like(phi_k) if need_k else None
            grad_q = phi_q.new_empty(phi_q.shape) if need_q else None
            grad_readings: List[Optional[Tensor]] = [None] * len(ctx.reads)
            # each part writes its rows of the query gradient (the parts
            # cover them all) and adds to the key and value gradients (the
            # threads past the first to blocks shared by the parts)
            partials = native.Partials(
                [g for g in (grad_k, grad_v) if g is not None],
                lambda t: scratch.zeros(t.shape, t.dtype), per_thread=True)
            for p, (part, (nonempty, *positions)) in enumerate(zip(
                    layout, _part_tensors(layout, tensors))):
                n_r = len(part.readings)
                mine = native.combine_backward(
                    part.table, [ctx.reading_shapes[r]
                                 for r in part.readings],
                    phi_q[part.rows], phi_k, positions, values, part.slots,
                    nonempty, ctx.eps, results[2 * p], results[2 * p + 1],
                    grads[p], [True] * n_r + [need_q, need_k, need_v],
                    into=(None if grad_q is None else grad_q[part.rows],
                          grad_k, grad_v), scratch=scratch,
                    partials=partials)
                for r, grad in zip(part.readings, mine):
                    grad_readings[r] = grad
            partials.add()
            native_pool_readings_backward(
                ctx.plan._replace(summaries=summaries), phi_k, values,
                phi_q, ctx.reads, grad_readings, grad_k, grad_v, grad_q,
                scratch)
            grad_w = None
            if ctx.projection is not None and grad_v is not None:
                flat = grad_v.view(values.size(0), -1)
                # (x^T G)^T: 1.5x faster than G^T x for [10^5, 32] x and
                # [10^5, 320] G (14.8 against 22.1 ms, two threads)
                grad_w = (projection.x.t() @ flat).t() if need_w else None
                grad_v = flat @ weight if need_x else None
        return (None, ) * 6 + (grad_k, grad_q, grad_v, grad_w) + \
            (None, ) * len(tensors)


def _check_projection(projection: ValueProjection) -> None:
    x, weight = projection.x, projection.weight
    width = projection.heads * projection.head_channels
    if x.dim() != 2 or weight.dim() != 2 or weight.size(1) != x.size(1) \
            or width < 1 or weight.size(0) % width or weight.dtype != x.dtype:
        raise ValueError(f"a value projection needs 'x' [P, C] and 'weight' "
                         f"[slots * {width}, C] of one dtype, got "
                         f"{tuple(x.shape)} {x.dtype} and "
                         f"{tuple(weight.shape)} {weight.dtype}")


class _PartPlan(NamedTuple):
    # a part's query rows, the readings its terms read (indices into the
    # operation's), and its terms with those readings renumbered 0, 1, ...
    rows: slice
    readings: Tuple[int, ...]
    terms: List[List[Term]]


def _plan_parts(parts: Sequence[CombinationPart], reads: Sequence[Reading],
                rows: int) -> List[_PartPlan]:
    # checked: every reading a part reads covers exactly its rows, and the
    # parts cover the queries
    out, start = [], 0
    for part in parts:
        part_rows = slice(start, start + part.nonempty.size(0))
        start = part_rows.stop
        used = sorted({t.src for cls in part.terms for t in cls
                       if t.kind == READING})
        if any(not 0 <= r < len(reads) for r in used):
            raise IndexError(f'a reading term reads beyond the {len(reads)} '
                             f'readings')
        other = [r for r in used if reads[r].rows != part_rows]
        if other:
            raise ValueError(f'a part reads readings of its own query rows '
                             f'{part_rows.start}..{part_rows.stop}, but '
                             f'reading {other[0]} reads rows '
                             f'{reads[other[0]].rows.start}..'
                             f'{reads[other[0]].rows.stop}')
        local = {r: i for i, r in enumerate(used)}
        out.append(_PartPlan(part_rows, tuple(used), [
            [t._replace(src=local[t.src]) if t.kind == READING else t
             for t in cls] for cls in part.terms]))
    if start != rows:
        raise ValueError(f"the parts' rows ({start}) must be the query rows "
                         f"({rows})")
    return out


def pooled_combination(parts: Sequence[CombinationPart],
                       pools: Sequence[Pool], reads: Sequence[Reading],
                       phi_q: Tensor, phi_k: Tensor,
                       values: Union[Tensor, ValueProjection],
                       eps: float = 1e-6,
                       plans: Optional[Dict] = None) -> List[Tensor]:
    r""":func:`~torch_geometric_hot.ops.class_combination.combine_classes`
    of every part's classes, from the readings that
    :func:`~torch_geometric_hot.ops.kernel_attention.pool_readings` makes
    of :obj:`pools` and :obj:`reads`.

    Args:
        parts (list): The output parts (:class:`CombinationPart`), whose
            query rows follow each other in :obj:`phi_q`.
        pools (list): The summaries (:class:`Pool`).
        reads (list): Their readings (:class:`Reading`).
        phi_q (torch.Tensor): Mapped queries :obj:`[rows, H, r]`, the
            parts' rows one after the other.
        phi_k (torch.Tensor): Mapped keys :obj:`[inputs, H, r]`.
        values (torch.Tensor or ValueProjection): The values
            :obj:`[inputs, slots, H, D]`, or their projection.
        eps (float): Floor of the denominators.
        plans (dict, optional): Where to keep the index work of the native
            path (checks, visiting orders, direct groups) for later calls
            with the same parts, pools and readings, which then skip it: a
            dict of the caller's that sees no other parts, pools or
            readings.

    :rtype: list of :class:`torch.Tensor` :obj:`[rows, classes, H, D]`,
        one per part
    """
    projection: Optional[ValueProjection] = None
    if isinstance(values, ValueProjection):
        _check_projection(values)
        projection, values = values, values.x
    part_plans = _plan_parts(parts, reads, phi_q.size(0))
    if not uses_native_pools(phi_k, values, phi_q, pools, reads):
        if projection is not None:
            values = projection.values()
        readings = pool_readings(phi_k, values, phi_q, pools, reads)
        return [combine_classes(
            plan.terms, [readings[r] for r in plan.readings],
            phi_q[plan.rows], phi_k, part.positions, values, part.slots,
            part.nonempty, eps) for part, plan in zip(parts, part_plans)]
    shaped = values if projection is None else torch.empty(
        projection.shape, dtype=values.dtype, device='meta')
    key = (shaped.dtype, phi_q.shape, phi_k.shape, shaped.shape,
           kernel_attention.DIRECT_MAX_KEYS,
           kernel_attention.DIRECT_COST_RATIO)
    native_plan = None if plans is None else plans.get(key)
    if native_plan is None:
        native_plan = _native_plan(parts, part_plans, pools, reads, phi_q,
                                   phi_k, shaped)
        if plans is not None:
            plans[key] = native_plan
    layout, pool_plan = native_plan
    return list(_PooledCombination.apply(
        tuple(pools), tuple(reads), layout, pool_plan, eps,
        None if projection is None else (projection.heads,
                                         projection.head_channels),
        phi_k.contiguous(), phi_q.contiguous(), values.contiguous(),
        None if projection is None else projection.weight.contiguous(),
        *[t.contiguous() for part in parts for t in (
            part.nonempty.to(torch.uint8), *part.positions)]))


def _native_plan(parts: Sequence[CombinationPart],
                 part_plans: Sequence[_PartPlan], pools: Sequence[Pool],
                 reads: Sequence[Reading], phi_q: Tensor, phi_k: Tensor,
                 values: Tensor) -> Tuple[Tuple[_Layout, ...], PoolPlan]:
    # the index work of the native path: the checks of the positions and
    # slots it uses as offsets, the parts' layout and the pools' plan
    check_pool_readings(phi_k, values, phi_q, pools, reads, True)
    D = values.size(-1)
    widths = [len(pools[r.pool].slots if r.slots is None else r.slots) * D +
              1 for r in reads]
    for part, plan in zip(parts, part_plans):
        check_combination(plan.terms, [widths[r] for r in plan.readings],
                          phi_q[plan.rows], phi_k, part.positions, values,
                          part.slots, part.nonempty)
    layout = tuple(
        _Layout(combination_table(plan.terms, part.nonempty.device),
                tuple(part.slots), plan.rows, plan.readings,
                len(part.positions))
        for part, plan in zip(parts, part_plans))
    return layout, plan_pool_readings(pools, reads, values.dtype,
                                      values.size(2), phi_k.size(-1), D)
