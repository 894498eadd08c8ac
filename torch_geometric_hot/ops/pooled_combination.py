r"""Kernel attention from the key summaries to the classes of one or more
output parts (``docs/design.md``, "Kernel attention") as one operator,
``torch_geometric_hot::pooled_combination``: the summaries and readings of
:func:`~torch_geometric_hot.testing.pool_readings_reference`,
then per part the combination of
:func:`~torch_geometric_hot.ops.class_combination.torch_combine_classes`.
Its backward operator, ``torch_geometric_hot::pooled_combination_backward``,
is written by hand (plain autograd through the torch forward pass takes
1.6x its time on molecule batches, 3.2x on a graph of :math:`10^5` edges,
``benchmarks/torch_paths.py``). Where the native kernels apply (see
:mod:`torch_geometric_hot.ops.native`), both run as them:

* the backward pass shares the gradient buffers of the keys, values and
  queries: the combinations write the query gradient and add to the
  (zero-filled) key and value gradients, then the readings add theirs;
* the parts share the pools: the two parts of a 2→2 layer (diagonal and
  off-diagonal entries) read the same row, column and graph summaries,
  built once, and the groups read directly from their keys are visited
  once for the readings of both;
* values given as their projection (:class:`ValueProjection`) are computed
  into the operator's workspace, computed again for the backward pass,
  and their gradient, in the workspace too, is reduced to the gradients of
  the projection's input and weight inside the operator (fresh tensors of
  a layer's value size arrive as untouched pages on every pass, see
  :mod:`~torch_geometric_hot.ops.native.workspace`).

The operator's arguments are tensors, integers and lists of them: the
pools, readings and parts travel as one list of index tensors and one list
of integers (:func:`_encode`). Besides each part's classes, it returns
their denominators and the summaries, which its backward pass reads. The
native kernels' tables and visiting orders are kept in the plan cache of
those index tensors (:func:`~torch_geometric_hot.ops.plan_cache.plans_for`):
the layers that share a batch's indices, and their backward passes, build
them once.
"""
import itertools
from typing import List, NamedTuple, Optional, Sequence, Tuple, Union

import torch
from torch import Tensor

from torch_geometric_hot.ops import native
from torch_geometric_hot.ops.attention import dispatch
from torch_geometric_hot.ops.attention.dispatch import DirectReadings
from torch_geometric_hot.ops.class_combination import READING, \
    CombinationTerm, check_combination, combination_table, \
    torch_combine_classes, torch_combine_classes_backward
from torch_geometric_hot.ops.kernel_attention import SummaryKeys, PoolPlan, \
    Reading, TorchReadings, check_pool_readings, choose_direct, \
    native_pool_readings, native_pool_readings_backward, \
    plan_pool_readings, plan_torch_readings, torch_pool_readings, \
    torch_pool_readings_backward
