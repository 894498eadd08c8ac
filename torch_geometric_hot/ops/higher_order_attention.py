r"""Higher-order attention over the aggregating classes of the equivariant
basis (HOT Eq. 10--12; ``docs/design.md``, "Higher-order attention").

Every aggregating class :math:`\mu` replaces its fixed sum over a key group
by attention over the *same* group, distinct-index exclusions included:

* :func:`softmax_class_attention`: exact grouped softmax over the
  enumerated (query, key) pairs of the group (the path ``'pairs'``;
  ``docs/design.md``, "Softmax attention");
* :func:`kernel_class_attention`: :math:`\phi(q)^\top S / \phi(q)^\top z`
  from per-node / per-graph summaries, with the excluded keys subtracted by
  the same signed terms as the linear layer (exact), :math:`O(n + m)`.

Both take the class tables of :mod:`torch_geometric_hot.ops.basis` and the
output :class:`~torch_geometric_hot.ops.equivariant.Target`.
"""
import functools
from dataclasses import replace
from typing import Dict, List, Optional, Sequence, Tuple, Union

import torch
from torch import Tensor

from torch_geometric_hot.ops.attention.dropout import dropout_threshold, \
    pair_dropout
from torch_geometric_hot.ops.basis import EquivariantClass
from torch_geometric_hot.ops.class_combination import READING, SINGLE_KEY, \
    CombinationTerm
from torch_geometric_hot.ops.equivariant import Target, class_counts, \
    index_range, summary_counts
from torch_geometric_hot.ops.kernel_attention import Reading, SummaryKeys
from torch_geometric_hot.ops.plan_cache import view_plan
from torch_geometric_hot.ops.pooled_combination import CombinationPart, \
    ValueProjection, pooled_combination
from torch_geometric_hot.ops.recomputed_attention import \
    recomputed_attention
from torch_geometric_hot.ops.scatter import group_pairs
from torch_geometric_hot.ops.softmax import check_pairs, \
    pair_softmax_attention

_SINGLE_KEY = ('E', 'ET', 'D', 'X')
#: The input rows the keys of each aggregate summary are: nodes (order 1)
#: or diagonal entries (order 2), ``'node'``; off-diagonal entries,
#: ``'off'``. Summaries of one kind share their keys' input rows.
KEY_ROWS = {'R': 'off', 'C': 'off', 'ES': 'off', 'DS': 'node', 'XS': 'node'}


def summary_keys(summary: str, view, in_order: int,
                 slots: Tuple[int, ...] = ()) -> SummaryKeys:
    r"""The keys of an aggregate summary of :obj:`view`: the input rows it
    adds up, their groups and the value :obj:`slots` it carries."""
    if in_order == 1 and summary != 'XS':
        raise ValueError(f"no summary {summary!r} on order 1")
    if in_order == 1 or summary == 'DS':
        position = view.diag_pos if in_order == 2 else \
            index_range(view, 'nodes')
        return SummaryKeys(position, view.batch, view.num_graphs, slots)
    group, num_groups = {
        'R': (view.off_row, view.num_nodes),
        'C': (view.off_col, view.num_nodes),
        'ES': (view.off_batch, view.num_graphs),
    }[summary]
    return SummaryKeys(view.off_pos, group, num_groups, slots)


def key_position(summary: str, selector, target: Target,
                 view) -> Tuple[Tensor, Optional[Tensor]]:
    r"""Input row of a single-key term for every query row (and a mask for
    transposes that do not exist)."""
    position, mask = target.index(summary, selector)
    if summary == 'D':
        position = view.diag_pos.index_select(0, position)
    return position, mask


def exclusion_ids(cls: EquivariantClass, target: Target, view,
                  pool: SummaryKeys) -> List[Tuple[Tensor, Tensor]]:
    r"""The class's exclusions as ids: per excluded (summary, selector), an
    id per query row and an id per key of :obj:`pool` such that the key is
    excluded for the query exactly when the two are equal (ids of keys are
    non-negative; a query that excludes no key gets -1)."""
    out = []
    for summary, selector in cls.exclusions:
        if summary in _SINGLE_KEY:  # one input element: compare input rows
            position, mask = key_position(summary, selector, target, view)
            if mask is not None:
                position = position.masked_fill(~mask, -1)
            out.append((position, pool.position))
        elif KEY_ROWS[cls.pool[0]] == 'node':  # a node key: its node
            out.append((target.node(selector), index_range(view, 'nodes')))
        else:  # the entries of a row (R) or column (C) of a node
            ends = view.off_row if summary == 'R' else view.off_col
            out.append((target.node(selector), ends))
    return out


