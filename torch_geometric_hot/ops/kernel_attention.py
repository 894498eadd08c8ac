r"""The two sparse primitives of kernel (linear) attention, each the
other's adjoint, as :func:`torch.library.custom_op` operators
(``torch_geometric_hot::segment_outer_sum`` and
``torch_geometric_hot::gather_contract``, with their backward operators):

* :func:`segment_outer_sum`: per-group key--value summaries
  :math:`S_g = \sum_{e : g(e) = g} \phi(k_e) v_e^\top`;
* :func:`gather_contract`: every query read against its group's summary,
  :math:`o_e = \phi(q_e)^\top S_{g(e)}`.

Their torch implementation serves every device and works in chunks, so
that no :obj:`[rows, heads, features, channels]` tensor is ever held for
the whole input (on the CPU chunks that stay in cache, elsewhere as large
as memory allows: few launches). On CPU (float32/float64) the native kernels of
:mod:`torch_geometric_hot.ops.native` implement them when those build and
are switched on: each pass visits the rows group by group, and each
backward is one fused pass.

The pools and readings of kernel attention (:class:`SummaryKeys`,
:class:`Reading`, their oracle
:func:`~torch_geometric_hot.testing.pool_readings_reference`) live here
too, with groups of few keys read straight from their keys
(``docs/design.md``, "Kernel attention").
"""
from typing import Dict, List, NamedTuple, Optional, Sequence, Tuple

import torch
from torch import Tensor

from torch_geometric_hot.ops import native
from torch_geometric_hot.ops.attention.dispatch import DirectReadings
from torch_geometric_hot.ops.layout_device import layout_device
from torch_geometric_hot.ops.row_selection import device_index, select_rows
from torch_geometric_hot.ops.scatter import group_pairs

#: Elements of the largest temporary a chunk may create on the CPU (small
#: enough to stay in cache between the product and the reduction that
#: reads it).
CHUNK_ELEMENTS = 1 << 18
#: The same on other devices (GPUs), where each chunk's operations are
#: kernel launches: a bound on memory alone.
LAUNCH_BOUND_CHUNK_ELEMENTS = 1 << 26


