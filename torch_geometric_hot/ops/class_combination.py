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
with torch operations (the torch backend; :func:`check_combination`
checks its arguments); the operator
``torch_geometric_hot::pooled_combination``
(:mod:`~torch_geometric_hot.ops.pooled_combination`) runs them inside
kernel attention, natively on CPU (:func:`combination_table`,
:func:`check_combination`).
"""
from typing import List, NamedTuple, Sequence, Tuple, Union

import torch
from torch import Tensor

from torch_geometric_hot.ops import native

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
    H]` before their floor).

    Args:
        terms (list): Per class, its :class:`CombinationTerm` list.
        readings (list): Summary readings :obj:`[rows, H, width]` whose
            last column is the denominator.
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
    outputs, denominators = [], []
    D = values.size(-1)
    # per single-key source, the dots with the keys [rows, H] (0 where none;
    # flat 2-D gathers: index_add, their backward, is slow in 3-D)
    dots = [(phi_q * phi_k.flatten(1).index_select(0, p.clamp(min=0)).view(
        phi_q.shape)).sum(-1) * (p >= 0).unsqueeze(-1).to(phi_q.dtype)
            for p in positions]
    for c, class_terms in enumerate(terms):
        num = den = None
        for term in class_terms:
            if term.kind == READING:
                reading = readings[term.src]
                t_num = reading[..., term.offset:term.offset + D]
                t_den = reading[..., -1]
            else:
                v = values[:, slots[c]].flatten(1).index_select(
                    0, positions[term.src].clamp(min=0)).view(
                        -1, *values.shape[2:])
                t_den = dots[term.src]
                t_num = t_den.unsqueeze(-1) * v
            if num is None:
                num, den = (t_num, t_den) if term.sign > 0 else \
                    (-t_num, -t_den)
            elif term.sign > 0:
                num, den = num + t_num, den + t_den
            else:
                num, den = num - t_num, den - t_den
        mask = nonempty[:, c].view(-1, 1, 1).to(num.dtype)
        outputs.append(num / den.clamp(min=eps).unsqueeze(-1) * mask)
        denominators.append(den)
    out = torch.stack(outputs, 1)
    return (out, torch.stack(denominators, 1)) if with_denominators else out


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