@torch.library.custom_op('torch_geometric_hot::class_pairs', mutates_args=())
def _class_pairs(query_group: Tensor, key_group: Tensor,
                 key_position: Tensor, num_groups: int,
                 query_ids: List[Tensor], key_ids: List[Tensor]
                 ) -> Tuple[Tensor, Tensor]:
    query, key = group_pairs(query_group, key_group, num_groups, query_ids,
                             key_ids)
    return query, key_position.index_select(0, key)


@_class_pairs.register_fake
def _(query_group, key_group, key_position, num_groups, query_ids, key_ids):
    pairs = torch.library.get_ctx().new_dynamic_size()
    return query_group.new_empty(pairs), key_position.new_empty(pairs)


def class_pairs(cls: EquivariantClass, target: Target, view, in_order: int,
                width: int = 1) -> Tuple[Tensor, Tensor]:
    r"""The (query row, input row) pairs a class attends over: every key of
    the query's group that no exclusion removes (the operator
    ``torch_geometric_hot::class_pairs``: one node of a compiled graph,
    whose pair count is a data-dependent size). Kept with the view
    (:class:`~torch_geometric_hot.data.PlanCache`), so that the layers of a
    model enumerate them once per batch. Eagerly, the pairs are counted
    first and checked against the size limit at :obj:`width` elements per
    pair (a row of a hub holds :math:`\deg^2` of them).

    Returns:
        (query [pairs], input row [pairs])
    """
    def build() -> Tuple[Tensor, Tensor]:
        args = attention_index(cls, target, view, in_order)
        if not torch.compiler.is_compiling():
            _check_pair_count(args[0], args[1], args[3], width,
                              f'class {cls.name}')
        return _class_pairs(*args)

    return view_plan(view, ('class_pairs', in_order, target.part, cls), build,
                     keep=target.part != 'hyperedge')


def attention_index(cls: EquivariantClass, target: Target, view,
                    in_order: int
                    ) -> Tuple[Tensor, Tensor, Tensor, int, List[Tensor],
                               List[Tensor]]:
    r"""The index tensors of one class's softmax attention, as its
    operators take them (:mod:`~torch_geometric_hot.ops.\
    recomputed_attention`): the group of every query row, the group and
    the input row of every key of the class's pool, the number of groups,
    and the exclusions as ids (:func:`exclusion_ids`: per exclusion the
    ids of the query rows, then per exclusion those of the keys)."""
    summary, selector = cls.pool
    pool = summary_keys(summary, view, in_order)
    ids = exclusion_ids(cls, target, view, pool)
    return (target.index(summary, selector)[0], pool.group, pool.position,
            pool.num_groups, [q for q, _ in ids], [k for _, k in ids])


def _pair_width(q: Tensor, k: Tensor, v: Tensor) -> int:
    # the elements a (query, key) pair holds
    return q.size(1) * (q.size(-1) + k.size(-1) + v.size(-1))


def _check_pair_count(query_group: Tensor, key_group: Tensor,
                      num_groups: int, width: int, what: str) -> None:
    # the size limit on the pairs before they are enumerated (host
    # synchronisation: their count)
    check_pairs(int(torch.bincount(key_group, minlength=num_groups)
                    .index_select(0, query_group).sum()), width, what)


def local_pair_attention(q: Tensor, k: Tensor, v: Tensor,
                         query_group: Tensor, key_group: Tensor,
                         key_position: Tensor, num_groups: int,
                         query_ids: List[Tensor], key_ids: List[Tensor],
                         dropout: float = 0.0,
                         seed: Optional[Tensor] = None) -> Tensor:
    r"""The output of :func:`softmax_class_attention` from index tensors
    (those of the operator ``torch_geometric_hot::class_pairs``), its pairs
    enumerated and checked against the size limit on every call; dropout
    drawn from :obj:`seed` (:obj:`None`: drawn).

    :rtype: :class:`torch.Tensor` :obj:`[rows, H, d_v]`
    """
    _check_pair_count(query_group, key_group, num_groups, _pair_width(
        q, k, v), 'a local class')
    query, key = _class_pairs(query_group, key_group, key_position,
                              num_groups, query_ids, key_ids)
    return pair_softmax_attention(q, k, v, query, key, pair_dropout(
        query, key, seed, dropout_threshold(dropout)))[0]


#: :func:`local_pair_attention` as one operator whose backward recomputes
#: it (the path ``'compiled'``).
local_class_softmax = recomputed_attention('local_class_softmax',
                                           local_pair_attention)


