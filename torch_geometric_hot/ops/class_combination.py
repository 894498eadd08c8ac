r"""The last step of kernel attention (``docs/design.md``, "Kernel
attention"): every aggregating class of an output part is a ratio of two
signed sums of terms,

.. math::
    o^\mu = \frac{\sum_t s_t\, n_t}{\max(\sum_t s_t\, d_t, \epsilon)},

where a *reading* term reads a class slot :math:`n_t` and the denominator
column :math:`d_t` of a summary reading :math:`\phi(q)^\top [S, z]`, and a
*single-key* term (an excluded key :math:`x`) contributes
:math:`n_t = (\phi(q)^\top \phi(k_x))\, v_x` and
:math:`d_t = \phi(q)^\top \phi(k_x)` (nothing where the key does not
exist). Rows whose group is empty output 0. The dots are computed inside,
once per row and single-key source.

:func:`torch_combine_classes` evaluates all classes of a part at once
with torch operations, in a number of them that does not grow with the
number of terms (the torch backend; :func:`torch_combine_classes_backward`
is its adjoint, :func:`check_combination` checks its arguments); the
operator
``torch_geometric_hot::pooled_combination``
(:mod:`~torch_geometric_hot.ops.pooled_combination`) runs them inside
kernel attention, natively on CPU (:func:`combination_table`,
:func:`check_combination`).
"""
import itertools
from typing import Dict, Hashable, List, NamedTuple, Sequence, Tuple, Union

import torch
from torch import Tensor

from torch_geometric_hot.ops import native
from torch_geometric_hot.ops.row_selection import device_index

READING, SINGLE_KEY = 0, 1


class CombinationTerm(NamedTuple):
    r"""One signed term of a class: :obj:`kind` is :data:`READING` (columns
    :obj:`offset:offset + D` and the last column of reading :obj:`src`) or
    :data:`SINGLE_KEY` (the dot of the query with the key at single-key
    position list :obj:`src`, times the class's values there)."""
    sign: int
    kind: int
    src: int
    offset: int = 0


class ClassColumns(NamedTuple):
    r"""Where the terms of one part's classes read, for
    :func:`torch_combine_classes`: the *columns* :obj:`[rows, H, W]` are
    the readings the part reads (:obj:`reads`, in this order, each whole,
    at :obj:`offsets`), then the single-key numerators of every (source,
    slot) pair in :obj:`pairs` (:math:`D` columns each, from column
    :obj:`pair_start`), then the dots of every single-key source (one
    column each, from :obj:`dot_start`); :obj:`width` is :math:`W`.
    The *signed columns* :obj:`[rows, H, 2W + 1]` follow them with their
    negatives and one zero column. A class's :math:`i`-th term reads its
    :math:`D` numerator columns and its denominator column among the
    signed columns at :obj:`gathers[i][class]` (the zero column where the
    class has fewer terms), so the classes of the part add up as
    :obj:`len(gathers)` gathers, whatever their number of terms.
    :obj:`pair_source` and :obj:`pair_slot` are :obj:`pairs` as tensors
    on the device, :obj:`gathers` long tensors :obj:`[classes * (D + 1)]`.
    """
    reads: Tuple[int, ...]
    offsets: Tuple[int, ...]
    pairs: Tuple[Tuple[int, int], ...]
    pair_start: int
    dot_start: int
    width: int
    pair_source: Tensor
    pair_slot: Tensor
    gathers: Tuple[Tensor, ...]


_layouts: Dict[Hashable, ClassColumns] = {}


