r"""One output part of a ``'mean'`` equivariant linear layer in a few
operations, for layouts where every operation is a kernel launch
(``docs/design.md``, "The equivariant basis").

Every class :math:`\mu` is a signed sum of terms, each reading a summary
:math:`S_t` (the input entries, diagonal, row, column or graph sums) at a
position :math:`p_t(\mathbf{j})` of the output row. Projection and
gathering commute, so the part is one product of the gathered terms,

.. math::
    L(\mathbf{A})_{\mathbf{j}} = \sum_\mu c_\mu^{-1}(\mathbf{j})
    \sum_{t \in \mu} s_t\, S_t[p_t(\mathbf{j})]\, W_\mu
    = \big[\, a_t(\mathbf{j})\, S_t[p_t(\mathbf{j})] \,\big]_t
    \,\big[\, W_{\mu(t)} \,\big]_t,

with the coefficient :math:`a_t(\mathbf{j})` the term's sign, its
transpose mask and its class's inverse count (0 for an empty group): the
summaries stacked into one table, every row's terms gathered at once (an
index :obj:`[rows, terms]` kept with the view, :class:`TermTable`),
scaled, and multiplied by the class weights repeated per term. The class
by class evaluation of
:func:`~torch_geometric_hot.ops.equivariant.equivariant_linear` is the
reference, and the path where operations are cheap (the CPU's) or the
problem large (the rule,
:func:`~torch_geometric_hot.ops.attention.dispatch.gathers_terms`): there
the gathered terms, kept for the backward pass, would cost more memory
than the launches they save.
"""
import itertools
from typing import NamedTuple, Sequence, Tuple

import torch
from torch import Tensor

from torch_geometric_hot.ops.attention import dispatch
from torch_geometric_hot.ops.basis import EquivariantClass
from torch_geometric_hot.ops.equivariant import Target, input_summaries, \
    inverse_counts, summary_counts
from torch_geometric_hot.ops.layout_device import layout_device
from torch_geometric_hot.ops.plan_cache import making_plans_only, view_plan
from torch_geometric_hot.ops.row_selection import device_index

#: The summary a term's name reads in the stacked table (the transposed
#: entries are the entries, read at the transposed positions).
_TABLE_NAME = {'ET': 'E'}


class TermTable(NamedTuple):
    r"""Where every term of a part's classes reads, per output row: the
    summaries stacked in the table (:obj:`names`, in order), the table row
    of every term :obj:`index [rows, terms]`, its coefficient
    :obj:`coefficient [rows, terms]` (sign, transpose mask, inverse class
    count) and the class of every term :obj:`term_class [terms]`."""
    names: Tuple[str, ...]
    index: Tensor
    coefficient: Tensor
    term_class: Tensor


def term_table(view, in_order: int, classes: Sequence[EquivariantClass],
               target: Target, dtype: torch.dtype) -> TermTable:
    r"""The :class:`TermTable` of :obj:`classes` writing :obj:`target`."""
    names = tuple(dict.fromkeys(_TABLE_NAME.get(name, name) for cls in
                                classes for _, name, _ in cls.terms))
    counts = summary_counts(view, in_order)  # one per summary row
    first = dict(zip(names, itertools.accumulate(
        (counts[name].numel() for name in names), initial=0)))
    rows, coefficients, term_class = [], [], []
    for c, cls in enumerate(classes):
        scale = inverse_counts(cls, target, counts, dtype) if \
            cls.aggregating else None
        for sign, name, selector in cls.terms:
            position, mask = target.index(name, selector)
            rows.append(position + first[_TABLE_NAME.get(name, name)])
            coefficient = torch.full((target.num_rows, ), float(sign),
                                     dtype=dtype, device=position.device)
            for factor in (scale, mask):
                if factor is not None:
                    coefficient = coefficient * factor.to(dtype)
            coefficients.append(coefficient)
            term_class.append(c)
    device = view.batch.device
    return TermTable(names, torch.stack(rows, 1),
                     torch.stack(coefficients, 1),
                     device_index(term_class, device))


def applies(x: Tensor, classes: Sequence[EquivariantClass],
            target: Target) -> bool:
    r"""Whether a ``'mean'`` part is taken as :func:`mean_linear`: the
    rule's answer
    (:func:`~torch_geometric_hot.ops.attention.dispatch.gathers_terms`) for
    the layout's device (``layout_device`` of
    :mod:`~torch_geometric_hot.ops.layout_device`) and the elements the
    part would gather."""
    terms = sum(len(cls.terms) for cls in classes)
    return dispatch.gathers_terms(layout_device(x),
                                  target.num_rows * terms * x.size(-1))


def mean_linear(x: Tensor, view, in_order: int,
                classes: Sequence[EquivariantClass], weight: Tensor,
                target: Target) -> Tensor:
    r"""One output part of a ``'mean'`` equivariant linear layer, without
    bias, in one product of the gathered terms (the arguments of
    :func:`~torch_geometric_hot.ops.equivariant.equivariant_linear`).

    :rtype: :class:`torch.Tensor` :obj:`[rows, C_out]`
    """
    table = view_plan(
        view, ('mean_terms', in_order, target.part, tuple(classes), x.dtype),
        lambda: term_table(view, in_order, classes, target, x.dtype),
        keep=target.part != 'hyperedge')
    if making_plans_only():  # the planning pass: the table alone
        return x.new_zeros(target.num_rows, weight.size(-1))
    summaries = input_summaries(x, view, in_order, table.names)
    stacked = torch.cat([summaries[name] for name in table.names])
    rows, terms = table.index.shape
    channels = x.size(-1)
    gathered = stacked.index_select(0, table.index.flatten()).view(
        rows, terms, channels) * table.coefficient.unsqueeze(-1)
    return gathered.view(rows, terms * channels) @ weight.index_select(
        0, table.term_class).view(terms * channels, weight.size(-1))