def softmax_class_attention(
    cls: EquivariantClass, target: Target, view, in_order: int, q: Tensor,
    k: Tensor, v: Tensor, dropout: float = 0.0, training: bool = False,
    seed: Optional[Tensor] = None
) -> Tuple[Tensor, Tuple[Tensor, Tensor]]:
    r"""Exact softmax attention of one aggregating class.

    Args:
        cls (EquivariantClass): The class.
        target (Target): Output part (the query rows).
        view: Index bundle.
        in_order (int): Input order.
        q (torch.Tensor): Queries :obj:`[rows, H, d]` (already scaled).
        k (torch.Tensor): Keys :obj:`[inputs, H, d]`.
        v (torch.Tensor): Values :obj:`[inputs, H, d_v]`.
        dropout (float): Dropout on the attention weights.
        training (bool): Whether dropout is active.
        seed (torch.Tensor, optional): The class's seed of dropout
            (:mod:`~torch_geometric_hot.ops.attention.dropout`; :obj:`None`:
            drawn from torch's default generator).

    Returns:
        The output :obj:`[rows, H, d_v]` (zero for an empty key group) and
        the attention :obj:`(index [2, pairs], alpha [pairs, H])` where
        :obj:`index` holds (query row, input row).
    """
    width = _pair_width(q, k, v)
    query, key = class_pairs(cls, target, view, in_order, width)
    if not torch.compiler.is_compiling():  # checked when planned
        check_pairs(query.numel(), width, f'class {cls.name}')
    out, alpha, _ = pair_softmax_attention(q, k, v, query, key, pair_dropout(
        query, key, seed, dropout_threshold(dropout if training else 0.0)))
    return out, (torch.stack([query, key]), alpha)


def kernel_class_attention(classes: Sequence[Sequence[EquivariantClass]],
                           targets: Sequence[Target], view, in_order: int,
                           phi_q: Tensor, phi_k: Tensor,
                           values: Union[Tensor, ValueProjection],
                           slots: Sequence[Sequence[int]],
                           exact: bool = True,
                           eps: float = 1e-6) -> List[Tensor]:
    r"""Kernel attention of the aggregating classes of one or more output
    parts, as one operation.

    .. math::
        o^\mu_q = \frac{\sum_t \pm \phi(q)^\top S_t}
        {\max(\sum_t \pm \phi(q)^\top z_t, \epsilon)}

    over the class's signed terms :math:`t` (``docs/design.md``, "Kernel
    attention"): aggregate terms
    read per-node/per-graph summaries :math:`S = \sum \phi(k) v^\top`,
    :math:`z = \sum \phi(k)` built once per summary for all parts;
    single-key terms (excluded keys) contribute
    :math:`(\phi(q)^\top \phi(k_x)) v_x`. Rows whose group is empty output
    0 (all rows, when there is no input element). With :obj:`exact=False`
    the exclusions are dropped (HOT Eq. 21's decoupled approximation). The
    sums run in the widest dtype of the inputs, outside
    :func:`torch.autocast` (they add up whole graphs).

    The index work (summary keys, readings, terms, and the native path's
    visiting orders and checks) depends on the view, the classes and the
    shapes only: it is kept with the view
    (:class:`~torch_geometric_hot.data.PlanCache`), so the other layers of
    a model on the same batch skip it.

    Args:
        classes (list): Per output part, its aggregating classes.
        targets (list): The output parts.
        view: Index bundle.
        in_order (int): Input order.
        phi_q (torch.Tensor): Mapped queries :obj:`[rows, H, r]`, the
            parts' rows one after the other.
        phi_k (torch.Tensor): Mapped keys :obj:`[inputs, H, r]`.
        values (torch.Tensor or ValueProjection): Values
            :obj:`[inputs, slots, H, d_v]`, or their projection
            (:class:`~torch_geometric_hot.ops.pooled_combination.ValueProjection`:
            natively computed in the operation's workspace).
        slots (list): Per part, per class, its slot in :obj:`values`.
        exact (bool): Keep the distinct-index exclusions.
        eps (float): Floor of the denominator.

    Returns:
        Per part, its classes' outputs :obj:`[rows, classes, H, d_v]`
        (:func:`~torch_geometric_hot.ops.pooled_combination`).
    """
    device = phi_q.device.type
    if torch.is_autocast_enabled(device) or phi_q.dtype != phi_k.dtype:
        # sums over whole graphs: in the widest input dtype, not autocast's
        dtype = functools.reduce(torch.promote_types, [
            phi_q.dtype, phi_k.dtype, *((values.x.dtype, values.weight.dtype)
                                        if isinstance(values, ValueProjection)
                                        else (values.dtype, ))])
        if isinstance(values, ValueProjection):
            values = values._replace(x=values.x.to(dtype),
                                     weight=values.weight.to(dtype))
        else:
            values = values.to(dtype)
        with torch.autocast(device, enabled=False):
            return kernel_class_attention(classes, targets, view, in_order,
                                          phi_q.to(dtype), phi_k.to(dtype),
                                          values, slots, exact, eps)
    if phi_k.size(0) == 0:  # no input element: every group is empty
        return [phi_q.new_zeros(target.num_rows, len(part), phi_q.size(1),
                                values.shape[-1])
                for part, target in zip(classes, targets)]
    # the operation without its tensors, kept with the view (see
    # data.PlanCache) unless a part's rows are hyperedges, which the view
    # does not know
    d_v = values.shape[-1]
    parts, pools, reads = view_plan(
        view, ('kernel_class_attention', in_order,
               tuple(t.part for t in targets),
               tuple(tuple(part) for part in classes),
               tuple(tuple(part) for part in slots), exact, d_v),
        lambda: _kernel_plan(classes, targets, view, in_order, slots, exact,
                             d_v),
        keep=all(t.part != 'hyperedge' for t in targets))
    return pooled_combination(parts, pools, reads, phi_q, phi_k, values, eps)