def _chunk_rows(rows: int, per_row: int, like: Tensor) -> int:
    # rows per chunk for the layout of like's device (layout_device)
    limit = CHUNK_ELEMENTS if layout_device(like) == 'cpu' else \
        LAUNCH_BOUND_CHUNK_ELEMENTS
    return max(1, min(rows, limit // max(per_row, 1)))


def _row_chunks(rows: int, per_row: int, *tensors: Tensor):
    # the tensors' rows in chunks (_chunk_rows), the tensors themselves when
    # one chunk holds them all (no slicing)
    step = _chunk_rows(rows, per_row, tensors[0])
    if step >= rows:
        yield tensors
        return
    for start in range(0, rows, step):
        yield tuple(t[start:start + step] for t in tensors)


def _outer_sum(k: Tensor, v: Tensor, index: Tensor, num_groups: int) -> Tensor:
    # k [E, H, R], v [E, H, C] -> [G, H, R, C]
    E, H, R = k.shape
    C = v.size(-1)
    if num_groups == 1:  # one group: a batched matmul over heads
        return torch.bmm(k.permute(1, 2, 0).contiguous(),
                         v.transpose(0, 1).contiguous()).unsqueeze(0)
    # flat [e, H*R*C] rows: see ops.scatter.scatter_sum
    out = k.new_zeros(num_groups, H * R * C)
    for k_c, v_c, index_c in _row_chunks(E, H * R * C, k, v, index):
        outer = k_c.unsqueeze(-1) * v_c.unsqueeze(-2)
        out.index_add_(0, index_c, outer.view(-1, H * R * C))
    return out.view(num_groups, H, R, C)


def _contract(q: Tensor, summary: Tensor, index: Tensor) -> Tensor:
    # q [E, H, R], summary [G, H, R, C] -> [E, H, C]
    E, H, R = q.shape
    C = summary.size(-1)
    if summary.size(0) == 1:
        return torch.einsum('ehr,hrc->ehc', q, summary[0])
    # Row (e, h) is a weighted bag of the R summary rows (g(e), h, :) of a
    # flat [G*H*R, C] table: embedding_bag gathers and sums them in one
    # pass, without a [e, H, R, C] copy of the summary rows. The bags of
    # row e are the table rows g(e) * H * R + [0, H * R).
    table = summary.reshape(-1, C)
    bags = index.view(-1, 1) * (H * R) + torch.arange(H * R,
                                                      device=q.device)
    chunks = [torch.nn.functional.embedding_bag(
        bags_c.view(-1, R), table, mode='sum',
        per_sample_weights=q_c.reshape(-1, R))
        for bags_c, q_c in _row_chunks(E, H * R, bags, q)]
    out = chunks[0] if len(chunks) == 1 else torch.cat(chunks)
    return out.view(E, H, C)


def _all_columns(v: Tensor) -> Tensor:
    return torch.arange(v.size(-1), device=v.device)


def _native_runs(index: Tensor, num_groups: int,
                 *tensors: Tensor) -> Optional[native.Runs]:
    # the native kernels' visiting order, or None for the torch
    # implementation (the kernels read the index as int64)
    if index.dtype == torch.long and native.applies(*tensors):
        return native.runs(index, num_groups)
    return None


def _unneeded(t: Tensor) -> Tensor:
    # the [0]-shaped stand-in a backward operator returns for a gradient
    # that is not needed
    return t.new_empty(0)


@torch.library.custom_op('torch_geometric_hot::segment_outer_sum',
                         mutates_args=())
def _segment_outer_sum(k: Tensor, v: Tensor, index: Tensor,
                       num_groups: int) -> Tensor:
    runs = _native_runs(index, num_groups, k, v)
    if runs is None:
        return _outer_sum(k, v, index, num_groups)
    v = v.contiguous()
    return native.outer_sum(k.contiguous(), v.flatten(1), runs, num_groups,
                            v.size(-1), _all_columns(v), False)


@_segment_outer_sum.register_fake
def _(k, v, index, num_groups):
    return k.new_empty(num_groups, k.size(1), k.size(2), v.size(-1))


@torch.library.custom_op('torch_geometric_hot::segment_outer_sum_backward',
                         mutates_args=())
def _segment_outer_sum_backward(grad: Tensor, k: Tensor, v: Tensor,
                                index: Tensor, need_k: bool,
                                need_v: bool) -> Tuple[Tensor, Tensor]:
    runs = _native_runs(index, grad.size(0), k, v, grad)
    if runs is None:  # the adjoint with torch operations
        return (_contract(v, grad.transpose(-1, -2).contiguous(), index)
                if need_k else _unneeded(k),
                _contract(k, grad, index) if need_v else _unneeded(v))
    k, v = k.contiguous(), v.contiguous()
    grad_k = torch.zeros_like(k) if need_k else None
    grad_v = torch.zeros_like(v) if need_v else None
    native.outer_sum_backward(
        k, v.flatten(1), grad, runs, v.size(-1), _all_columns(v), False,
        grad_k, None if grad_v is None else grad_v.flatten(1))
    return (_unneeded(k) if grad_k is None else grad_k,
            _unneeded(v) if grad_v is None else grad_v)


@torch.library.custom_op('torch_geometric_hot::gather_contract',
                         mutates_args=())
def _gather_contract(q: Tensor, summary: Tensor, index: Tensor) -> Tensor:
    runs = _native_runs(index, summary.size(0), q, summary)
    if runs is None:
        return _contract(q, summary, index)
    return native.contract(q, summary, runs, _all_columns(summary))


@_gather_contract.register_fake
def _(q, summary, index):
    return q.new_empty(q.size(0), q.size(1), summary.size(-1))


@torch.library.custom_op('torch_geometric_hot::gather_contract_backward',
                         mutates_args=())
def _gather_contract_backward(grad: Tensor, q: Tensor, summary: Tensor,
                              index: Tensor, need_q: bool,
                              need_summary: bool) -> Tuple[Tensor, Tensor]:
    runs = _native_runs(index, summary.size(0), q, summary, grad)
    if runs is None:  # the adjoint with torch operations
        return (_contract(grad, summary.transpose(-1, -2).contiguous(), index)
                if need_q else _unneeded(q),
                _outer_sum(q, grad, index, summary.size(0)) if need_summary
                else _unneeded(summary))
    q, summary = q.contiguous(), summary.contiguous()
    grad_q = q.new_empty(q.shape) if need_q else None
    grad_s = summary.new_empty(summary.shape) if need_summary else None
    native.contract_backward(q, summary, grad, runs, _all_columns(summary),
                             grad_q, grad_s)
    return (_unneeded(q) if grad_q is None else grad_q,
            _unneeded(summary) if grad_s is None else grad_s)


def _register_autograd(op, backward) -> None:
    # the autograd of either operator: its two operands and the index kept,
    # their gradients from its backward operator (and the latter's fake)
    @backward.register_fake
    def _(grad, a, b, index, need_a, need_b):
        return (torch.empty_like(a) if need_a else _unneeded(a),
                torch.empty_like(b) if need_b else _unneeded(b))

    def setup(ctx, inputs, output) -> None:
        ctx.save_for_backward(*inputs[:3])

    def grad(ctx, grad):
        need_a, need_b = ctx.needs_input_grad[:2]
        grad_a, grad_b = backward(grad.contiguous(), *ctx.saved_tensors,
                                  need_a, need_b)
        return (grad_a if need_a else None, grad_b if need_b else None,
                *[None] * (len(ctx.needs_input_grad) - 2))

    op.register_autograd(grad, setup_context=setup)


_register_autograd(_segment_outer_sum, _segment_outer_sum_backward)
_register_autograd(_gather_contract, _gather_contract_backward)


def segment_outer_sum(k: Tensor, v: Tensor, index: Tensor,
                      num_groups: int) -> Tensor:
    r"""Per-group sums of outer products,
    :math:`S_g = \sum_{e : g(e) = g} k_e v_e^\top` per head (the operator
    ``torch_geometric_hot::segment_outer_sum``).

    Args:
        k (torch.Tensor): :obj:`[E, H, R]` (feature-mapped keys).
        v (torch.Tensor): :obj:`[E, H, C]` (values).
        index (torch.Tensor): Group of every row :obj:`[E]`.
        num_groups (int): Number of groups :math:`G`.

    :rtype: :class:`torch.Tensor` :obj:`[G, H, R, C]`
    """
    return _segment_outer_sum(k, v, index, num_groups)


def gather_contract(q: Tensor, summary: Tensor, index: Tensor) -> Tensor:
    r"""Contracts every row with its group's summary,
    :math:`o_e = q_e^\top S_{g(e)}` per head (the operator
    ``torch_geometric_hot::gather_contract``).

    Args:
        q (torch.Tensor): :obj:`[E, H, R]` (feature-mapped queries).
        summary (torch.Tensor): :obj:`[G, H, R, C]`.
        index (torch.Tensor): Group of every row :obj:`[E]`.

    :rtype: :class:`torch.Tensor` :obj:`[E, H, C]`
    """
    return _gather_contract(q, summary, index)


class SummaryKeys(NamedTuple):
    r"""The keys of one summary: the input rows it adds up
    (:obj:`position [K]`), their groups (:obj:`group [K]`,
    :obj:`num_groups`) and, as a pool of kernel attention's readings, the
    value slots (classes) it carries."""
    position: Tensor
    group: Tensor
    num_groups: int
    slots: Tuple[int, ...] = ()


class Reading(NamedTuple):
    r"""One reading of kernel attention's summaries: the pool whose
    summaries the query rows read, the group of every query row
    (:obj:`group [rows]`), the pool's slots it reads (:obj:`None`: all),
    then the denominator, and the first of its query rows (it reads
    :obj:`q[start:start + rows]`)."""
    pool: int
    group: Tensor
    slots: Optional[Tuple[int, ...]] = None
    start: int = 0

    @property
    def rows(self) -> slice:
        r"""The query rows it reads."""
        return slice(self.start, self.start + self.group.numel())


def read_columns(pool: SummaryKeys, read: Reading, D: int) -> Tensor:
    r"""The summary columns a reading reads: its slots' :obj:`D` columns,
    in its order, then the denominator (the last column), on the device of
    the pool's groups."""
    slots = pool.slots if read.slots is None else read.slots
    columns = [pool.slots.index(s) * D + d for s in slots for d in range(D)]
    return device_index(columns + [len(pool.slots) * D], pool.group.device)


class DirectChoice(NamedTuple):
    r"""The groups of a pool read straight from their keys
    (:obj:`direct [groups]`, by
    :class:`~torch_geometric_hot.ops.attention.dispatch.DirectReadings`),
    the others summarised in groups renumbered
    :obj:`0 .. num_summarised - 1` (:obj:`renumber [groups]`): the choice
    of :func:`choose_direct`, for the torch and the native implementation
    alike."""
    direct: Tensor
    renumber: Tensor
    num_summarised: int


def choose_direct(pools: Sequence[SummaryKeys], reads: Sequence[Reading],
                  R: int, D: int, limit: int, ratio: float
                  ) -> List[Optional[DirectChoice]]:
    r"""Per pool, read by :obj:`reads` (keys and queries of :obj:`R`
    features, values of :obj:`D` channels per slot), its groups of at most
    :obj:`limit` keys whose direct products cost at most :obj:`ratio` times
    their summary's (:class:`DirectChoice`), :obj:`None` when no group is
    read so. Host synchronisation: whether any group is, and how many are
    summarised."""
    if limit <= 0:
        return [None] * len(pools)
    choices: List[Optional[DirectChoice]] = []
    for p, pool in enumerate(pools):
        n = torch.bincount(pool.group, minlength=pool.num_groups)
        m = sum((torch.bincount(r.group, minlength=pool.num_groups)
                 for r in reads if r.pool == p), torch.zeros_like(n))
        C = len(pool.slots) * D + 1
        direct = (n <= limit) & (m * n * (R + C) <= ratio * (n + m) * R * C)
        summarised = ~direct
        choices.append(DirectChoice(
            direct, summarised.long().cumsum(0) - 1, int(summarised.sum()))
            if bool(direct.any()) else None)
    return choices


def _summarised(choice: DirectChoice, rows: Tensor,
                groups: Tensor) -> Tuple[Tensor, Tensor]:
    # the rows in summarised groups and those groups renumbered (order kept)
    keep = (~choice.direct).index_select(0, groups).nonzero().view(-1)
    return (rows.index_select(0, keep),
            choice.renumber.index_select(0, groups.index_select(0, keep)))


class DirectGroups(NamedTuple):
    r"""The groups of a pool that :func:`native_pool_readings` reads
    directly: the pool's key rows by group (``native.Groups``, all
    groups) and the ids of the groups read so."""
    keys: native.Groups
    groups: Tensor


class PoolPlan(NamedTuple):
    r"""The index work of natively computed pool readings
    (:func:`plan_pool_readings`), which its backward pass needs too: per
    pool the visits and value columns of its summarised groups
    (renumbered), their number, and its directly read groups; per reading
    the visits and summary columns of its queries in summarised groups and
    its queries by group."""
    pools: List[Tuple[native.Runs, Tensor]]
    summary_groups: List[int]
    read_runs: List[native.Runs]
    read_columns: List[Tensor]
    direct: List[Optional[DirectGroups]]
    read_queries: List[native.Groups]


def _value_columns(slots: Sequence[int], H: int, D: int) -> Tensor:
    # offsets of the slots' channels in a values row (head h adds h * D)
    return (torch.tensor(slots, dtype=torch.long).view(-1, 1) * (H * D) +
            torch.arange(D)).view(-1)


def _summarised_runs(runs: native.Runs,
                     choice: Optional[DirectChoice]) -> native.Runs:
    return runs if choice is None else native.Runs(
        *_summarised(choice, runs.rows, runs.groups))


def plan_pool_readings(pools: Sequence[SummaryKeys], reads: Sequence[Reading],
                       dtype: torch.dtype, H: int, R: int, D: int,
                       direct: DirectReadings) -> PoolPlan:
    r"""The index work of :func:`native_pool_readings` for keys
    :obj:`[P, H, R]` and values :obj:`[P, slots, H, D]` of :obj:`dtype`:
    the visiting orders, the groups read directly (by :obj:`direct`) and
    the summaries' columns (no summaries). Every call with the same pools,
    readings, shapes and rule can reuse it."""
    choices = choose_direct(pools, reads, R, D, min(
        direct.max_keys, native.direct_max_keys(dtype)), direct.cost_ratio)
    sorted_by: Dict[Tuple[int, int], native.Runs] = {}

    def visits(index: Tensor, num_groups: int) -> native.Runs:
        # one sort per group index: pools and readings share them
        key = (id(index), num_groups)
        if key not in sorted_by:
            sorted_by[key] = native.runs(index, num_groups)
        return sorted_by[key]

    read_visits = [visits(read.group, pools[read.pool].num_groups)
                   for read in reads]
    read_queries = [native.Groups.of(runs, pools[read.pool].num_groups)
                    for read, runs in zip(reads, read_visits)]
    plans, direct_groups = [], []
    for pool, choice in zip(pools, choices):
        runs = visits(pool.group, pool.num_groups).through(pool.position)
        direct_groups.append(None if choice is None else DirectGroups(
            native.Groups.of(runs, pool.num_groups),
            choice.direct.nonzero().view(-1)))
        plans.append((_summarised_runs(runs, choice),
                      _value_columns(pool.slots, H, D)))
    groups = [pool.num_groups if choice is None else choice.num_summarised
              for pool, choice in zip(pools, choices)]
    read_runs = [_summarised_runs(runs, choices[read.pool])
                 for read, runs in zip(reads, read_visits)]
    columns = [read_columns(pools[read.pool], read, D) for read in reads]
    return PoolPlan(plans, groups, read_runs, columns, direct_groups,
                    read_queries)


def native_pool_readings(plan: PoolPlan, k: Tensor, values: Tensor,
                         q: Tensor, reads: Sequence[Reading],
                         scratch: native.Scratch, buffers: Sequence[Tensor]
                         ) -> Tuple[List[Tensor], List[Tensor]]:
    r"""The pool readings by the native kernels as :obj:`plan` (from
    :func:`plan_pool_readings`) says, without autograd (inputs contiguous
    and checked; temporaries taken from :obj:`scratch`), and the summaries
    their backward pass (:func:`native_pool_readings_backward`) reads:
    those of the groups not read from their keys, written to the first
    rows of :obj:`buffers` (per pool, :obj:`[groups, H, R, C]`)."""
    P, _, H, D = values.shape
    flat = values.view(P, -1)
    summaries = [native.outer_sum(k, flat, runs, num_groups, D, columns,
                                  True, buffer[:num_groups])
                 for (runs, columns), num_groups, buffer in zip(
                     plan.pools, plan.summary_groups, buffers)]
    outs = [native.contract(q[read.rows], summaries[read.pool], runs,
                            columns, scratch.empty((read.group.numel(), H,
                                                    columns.numel()),
                                                   q.dtype))
            for read, runs, columns in zip(reads, plan.read_runs,
                                           plan.read_columns)]
    for p, part in enumerate(plan.direct):
        if part is not None:
            native.direct_read(k, flat, q, part.keys, part.groups, D,
                               plan.pools[p][1], _direct_readings(
                                   plan, reads, p, outs))
    return outs, summaries


def _direct_readings(plan: PoolPlan, reads: Sequence[Reading], pool: int,
                     data: Sequence[Optional[Tensor]]
                     ) -> List[native.DirectReading]:
    # the readings of a pool for the direct kernels, with their outputs or
    # gradients (data)
    return [native.DirectReading(queries, columns[:-1], x, read.start)
            for read, queries, columns, x in zip(
                reads, plan.read_queries, plan.read_columns, data)
            if read.pool == pool]


def native_pool_readings_backward(plan: PoolPlan, summaries: List[Tensor],
                                  k: Tensor, values: Tensor, q: Tensor,
                                  reads: Sequence[Reading],
                                  grads: Sequence[Optional[Tensor]],
                                  grad_k: Optional[Tensor],
                                  grad_v: Optional[Tensor],
                                  grad_q: Optional[Tensor],
                                  scratch: native.Scratch) -> None:
    r"""The backward pass of :func:`native_pool_readings` (with the
    summaries it returned) for the readings' gradients :obj:`grads`
    (:obj:`None`: zero): adds to :obj:`grad_k`,
    :obj:`grad_v` and :obj:`grad_q` (laid out as :obj:`k`, :obj:`values`
    and :obj:`q`; each skipped when :obj:`None`), with temporaries from
    :obj:`scratch`."""
    need_s = grad_k is not None or grad_v is not None
    flat = values.view(values.size(0), -1)
    flat_grad_v = None if grad_v is None else grad_v.view(grad_v.size(0), -1)
    # one gradient buffer for every pool's summaries in turn: the first
    # reading of a pool writes it, the others add to it
    buffer = scratch.empty((max(s.numel() for s in summaries), ), k.dtype) \
        if need_s and summaries else None
    for p, ((runs, columns), summary) in enumerate(zip(plan.pools,
                                                       summaries)):
        grad_s = None if buffer is None else \
            buffer[:summary.numel()].view(summary.shape)
        mine = [(read.rows, visits, read_columns, grad) for read, visits,
                read_columns, grad in zip(reads, plan.read_runs,
                                          plan.read_columns, grads)
                if read.pool == p and grad is not None]
        # the first reading writes the summary gradient, unless it leaves
        # columns out: then all of them add to zeros
        s_written = grad_s is not None and bool(mine) and \
            not native.reads_every_column(mine[0][2], summary.size(-1))
        if s_written:
            grad_s.zero_()
        for rows, visits, read_columns, grad in mine:
            native.contract_backward(
                q[rows], summary, grad, visits, read_columns,
                None if grad_q is None else grad_q[rows], grad_s, True,
                s_written)
            s_written = grad_s is not None
        if s_written:
            native.outer_sum_backward(
                k, flat, grad_s, runs, values.size(-1), columns, True,
                grad_k, flat_grad_v)
        part = plan.direct[p]
        if part is not None and mine:
            native.direct_read_backward(
                k, flat, q, part.keys, part.groups, values.size(-1), columns,
                _direct_readings(plan, reads, p, [
                    None if g is None else g.contiguous() for g in grads]),
                grad_q, grad_k, flat_grad_v)


def _summary_keys(pool: SummaryKeys,
                  choice: Optional[DirectChoice]) -> SummaryKeys:
    # the pool's summarised keys, in their renumbered groups
    return pool if choice is None else SummaryKeys(
        *_summarised(choice, pool.position, pool.group),
        choice.num_summarised, pool.slots)


def _summary_rows(choice: Optional[DirectChoice], read: Reading
                  ) -> Tuple[Optional[Tensor], Tensor]:
    # the reading's rows in summarised groups (None: all of them) and their
    # groups as the summaries number them
    if choice is None:
        return None, read.group
    return _summarised(choice, torch.arange(
        read.group.numel(), device=read.group.device), read.group)


def _select(x: Tensor, rows: Optional[Tensor]) -> Tensor:
    return x if rows is None else x.index_select(0, rows)


def _direct_pairs(pool: SummaryKeys, choice: DirectChoice,
                  read: Reading) -> Tuple[Tensor, Tensor]:
    # (query row within the reading, input row of the key) of every pair of
    # a directly read group
    rows = choice.direct.index_select(0, read.group).nonzero().view(-1)
    keys = choice.direct.index_select(0, pool.group).nonzero().view(-1)
    query, key = group_pairs(read.group.index_select(0, rows),
                             pool.group.index_select(0, keys),
                             pool.num_groups)
    return (rows.index_select(0, query),
            pool.position.index_select(0, keys.index_select(0, key)))


class ReadingPlan(NamedTuple):
    r"""The index work of one reading in :func:`torch_pool_readings`: the
    rows in summarised groups (:obj:`None`: all of them), those rows'
    groups as the summaries number them, the (query row, key input row)
    of its directly read pairs (:obj:`None` where the pool has no direct
    group), and the summary columns it reads (:func:`read_columns`)."""
    rows: Optional[Tensor]
    index: Tensor
    pairs: Optional[Tuple[Tensor, Tensor]]
    columns: Tensor


class TorchReadings(NamedTuple):
    r"""The index work of :func:`torch_pool_readings` (forward and
    backward) for one :class:`DirectChoice` per pool, made by
    :func:`plan_torch_readings`: per pool its summarised keys, in their
    renumbered groups, and per reading its :class:`ReadingPlan`."""
    summarised: List[SummaryKeys]
    reads: List[ReadingPlan]


def plan_torch_readings(pools: Sequence[SummaryKeys],
                        reads: Sequence[Reading],
                        choices: Sequence[Optional[DirectChoice]], D: int
                        ) -> TorchReadings:
    r"""The :class:`TorchReadings` of :obj:`pools` read at :obj:`reads`
    with :obj:`choices` (:func:`choose_direct`), values of :obj:`D`
    channels per slot. Host synchronisation: the rows of the summarised
    and of the directly read groups."""
    plans = []
    for read in reads:
        pool, choice = pools[read.pool], choices[read.pool]
        plans.append(ReadingPlan(
            *_summary_rows(choice, read),
            None if choice is None else _direct_pairs(pool, choice, read),
            read_columns(pool, read, D)))
    return TorchReadings(list(map(_summary_keys, pools, choices)), plans)


def _rows(x: Tensor, position: Tensor) -> Tensor:
    # x[position], gathered as flat 2-D rows (see ops.scatter)
    return x.flatten(1).index_select(0, position).view((-1, ) + x.shape[1:])


def _key_rows(values: Tensor, slots: Sequence[int], position: Tensor
              ) -> Tensor:
    # [keys, H, len(slots) * D + 1]: the keys' values of the slots, then 1
    v = select_rows(_rows(values, position), slots, dim=1)
    return torch.cat([v.transpose(1, 2).flatten(2),
                      v.new_ones(position.numel(), values.size(2), 1)], -1)


def _add_to_slots(grad_v: Tensor, position: Tensor, slots: Sequence[int],
                  grad: Tensor) -> None:
    # grad [keys, H, len(slots) * D (+ 1)] into grad_v [P, slots, H, D]
    H, D = grad_v.size(2), grad_v.size(3)
    grad = grad[..., :len(slots) * D].reshape(-1, H, len(slots), D)
    for i, slot in enumerate(slots):
        grad_v[:, slot].index_add_(0, position, grad[:, :, i])


def _pair_chunks(pairs: int, per_pair: int,
                 like: Tensor) -> List[Tuple[int, int]]:
    step = _chunk_rows(pairs, per_pair, like)
    return [(start, min(start + step, pairs))
            for start in range(0, pairs, step)]


def torch_pool_readings(k: Tensor, values: Tensor, q: Tensor,
                        pools: Sequence[SummaryKeys], reads: Sequence[Reading],
                        plan: TorchReadings,
                        buffers: Sequence[Tensor]) -> List[Tensor]:
    r"""The pool readings with torch operations on any device, the groups
    of each pool read as the :class:`DirectChoice` of :obj:`plan`
    (:func:`plan_torch_readings`) says (no summary is computed for a group
    read from its keys); the summaries of the other groups are written to
    the first rows of :obj:`buffers` (per pool, :obj:`[groups, H, R, C]`).
    """
    summaries = [buffer[:s.num_groups].copy_(torch_pool_outer_sum(
        k, values, s)) if s.num_groups else None for s, buffer in zip(
            plan.summarised, buffers)]
    outs = []
    for read, (rows, index, pairs, columns) in zip(reads, plan.reads):
        pool = pools[read.pool]
        q_r = q[read.rows]
        if rows is None:
            outs.append(_contract(q_r, summaries[read.pool],
                                  index)[..., columns])
            continue
        out = q.new_zeros(read.group.numel(), q.size(1), columns.numel())
        if rows.numel():
            out.index_copy_(0, rows, _contract(
                q_r.index_select(0, rows), summaries[read.pool],
                index)[..., columns])
        query, key = pairs
        slots = pool.slots if read.slots is None else read.slots
        for start, end in _pair_chunks(query.numel(),
                                       q.size(1) * columns.numel(), q):
            qi, ki = query[start:end], key[start:end]
            dot = (q_r.index_select(0, qi) * _rows(k, ki)).sum(-1)
            out.index_add_(0, qi, dot.unsqueeze(-1) *
                           _key_rows(values, slots, ki))
        outs.append(out)
    return outs


def torch_pool_readings_backward(k: Tensor, values: Tensor, q: Tensor,
                                 pools: Sequence[SummaryKeys],
                                 reads: Sequence[Reading],
                                 plan: TorchReadings,
                                 buffers: Sequence[Tensor],
                                 grads: Sequence[Tensor], grad_k: Tensor,
                                 grad_v: Tensor, grad_q: Tensor) -> None:
    r"""The adjoint of :func:`torch_pool_readings` (with the summaries it
    wrote to :obj:`buffers`): adds the gradients of the readings
    :obj:`grads` to :obj:`grad_k`, :obj:`grad_v` (laid out as
    :obj:`values`) and :obj:`grad_q`."""
    summaries = [buffer[:s.num_groups] if s.num_groups else None
                 for s, buffer in zip(plan.summarised, buffers)]
    grad_summaries = [None if s is None else torch.zeros_like(s)
                      for s in summaries]
    for read, g_read, (rows, index, pairs, columns) in zip(reads, grads,
                                                           plan.reads):
        pool = pools[read.pool]
        summary = summaries[read.pool]
        q_r, grad_q_r = q[read.rows], grad_q[read.rows]
        if summary is not None and (rows is None or rows.numel()):
            q_s, g_s = _select(q_r, rows), _select(g_read, rows)
            s_cols = summary.index_select(-1, columns)
            g_q = _contract(g_s, s_cols.transpose(-1, -2).contiguous(), index)
            if rows is None:
                grad_q_r += g_q
            else:
                grad_q_r.index_add_(0, rows, g_q)
            grad_summaries[read.pool].index_add_(-1, columns, _outer_sum(
                q_s, g_s, index, summary.size(0)))
        if pairs is None:
            continue
        query, key = pairs
        slots = pool.slots if read.slots is None else read.slots
        for start, end in _pair_chunks(query.numel(),
                                       q.size(1) * columns.numel(), q):
            qi, ki = query[start:end], key[start:end]
            q_p, k_p = q_r.index_select(0, qi), _rows(k, ki)
            g_p = g_read.index_select(0, qi)  # [c, H, columns]
            w = _key_rows(values, slots, ki)
            g_dot = (g_p * w).sum(-1, keepdim=True)  # [c, H, 1]
            grad_q_r.index_add_(0, qi, g_dot * k_p)
            grad_k.index_add_(0, ki, g_dot * q_p)
            _add_to_slots(grad_v, ki, slots,
                          (q_p * k_p).sum(-1, keepdim=True) * g_p)
    for pool, g_s in zip(plan.summarised, grad_summaries):
        if g_s is None:
            continue
        k_p = _rows(k, pool.position)
        v_p = _key_rows(values, pool.slots, pool.position)
        grad_k.index_add_(0, pool.position, _contract(
            v_p, g_s.transpose(-1, -2).contiguous(), pool.group))
        _add_to_slots(grad_v, pool.position, pool.slots,
                      _contract(k_p, g_s, pool.group))


def check_pool_readings(k: Tensor, values: Tensor, q: Tensor,
                        pools: Sequence[SummaryKeys], reads: Sequence[Reading],
                        ranges: bool) -> None:
    r"""The argument checks of the pool readings (with
    :obj:`ranges`, also the positions, slots and groups the native kernels
    use as memory offsets; the torch path's gathers check them)."""
    if values.dim() != 4 or k.dim() != 3 or k.shape[:2] != (
            values.size(0), values.size(2)):
        raise ValueError(f"'k' [P, H, R] and 'values' [P, slots, H, D] must "
                         f"agree, got {tuple(k.shape)} and "
                         f"{tuple(values.shape)}")
    for pool in pools:
        if pool.position.shape != pool.group.shape or not pool.slots:
            raise ValueError('a pool needs one group per position and at '
                             'least one slot')
        if not ranges:
            continue
        if pool.position.numel() and (int(pool.position.min()) < 0 or int(
                pool.position.max()) >= values.size(0)):
            raise IndexError(f'pool position out of range [0, '
                             f'{values.size(0)})')
        if min(pool.slots) < 0 or max(pool.slots) >= values.size(1):
            raise IndexError(f'pool slot out of range [0, {values.size(1)})')
    if q.dim() != 3 or q.shape[1:] != k.shape[1:]:
        raise ValueError(f"'q' must be [rows, H, R] with the keys' H, R "
                         f"{tuple(k.shape[1:])}, got {tuple(q.shape)}")
    for read in reads:
        if not 0 <= read.pool < len(pools):
            raise IndexError(f'reading of pool {read.pool}, but there are '
                             f'{len(pools)} pools')
        if read.group.dim() != 1 or read.start < 0 or \
                read.start + read.group.numel() > q.size(0):
            raise ValueError(f'a reading needs one group per query row it '
                             f'reads, from its start ({read.start}) within '
                             f'the {q.size(0)} rows, got '
                             f'{tuple(read.group.shape)}')
        if read.slots is not None and (not read.slots or not set(
                read.slots) <= set(pools[read.pool].slots)):
            raise ValueError(f'a reading reads some of its pool\'s slots '
                             f'{pools[read.pool].slots}, got {read.slots}')
    if ranges:
        for index, num_groups in [*((p.group, p.num_groups) for p in pools),
                                  *((r.group, pools[r.pool].num_groups)
                                    for r in reads)]:
            if index.numel() and (int(index.min()) < 0 or
                                  int(index.max()) >= num_groups):
                raise IndexError(f'group index out of range [0, '
                                 f'{num_groups})')


def torch_pool_outer_sum(k: Tensor, values: Tensor,
                         pool: SummaryKeys) -> Tensor:
    r"""The summaries of one pool of the pool readings, from
    gathered and concatenated copies."""
    return segment_outer_sum(_rows(k, pool.position),
                             _key_rows(values, pool.slots, pool.position),
                             pool.group, pool.num_groups)