def class_columns(terms: Sequence[Sequence[CombinationTerm]],
                  widths: Dict[int, int], slots: Sequence[int],
                  sources: int, D: int, device: torch.device
                  ) -> ClassColumns:
    r"""The :class:`ClassColumns` of a part's classes (:obj:`terms`, their
    value :obj:`slots`, :obj:`sources` single-key sources) whose readings
    have the widths :obj:`widths` (reading: width), values of :obj:`D`
    channels; made once per structure and device (from ranges on the
    device: no host data crosses, see
    :func:`~torch_geometric_hot.ops.row_selection.device_index`)."""
    terms = tuple(tuple(CombinationTerm(*t) for t in c) for c in terms)
    reads = tuple(sorted({t.src for c in terms for t in c
                          if t.kind == READING}))
    key = (terms, tuple(widths[r] for r in reads), tuple(slots), sources, D,
           device)
    layout = _layouts.get(key)
    if layout is not None:
        return layout
    offsets = tuple(itertools.accumulate((widths[r] for r in reads),
                                         initial=0))
    pairs = tuple(sorted({(t.src, slots[c]) for c, cls in enumerate(terms)
                          for t in cls if t.kind == SINGLE_KEY}))
    pair_start = offsets[-1]
    dot_start = pair_start + len(pairs) * D
    width = dot_start + sources
    where = {r: o for r, o in zip(reads, offsets)}

    def columns(c: int, t: CombinationTerm) -> List[int]:
        # the term's D numerator columns, then its denominator column
        if t.kind == READING:
            first = where[t.src] + t.offset
            numerator = list(range(first, first + D))
            denominator = where[t.src] + widths[t.src] - 1
        else:
            first = pair_start + pairs.index((t.src, slots[c])) * D
            numerator = list(range(first, first + D))
            denominator = dot_start + t.src
        shift = 0 if t.sign > 0 else width
        return [i + shift for i in numerator + [denominator]]

    zero = [2 * width] * (D + 1)
    gathers = tuple(device_index(
        [i for c, cls in enumerate(terms)
         for i in (columns(c, cls[n]) if n < len(cls) else zero)], device)
        for n in range(max(map(len, terms), default=0)))
    layout = _layouts[key] = ClassColumns(
        reads, offsets[:-1], pairs, pair_start, dot_start, width,
        device_index([s for s, _ in pairs], device),
        device_index([s for _, s in pairs], device), gathers)
    return layout


class SingleKeys(NamedTuple):
    r"""The single-key inputs of a part's classes: per source the rows of
    its keys (:obj:`rows [sources, rows]`, 0 where none), where they exist
    (:obj:`exists`, of the queries' dtype), the mapped keys
    :obj:`[sources, rows, H, r]` and their dots with the queries
    :obj:`[sources, rows, H]` (0 where none), and per (source, slot) pair
    the flat row of its values (:obj:`value_rows [pairs, rows]`, in the
    values viewed :obj:`[inputs * slots, H * D]`) and the values
    :obj:`[pairs, rows, H, D]`."""
    rows: Tensor
    exists: Tensor
    keys: Tensor
    dots: Tensor
    value_rows: Tensor
    values: Tensor


def single_keys(layout: ClassColumns, phi_q: Tensor, phi_k: Tensor,
                positions: Sequence[Tensor], values: Tensor) -> SingleKeys:
    r"""The :class:`SingleKeys` of :obj:`positions` (one gather of keys,
    one of values)."""
    rows, H, r = phi_q.shape
    D, sources = values.size(-1), len(positions)
    where = torch.stack(list(positions)) if positions else \
        torch.empty(0, rows, dtype=torch.long, device=phi_q.device)
    exists = (where >= 0).to(phi_q.dtype)
    where = where.clamp(min=0)
    keys = phi_k.reshape(phi_k.size(0), H * r).index_select(
        0, where.flatten()).view(sources, rows, H, r)
    dots = (phi_q * keys).sum(-1) * exists.unsqueeze(-1)
    value_rows = where.index_select(0, layout.pair_source) * values.size(1) \
        + layout.pair_slot.unsqueeze(-1)
    gathered = values.reshape(-1, H * D).index_select(
        0, value_rows.flatten()).view(len(layout.pairs), rows, H, D)
    return SingleKeys(where, exists, keys, dots, value_rows, gathered)