from torch_geometric_hot.ops.layout_device import layout_device
from torch_geometric_hot.ops.plan_cache import plans_for


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
    :class:`~torch_geometric_hot.ops.class_combination.CombinationTerm`
    list (reading terms index the operation's readings, which must read
    exactly the part's query rows), the single-key positions
    :obj:`[rows]`, per class its value slot, and :obj:`nonempty [rows,
    classes]`. The parts' query rows follow each other in order."""
    terms: Sequence[Sequence[CombinationTerm]]
    positions: Sequence[Tensor]
    slots: Sequence[int]
    nonempty: Tensor


def _reads_of(part: CombinationPart) -> List[int]:
    # the readings a part's terms read
    return sorted({t.src for cls in part.terms for t in cls
                   if t.kind == READING})


def _rows_of(parts: Sequence[CombinationPart]) -> List[slice]:
    # the query rows of every part: they follow each other
    ends = list(itertools.accumulate((p.nonempty.size(0) for p in parts),
                                     initial=0))
    return [slice(a, b) for a, b in zip(ends, ends[1:])]


def _check_parts(parts: Sequence[CombinationPart], reads: Sequence[Reading],
                 rows: int) -> None:
    # every reading a part reads covers exactly its rows, and the parts
    # cover the queries
    part_rows = _rows_of(parts)
    for part, mine in zip(parts, part_rows):
        used = _reads_of(part)
        if any(not 0 <= r < len(reads) for r in used):
            raise IndexError(f'a reading term reads beyond the {len(reads)} '
                             f'readings')
        other = [r for r in used if reads[r].rows != mine]
        if other:
            raise ValueError(f'a part reads readings of its own query rows '
                             f'{mine.start}..{mine.stop}, but reading '
                             f'{other[0]} reads rows '
                             f'{reads[other[0]].rows.start}..'
                             f'{reads[other[0]].rows.stop}')
    total = part_rows[-1].stop if parts else 0
    if total != rows:
        raise ValueError(f"the parts' rows ({total}) must be the query rows "
                         f"({rows})")


def _encode(pools: Sequence[SummaryKeys], reads: Sequence[Reading],
            parts: Sequence[CombinationPart]
            ) -> Tuple[List[Tensor], List[int]]:
    r"""The operator's index tensors and integers: the pools' positions
    and groups, the readings' groups, then per part its nonempty mask and
    positions; the counts, then per pool its number of groups and slots,
    per reading its pool, first row and slots, per part its value slots
    and terms."""
    tensors = [p.position for p in pools] + [p.group for p in pools] + \
        [r.group for r in reads]
    ints = [len(pools), len(reads), len(parts)]
    for pool in pools:
        ints += [pool.num_groups, len(pool.slots), *pool.slots]
    for read in reads:
        slots = pools[read.pool].slots if read.slots is None else read.slots
        ints += [read.pool, read.start, len(slots), *slots]
    for part in parts:
        tensors += [part.nonempty, *part.positions]
        ints += [len(part.slots), *part.slots, len(part.positions)]
        for terms in part.terms:
            ints.append(len(terms))
            for t in terms:
                ints += [t.sign, t.kind, t.src, t.offset]
    return tensors, ints


def _decode(tensors: Sequence[Tensor], ints: Sequence[int]
            ) -> Tuple[List[SummaryKeys], List[Reading],
                       List[CombinationPart]]:
    r"""The inverse of :func:`_encode`."""
    it, tensor = iter(ints), iter(tensors)

    def take(n: int) -> Tuple[int, ...]:
        return tuple(next(it) for _ in range(n))

    num_pools, num_reads, num_parts = take(3)
    positions = [next(tensor) for _ in range(num_pools)]
    groups = [next(tensor) for _ in range(num_pools)]
    pools = []
    for position, group in zip(positions, groups):
        num_groups, n = take(2)
        pools.append(SummaryKeys(position, group, num_groups, take(n)))
    reads = []
    for group in [next(tensor) for _ in range(num_reads)]:
        pool, start, n = take(3)
        reads.append(Reading(pool, group, take(n), start))
    parts = []
    for _ in range(num_parts):
        nonempty = next(tensor)
        slots = take(next(it))
        part_positions = [next(tensor) for _ in range(next(it))]
        terms = [[CombinationTerm(*take(4)) for _ in range(next(it))]
                 for _ in slots]
        parts.append(CombinationPart(terms, part_positions, slots,
                                     nonempty.bool()))
    return pools, reads, parts


def _values(values: Tensor, weight: Optional[Tensor], heads: int,
            head_channels: int) -> Tensor:
    return values if weight is None else ValueProjection(
        values, weight, heads, head_channels).values()


def _torch_plan(index: Sequence[Tensor], structure: Sequence[int],
                pools: Sequence[SummaryKeys], reads: Sequence[Reading],
                R: int, D: int, direct: Sequence[float]) -> TorchReadings:
    # the torch implementation's index work, its groups read directly by
    # the DirectReadings (the operators' argument direct), kept with the
    # index tensors: the forward and backward passes, and the steps on the
    # same batch, make it once
    def build() -> TorchReadings:
        rule = DirectReadings(int(direct[0]), *direct[1:])
        return plan_torch_readings(pools, reads, choose_direct(
            pools, reads, R, D, rule.max_keys, rule.torch_cost_ratio), D)

    key = ('torch_readings', tuple(structure), R, D, tuple(direct))
    return plans_for(index).plan(key, build)


#: The implementations that may have made the summaries a backward pass
#: reads, each with its own limit and cost ratio for the groups it reads
#: directly (:func:`~torch_geometric_hot.ops.kernel_attention.\
#: choose_direct`). Either writes the summaries of the other groups,
#: renumbered, to the first rows; the others are not written.
TORCH, NATIVE = 0, 1


@torch.library.custom_op('torch_geometric_hot::pooled_combination',
                         mutates_args=())
def _pooled_combination(phi_k: Tensor, phi_q: Tensor, values: Tensor,
                        weight: Optional[Tensor], index: List[Tensor],
                        structure: List[int], heads: int, head_channels: int,
                        eps: float, direct: List[float]) -> List[Tensor]:
    # per part its classes, then per part their denominators, then per pool
    # its summaries, then which implementation made them (TORCH or NATIVE);
    # values: the values or, with a weight, the input of their projection;
    # direct: the DirectReadings
    pools, reads, parts = _decode(index, structure)
    buffers = _summary_buffers(phi_q, pools, head_channels)
    if not _native_applies(phi_k, phi_q, values, weight, pools, reads):
        values = _values(values, weight, heads, head_channels)
        readings = torch_pool_readings(
            phi_k, values, phi_q, pools, reads, _torch_plan(
                index, structure, pools, reads, phi_k.size(-1),
                head_channels, direct),
            buffers)
        results = [torch_combine_classes(
            part.terms, readings, phi_q[rows], phi_k, part.positions, values,
            part.slots, part.nonempty, eps, with_denominators=True)
            for part, rows in zip(parts, _rows_of(parts))]
        made_by = TORCH
    else:
        phi_k, phi_q, values, projection, tables, plan = _native_inputs(
            phi_k, phi_q, values, weight, pools, reads, parts, index,
            structure, heads, head_channels, direct)
        with native.workspace() as scratch:  # the readings: temporaries
            data = values if projection is None else \
                projection.values_into(scratch)
            readings, _ = native_pool_readings(plan, phi_k, data, phi_q,
                                               reads, scratch, buffers)
            results = [native.combine(
                table, readings, phi_q[rows], phi_k,
                [p.contiguous() for p in part.positions], data, part.slots,
                part.nonempty.to(torch.uint8).contiguous(), eps)
                for table, part, rows in zip(tables, parts, _rows_of(parts))]
        made_by = NATIVE
    return [out for out, _ in results] + [den for _, den in results] + \
        buffers + [torch.full((1, ), made_by, dtype=torch.long,
                              device=phi_q.device)]


@_pooled_combination.register_fake
def _(phi_k, phi_q, values, weight, index, structure, heads, head_channels,
      eps, direct):
    pools, _, parts = _decode(index, structure)
    H, D = phi_q.size(1), head_channels
    outs = [phi_q.new_empty(p.nonempty.size(0), p.nonempty.size(1), H, D)
            for p in parts]
    dens = [phi_q.new_empty(p.nonempty.size(0), p.nonempty.size(1), H)
            for p in parts]
    return outs + dens + _summary_buffers(phi_q, pools, D) + [
        phi_q.new_empty(1, dtype=torch.long)]


def _summary_buffers(phi_q: Tensor, pools: Sequence[SummaryKeys],
                     D: int) -> List[Tensor]:
    # per pool [groups, H, R, C], uninitialised
    H, R = phi_q.size(1), phi_q.size(2)
    return [phi_q.new_empty(p.num_groups, H, R, len(p.slots) * D + 1)
            for p in pools]


def _native_applies(phi_k, phi_q, values, weight, pools, reads) -> bool:
    return all(t.dtype == torch.long for t in
               [*(p.group for p in pools), *(r.group for r in reads)]) and \
        native.applies(phi_k, phi_q, values,
                       *([] if weight is None else [weight]))


def _native_inputs(phi_k, phi_q, values, weight, pools, reads, parts, index,
                   structure, heads, head_channels, direct):
    r"""The contiguous inputs, the value projection (or :obj:`None`) and
    the native tables and plan of one call, forward or backward: its index
    work, kept with the operator's index tensors (the checks of the
    positions and slots the kernels use as offsets, the parts' combination
    tables and the pools' plan)."""
    phi_k, phi_q, values = (phi_k.contiguous(), phi_q.contiguous(),
                            values.contiguous())
    projection = None if weight is None else ValueProjection(
        values, weight.contiguous(), heads, head_channels)
    shape = values.shape if projection is None else projection.shape

    def build() -> Tuple[List, PoolPlan]:
        values = torch.empty(shape, dtype=phi_k.dtype, device='meta')
        check_pool_readings(phi_k, values, phi_q, pools, reads, True)
        widths = [len(r.slots) * shape[-1] + 1 for r in reads]
        tables = []
        for part, rows in zip(parts, _rows_of(parts)):
            check_combination(part.terms, widths, phi_q[rows], phi_k,
                              part.positions, values,
                              part.slots, part.nonempty)
            tables.append(combination_table(part.terms,
                                            part.nonempty.device))
        return tables, plan_pool_readings(
            pools, reads, phi_k.dtype, shape[2], phi_k.size(-1), shape[-1],
            DirectReadings(int(direct[0]), *direct[1:]))

    key = ('native_combination', tuple(structure), phi_k.dtype, phi_q.shape,
           phi_k.shape, shape, tuple(direct))
    tables, plan = plans_for(index).plan(key, build)
    return phi_k, phi_q, values, projection, tables, plan


@torch.library.custom_op('torch_geometric_hot::pooled_combination_backward',
                         mutates_args=())
def _pooled_combination_backward(
        grads: List[Tensor], outs: List[Tensor], dens: List[Tensor],
        summaries: List[Tensor], made_by: Tensor, phi_k: Tensor,
        phi_q: Tensor, values: Tensor, weight: Optional[Tensor],
        index: List[Tensor], structure: List[int], heads: int,
        head_channels: int, eps: float, direct: List[float],
        needs: List[bool]) -> List[Tensor]:
    # the gradients of phi_k, phi_q, values (or the projection's input)
    # and the weight (when there is one); [0]-shaped where not needed; each
    # implementation reads the summaries of its own forward pass (the
    # native one whatever the native mode is by now)
    pools, reads, parts = _decode(index, structure)
    if phi_q.device.type == 'cpu' and int(made_by) == NATIVE:
        phi_k, phi_q, values, projection, tables, plan = _native_inputs(
            phi_k, phi_q, values, weight, pools, reads, parts, index,
            structure, heads, head_channels, direct)
        return _native_backward(
            grads, outs, dens, [s[:n] for s, n in zip(
                summaries, plan.summary_groups)], phi_k, phi_q, values,
            projection, parts, tables, plan, reads, eps, needs)
    return _torch_backward(grads, outs, dens, summaries, phi_k, phi_q, values,
                           weight, index, structure, pools, reads, parts,
                           heads, head_channels, eps, direct, needs)


@_pooled_combination_backward.register_fake
def _(grads, outs, dens, summaries, made_by, phi_k, phi_q, values, weight,
      index, structure, heads, head_channels, eps, direct, needs):
    inputs = [phi_k, phi_q, values] + ([] if weight is None else [weight])
    return [torch.empty_like(t) if need else t.new_empty(0)
            for t, need in zip(inputs, needs)]


def _torch_backward(grads, outs, dens, summaries, phi_k, phi_q, x, weight,
                    index, structure, pools, reads, parts, heads,
                    head_channels, eps, direct, needs) -> List[Tensor]:
    # the adjoint of the torch forward pass, step by step in reverse (the
    # summaries those it wrote)
    values = _values(x, weight, heads, head_channels)
    D = values.size(-1)
    grad_k, grad_q = phi_k.new_zeros(phi_k.shape), phi_q.new_zeros(
        phi_q.shape)
    grad_v = values.new_zeros(values.shape)
    widths = [len(r.slots) * D + 1 for r in reads]
    grad_readings = [None] * len(reads)
    for part, rows, out, den, grad in zip(parts, _rows_of(parts), outs, dens,
                                          grads):
        mine = torch_combine_classes_backward(
            part.terms, widths, phi_q[rows], phi_k, part.positions, values,
            part.slots, part.nonempty, eps, out, den, grad, grad_q[rows],
            grad_k, grad_v)
        for r, g in mine.items():
            grad_readings[r] = g
    grad_readings = [phi_q.new_zeros(r.group.numel(), phi_q.size(1), w)
                     if g is None else g
                     for r, w, g in zip(reads, widths, grad_readings)]
    torch_pool_readings_backward(
        phi_k, values, phi_q, pools, reads,
        _torch_plan(index, structure, pools, reads, phi_k.size(-1), D,
                    direct),
        summaries, grad_readings, grad_k, grad_v, grad_q)
    if weight is None:
        result = [grad_k, grad_q, grad_v]
    else:
        flat = grad_v.view(x.size(0), -1)
        result = [grad_k, grad_q, flat @ weight, flat.t() @ x]
    return [g if need else g.new_empty(0) for g, need in zip(result, needs)]


def _native_backward(grads, outs, dens, summaries, phi_k, phi_q, values,
                     projection, parts, tables, plan, reads, eps,
                     needs) -> List[Tensor]:
    need_k, need_q, need_v = needs[:3]
    need_w = projection is not None and needs[3]
    need_x = need_v  # with a projection, its input is in the slot
    with native.workspace() as scratch:  # the readings' gradients too
        if projection is None:
            grad_v = torch.zeros_like(values) if need_v else None
        else:
            values = projection.values_into(scratch)
            need_v = need_x or need_w
            grad_v = scratch.zeros(values.shape, values.dtype) \
                if need_v else None
        grad_k = torch.zeros_like(phi_k) if need_k else None
        grad_q = phi_q.new_empty(phi_q.shape) if need_q else None
        grad_readings: List[Optional[Tensor]] = [None] * len(reads)
        shapes = [(r.group.numel(), phi_q.size(1),
                   len(r.slots) * values.size(-1) + 1) for r in reads]
        # each part writes its rows of the query gradient (the parts cover
        # them all) and adds to the key and value gradients (the threads
        # past the first to blocks shared by the parts)
        partials = native.Partials(
            [g for g in (grad_k, grad_v) if g is not None],
            lambda t: scratch.zeros(t.shape, t.dtype), per_thread=True)
        for part, rows, table, out, den, grad in zip(
                parts, _rows_of(parts), tables, outs, dens, grads):
            used = _reads_of(part)
            mine = native.combine_backward(
                table, shapes, phi_q[rows], phi_k,
                [p.contiguous() for p in part.positions], values,
                part.slots, part.nonempty.to(torch.uint8).contiguous(), eps,
                out, den, grad, [r in used for r in range(len(reads))],
                (None if grad_q is None else grad_q[rows], grad_k, grad_v),
                scratch, partials)
            for r in used:
                grad_readings[r] = mine[r]
        partials.add()
        native_pool_readings_backward(
            plan, list(summaries), phi_k, values, phi_q, reads,
            grad_readings, grad_k, grad_v, grad_q, scratch)
        grad_w = None
        if projection is not None and grad_v is not None:
            flat = grad_v.view(values.size(0), -1)
            # (x^T G)^T: faster than G^T x for tall x and G
            grad_w = (projection.x.t() @ flat).t().contiguous() \
                if need_w else None
            grad_v = flat @ projection.weight if need_x else None
    result = [grad_k, grad_q, grad_v] + ([] if projection is None
                                         else [grad_w])
    return [phi_k.new_empty(0) if g is None else g for g in result]


def _setup_context(ctx, inputs, output) -> None:
    phi_k, phi_q, values, weight, index, structure, heads, head_channels, \
        eps, direct = inputs
    num_parts = structure[2]
    ctx.set_materialize_grads(False)
    ctx.constants = (len(index), structure, heads, head_channels, eps,
                     direct, num_parts, weight is None)
    ctx.save_for_backward(phi_k, phi_q, values, weight, *index, *output)


def _backward(ctx, grads):
    num_index, structure, heads, head_channels, eps, direct, num_parts, \
        no_weight = ctx.constants
    phi_k, phi_q, values, weight, *saved = ctx.saved_tensors
    index, output = saved[:num_index], saved[num_index:]
    outs, dens = output[:num_parts], output[num_parts:2 * num_parts]
    summaries, made_by = output[2 * num_parts:-1], output[-1]
    grads = [torch.zeros_like(out) if g is None else g.contiguous()
             for out, g in zip(outs, grads[:num_parts])]
    needs = list(ctx.needs_input_grad[:3]) + \
        ([] if no_weight else [ctx.needs_input_grad[3]])
    result = _pooled_combination_backward(
        grads, list(outs), list(dens), list(summaries), made_by, phi_k,
        phi_q, values, weight, list(index), structure, heads, head_channels,
        eps, direct, needs)
    result = [g if need else None for g, need in zip(result, needs)]
    return (*result[:3], result[3] if len(result) > 3 else None,
            [None] * num_index, None, None, None, None, None)


_pooled_combination.register_autograd(_backward,
                                      setup_context=_setup_context)


def _check_projection(projection: ValueProjection) -> None:
    x, weight = projection.x, projection.weight
    width = projection.heads * projection.head_channels
    if x.dim() != 2 or weight.dim() != 2 or weight.size(1) != x.size(1) \
            or width < 1 or weight.size(0) % width or weight.dtype != x.dtype:
        raise ValueError(f"a value projection needs 'x' [P, C] and 'weight' "
                         f"[slots * {width}, C] of one dtype, got "
                         f"{tuple(x.shape)} {x.dtype} and "
                         f"{tuple(weight.shape)} {weight.dtype}")


def pooled_combination(parts: Sequence[CombinationPart],
                       pools: Sequence[SummaryKeys], reads: Sequence[Reading],
                       phi_q: Tensor, phi_k: Tensor,
                       values: Union[Tensor, ValueProjection],
                       eps: float = 1e-6,
                       direct: Optional[DirectReadings] = None
                       ) -> List[Tensor]:
    r"""The combination
    (:func:`~torch_geometric_hot.ops.class_combination.torch_combine_classes`)
    of every part's classes, from the readings of :obj:`pools` at
    :obj:`reads` (:func:`~torch_geometric_hot.testing.pool_readings_reference`
    computes them alone),
    as the operator ``torch_geometric_hot::pooled_combination``.

    Args:
        parts (list): The output parts (:class:`CombinationPart`), whose
            query rows follow each other in :obj:`phi_q`.
        pools (list): The summaries (:class:`SummaryKeys`).
        reads (list): Their readings (:class:`Reading`).
        phi_q (torch.Tensor): Mapped queries :obj:`[rows, H, r]`, the
            parts' rows one after the other.
        phi_k (torch.Tensor): Mapped keys :obj:`[inputs, H, r]`.
        values (torch.Tensor or ValueProjection): The values
            :obj:`[inputs, slots, H, D]`, or their projection.
        eps (float): Floor of the denominators.
        direct (DirectReadings, optional): The key groups read straight
            from their keys (default: the one of
            :func:`~torch_geometric_hot.ops.attention.dispatch.use_path`,
            else the rule's for the layout's device: ``direct_readings``
            of :mod:`~torch_geometric_hot.ops.attention.dispatch`).

    :rtype: list of :class:`torch.Tensor` :obj:`[rows, classes, H, D]`,
        one per part
    """
    weight, heads, head_channels = None, phi_q.size(1), values.shape[-1]
    if isinstance(values, ValueProjection):
        _check_projection(values)
        weight, heads = values.weight, values.heads
        values = values.x
    elif values.dim() != 4:
        raise ValueError(f"'values' must be [inputs, slots, H, D], got "
                         f"{tuple(values.shape)}")
    _check_parts(parts, reads, phi_q.size(0))
    check_pool_readings(phi_k, torch.empty(
        (values.size(0), 1, phi_k.size(1), 1), device='meta'), phi_q, pools,
        reads, False)
    index, structure = _encode(pools, reads, parts)
    if direct is None:
        direct = dispatch.direct_readings(layout_device(phi_q))
    out = _pooled_combination(phi_k, phi_q, values, weight, index, structure,
                              heads, head_channels, eps,
                              [float(x) for x in direct])
    return out[:len(parts)]
