r"""The path ``'pooled'`` of kernel attention, the reference:
:math:`\phi(q)^\top S / \phi(q)^\top z` from per-node and per-graph
summaries, the excluded keys subtracted by the same signed terms as the
linear layer (exact), :math:`O(n + m)`, all classes of a layer in one
:func:`~torch_geometric_hot.ops.pooled_combination.pooled_combination`
(``docs/design.md``, "Kernel attention").
"""
import functools
from dataclasses import replace
from typing import Dict, List, Sequence, Tuple, Union

import torch
from torch import Tensor

from torch_geometric_hot.ops.basis import EquivariantClass
from torch_geometric_hot.ops.class_combination import READING, SINGLE_KEY, \
    CombinationTerm
from torch_geometric_hot.ops.equivariant import Target, class_counts, \
    summary_counts
from torch_geometric_hot.ops.kernel_attention import Reading, SummaryKeys
from torch_geometric_hot.ops.key_groups import SINGLE_KEY_SUMMARIES, \
    key_position, summary_keys
from torch_geometric_hot.ops.plan_cache import view_plan
from torch_geometric_hot.ops.pooled_combination import CombinationPart, \
    ValueProjection, pooled_combination
from torch_geometric_hot.validation import autocast_enabled


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

    The arguments are those of
    :func:`~torch_geometric_hot.ops.attention.hot.hot_class_attention`
    (the parts with classes only), with :obj:`phi_q` and :obj:`phi_k` the
    mapped queries and keys, :obj:`values` either their projection or the
    values :obj:`[inputs, slots, H, d_v]`, and :obj:`eps` the floor of the
    denominator.

    Returns:
        Per part, its classes' outputs :obj:`[rows, classes, H, d_v]`
        (:func:`~torch_geometric_hot.ops.pooled_combination`).
    """
    device = phi_q.device.type
    if autocast_enabled(device) or phi_q.dtype != phi_k.dtype:
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
                if summary not in SINGLE_KEY_SUMMARIES:
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
            if s not in SINGLE_KEY_SUMMARIES):
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
            if s in SINGLE_KEY_SUMMARIES):
        position, mask = key_position(summary, selector, target, view)
        positions.append(position if mask is None else
                         torch.where(mask, position, -1))
        single_key_terms[(summary, selector)] = CombinationTerm(
            1, SINGLE_KEY, len(positions) - 1)
    nonempty = torch.stack([class_counts(cls, target, counts) > 0
                            for cls in classes], dim=1)
    return CombinationPart(
        [[(single_key_terms[(s, sel)] if s in SINGLE_KEY_SUMMARIES else
           reading_terms[(s, sel, c)])._replace(sign=sign)
          for sign, s, sel in class_terms]
         for c, class_terms in enumerate(terms)],
        positions, slots, nonempty)