def torch_combine_classes(terms: Sequence[Sequence[CombinationTerm]],
                          readings: Sequence[Tensor], phi_q: Tensor,
                          phi_k: Tensor, positions: Sequence[Tensor],
                          values: Tensor, slots: Sequence[int],
                          nonempty: Tensor, eps: float,
                          with_denominators: bool = False
                          ) -> Union[Tensor, Tuple[Tensor, Tensor]]:
    r"""All aggregating classes of one output part, from their terms, with
    torch operations :obj:`[rows, classes, H, D]` (with
    :obj:`with_denominators`, also the denominators :obj:`[rows, classes,
    H]` before their floor): the part's columns (:class:`ClassColumns`)
    gathered once per term position, so that the number of operations
    does not grow with the number of terms
    (:func:`~torch_geometric_hot.testing.combine_classes_reference` adds
    them up term by term).

    Args:
        terms (list): Per class, its :class:`CombinationTerm` list.
        readings (list): Summary readings :obj:`[rows, H, width]` whose
            last column is the denominator (those the terms read).
        phi_q (torch.Tensor): Mapped queries :obj:`[rows, H, r]`.
        phi_k (torch.Tensor): Mapped keys :obj:`[inputs, H, r]`.
        positions (list): Per single-key source, the input row of every
            query row's key :obj:`[rows]` (long; -1 where the key does not
            exist).
        values (torch.Tensor): Values :obj:`[inputs, slots, H, D]`.
        slots (list): Per class, its slot in :obj:`values`.
        nonempty (torch.Tensor): :obj:`[rows, classes]`, false where the
            class's group is empty (output 0).
        eps (float): Floor of the denominator.
        with_denominators (bool): Return the denominators too.
    """
    layout = _layout_of(terms, [t.size(-1) for t in readings], positions,
                        values, slots)
    keys = single_keys(layout, phi_q, phi_k, positions, values)
    signed = _signed_columns(layout, readings, keys)
    total = signed.index_select(-1, layout.gathers[0]) if layout.gathers \
        else signed.new_zeros(signed.shape[:2] + (0, ))
    for gather in layout.gathers[1:]:
        total = total + signed.index_select(-1, gather)
    rows, H, classes, D = phi_q.size(0), phi_q.size(1), len(terms), \
        values.size(-1)
    total = total.view(rows, H, classes, D + 1).transpose(1, 2)
    den = total[..., D]
    out = (total[..., :D] / den.clamp(min=eps).unsqueeze(-1) *
           nonempty.view(rows, classes, 1, 1).to(total.dtype)).contiguous()
    return (out, den.contiguous()) if with_denominators else out


def _layout_of(terms, widths, positions, values, slots) -> ClassColumns:
    return class_columns(terms, dict(enumerate(widths)), slots,
                         len(positions), values.size(-1), values.device)


def _signed_columns(layout: ClassColumns, readings: Sequence[Tensor],
                    keys: SingleKeys) -> Tensor:
    # [rows, H, 2W + 1]: the columns, their negatives, a zero column
    rows, H, D = keys.dots.size(1), keys.dots.size(2), keys.values.size(-1)
    numerators = keys.dots.index_select(0, layout.pair_source).unsqueeze(
        -1) * keys.values  # [pairs, rows, H, D]
    columns = torch.cat([*(readings[r] for r in layout.reads),
                         numerators.permute(1, 2, 0, 3).reshape(
                             rows, H, len(layout.pairs) * D),
                         keys.dots.permute(1, 2, 0)], -1)
    return torch.cat([columns, columns.neg(), columns.new_zeros(rows, H, 1)],
                     -1)