def _kernel_plan(classes: Sequence[Sequence[EquivariantClass]],
                 targets: Sequence[Target], view, in_order: int,
                 slots: Sequence[Sequence[int]], exact: bool, d_v: int
                 ) -> Tuple[List[CombinationPart], List[SummaryKeys],
                            List[Reading]]:
    if not exact:
        classes = [[replace(cls, terms=cls.terms[:1]) for cls in part]
                   for part in classes]
    terms = [[cls.terms for cls in part] for part in classes]
    # The value slots read from each aggregate summary, by any part: one
    # summary build each.
    users: Dict[str, Dict[int, None]] = {}
    for part_terms, part_slots in zip(terms, slots):
        for class_terms, slot in zip(part_terms, part_slots):
            for _, summary, _ in class_terms:
                if summary not in _SINGLE_KEY:
                    users.setdefault(summary, {})[slot] = None
    pool_of = {summary: p for p, summary in enumerate(users)}
    pools = []
    for summary, pool_slots in users.items():
        pools.append(summary_keys(summary, view, in_order, tuple(pool_slots)))

    reads: List[Reading] = []
    parts: List[CombinationPart] = []
    counts = summary_counts(view, in_order)
    start = 0
    for target, part_classes, part_slots in zip(targets, classes, slots):
        parts.append(_combination_part(part_classes, target, view, counts,
                                       part_slots, pool_of, reads, start,
                                       d_v))
        start += target.num_rows
    return parts, pools, reads


def _combination_part(classes: Sequence[EquivariantClass], target: Target,
                      view, counts, slots: Sequence[int],
                      pool_of: Dict[str, int], reads: List[Reading],
                      start: int, d_v: int) -> CombinationPart:
    r"""The terms of one part's classes for :func:`pooled_combination`,
    appending the part's readings (of its query rows from :obj:`start`) to
    :obj:`reads`."""
    terms = [cls.terms for cls in classes]
    # Per (summary, selector): one reading of the slots of the classes that
    # read there, and the denominator (the last column).
    reading_terms: Dict[Tuple[str, object, int], CombinationTerm] = {}
    for summary, selector in dict.fromkeys(
            (s, sel) for class_terms in terms for _, s, sel in class_terms
            if s not in _SINGLE_KEY):
        readers = [c for c, class_terms in enumerate(terms) if any(
            s == summary and sel == selector for _, s, sel in class_terms)]
        reads.append(Reading(pool_of[summary],
                             target.index(summary, selector)[0],
                             tuple(slots[c] for c in readers), start))
        for k, c in enumerate(readers):
            reading_terms[(summary, selector, c)] = CombinationTerm(
                1, READING, len(reads) - 1, k * d_v)
    # The key of every single-key term, once per (summary, selector) for
    # all classes (-1 where it does not exist); the combination dots it
    # with the query.
    positions: List[Tensor] = []
    single_key_terms: Dict[Tuple[str, object], CombinationTerm] = {}
    for summary, selector in dict.fromkeys(
            (s, sel) for class_terms in terms for _, s, sel in class_terms
            if s in _SINGLE_KEY):
        position, mask = key_position(summary, selector, target, view)
        positions.append(position if mask is None else
                         torch.where(mask, position, -1))
        single_key_terms[(summary, selector)] = CombinationTerm(
            1, SINGLE_KEY, len(positions) - 1)
    nonempty = torch.stack([class_counts(cls, target, counts) > 0
                            for cls in classes], dim=1)
    return CombinationPart(
        [[(single_key_terms[(s, sel)] if s in _SINGLE_KEY else
           reading_terms[(s, sel, c)])._replace(sign=sign)
          for sign, s, sel in class_terms]
         for c, class_terms in enumerate(terms)],
        positions, slots, nonempty)