def torch_combine_classes_backward(
        terms: Sequence[Sequence[CombinationTerm]], widths: Sequence[int],
        phi_q: Tensor, phi_k: Tensor, positions: Sequence[Tensor],
        values: Tensor, slots: Sequence[int], nonempty: Tensor, eps: float,
        out: Tensor, den: Tensor,
        grad: Tensor, grad_q: Tensor, grad_k: Tensor, grad_v: Tensor
        ) -> Dict[int, Tensor]:
    r"""The adjoint of :func:`torch_combine_classes` (its outputs
    :obj:`out` and :obj:`den` given, the readings by their
    :obj:`widths`): adds the gradients of :obj:`grad` to :obj:`grad_q`,
    :obj:`grad_k` and :obj:`grad_v` (contiguous, shaped as the queries,
    keys and values) and returns those of the readings the terms read
    (reading: gradient)."""
    layout = _layout_of(terms, widths, positions, values, slots)
    keys = single_keys(layout, phi_q, phi_k, positions, values)
    rows, classes, H, D = grad.shape
    grad = grad * nonempty.view(rows, classes, 1, 1).to(grad.dtype)
    floor = den.clamp(min=eps)
    total = torch.cat([grad / floor.unsqueeze(-1),
                       (-(grad * out).sum(-1) / floor *
                        (den >= eps)).unsqueeze(-1)], -1)
    total = total.transpose(1, 2).reshape(rows, H, classes * (D + 1))
    signed = grad.new_zeros(rows, H, 2 * layout.width + 1)
    for gather in layout.gathers:
        signed.index_add_(-1, gather, total)
    W = layout.width
    columns = signed[..., :W] - signed[..., W:2 * W]
    grad_readings = {r: columns[..., o:o + widths[r]]
                     for r, o in zip(layout.reads, layout.offsets)}
    pairs = len(layout.pairs)
    if not keys.rows.numel():
        return grad_readings
    grad_numerators = columns[..., layout.pair_start:layout.dot_start] \
        .reshape(rows, H, pairs, D).permute(2, 0, 1, 3)
    grad_dots = columns[..., layout.dot_start:].permute(2, 0, 1).index_add(
        0, layout.pair_source, (grad_numerators * keys.values).sum(-1))
    grad_v.view(-1, H * D).index_add_(
        0, keys.value_rows.flatten(),
        (keys.dots.index_select(0, layout.pair_source).unsqueeze(-1) *
         grad_numerators).reshape(-1, H * D))
    grad_dots = (grad_dots * keys.exists.unsqueeze(-1)).unsqueeze(-1)
    grad_q += (grad_dots * keys.keys).sum(0)
    features = H * phi_q.size(-1)
    grad_k.view(grad_k.size(0), features).index_add_(
        0, keys.rows.flatten(),
        (grad_dots * phi_q).reshape(keys.rows.numel(), features))
    return grad_readings


def combination_table(terms: Sequence[Sequence[CombinationTerm]],
                      device: torch.device) -> native.CombinationTable:
    r"""The terms of a part's classes as the native kernels' tables."""
    flat = [t for class_terms in terms for t in class_terms]
    start = [0]
    for class_terms in terms:
        start.append(start[-1] + len(class_terms))

    def column(values: List[int]) -> Tensor:
        return torch.tensor(values, dtype=torch.long, device=device)

    return native.CombinationTable(
        column(start), column([t.kind for t in flat]),
        column([t.sign for t in flat]), column([t.src for t in flat]),
        column([t.offset for t in flat]))


def check_combination(terms: Sequence[Sequence[CombinationTerm]],
                      widths: Sequence[int], phi_q: Tensor, phi_k: Tensor,
                      positions: Sequence[Tensor], values: Tensor,
                      slots: Sequence[int], nonempty: Tensor) -> None:
    r"""The argument checks of :func:`torch_combine_classes` (the native
    kernel reads memory at these shapes and rows), for readings of the
    given widths."""
    rows, (inputs, num_slots, H, D) = nonempty.size(0), values.shape
    if not len(terms) == len(slots) == nonempty.size(1):
        raise ValueError(f'need one term list and one value slot per '
                         f'class ({nonempty.size(1)} classes), got '
                         f'{len(terms)} and {len(slots)}')
    if any(not 0 <= s < num_slots for s in slots):
        raise IndexError(f'value slot out of range [0, {num_slots})')
    if any(not 0 <= t.src < len(widths) for cls in terms for t in cls
           if t.kind == READING):
        raise IndexError(f'a reading term reads beyond the {len(widths)} '
                         f'readings')
    if phi_q.shape[:2] != (rows, H) or any(
                widths[term.src] < term.offset + D + 1 for cls in terms
                for term in cls if term.kind == READING) or \
            phi_k.shape != (inputs, H, phi_q.size(-1)):
        raise ValueError('readings, queries, keys and values must agree in '
                         'rows, heads and channels')
    if any(t.src >= len(positions) for cls in terms for t in cls
           if t.kind == SINGLE_KEY):
        raise ValueError('single-key terms need a position list each')
    for p in positions:
        if p.shape != (rows, ) or p.dtype != torch.long:
            raise ValueError(f'positions must be long tensors of {rows} '
                             f'rows, got {p.dtype} {tuple(p.shape)}')
        if p.numel() and (int(p.min()) < -1 or int(p.max()) >= inputs):
            raise IndexError('single-key position out of range')
