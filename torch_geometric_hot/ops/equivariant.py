r"""Exact O(n + m) evaluation of the equivariant basis on sparse input.

:func:`input_summaries` computes, once per input, the few node- and
graph-level sums every class is built from; :class:`Target` knows, for one
output part (diagonal entries, off-diagonal entries, nodes, graphs or
hyperedges), where each term of a class reads those summaries. Linear layers
(:func:`equivariant_linear`), class counts (:func:`class_counts`) and the
kernel attention of :mod:`torch_geometric_hot.ops.kernel_attention` are all
written against these two pieces.
"""
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

import torch
from torch import Tensor

from torch_geometric_hot.ops.basis import EquivariantClass
from torch_geometric_hot.ops.layout_device import layout_device
from torch_geometric_hot.ops.plan_cache import view_plan
from torch_geometric_hot.ops.planned_gather import gather_rows, \
    inverse_index
from torch_geometric_hot.ops.scatter import scatter_sum

Index = Tuple[Tensor, Optional[Tensor]]  # gather positions, optional mask


def index_range(view, of: str) -> Tensor:
    r""":math:`0, \ldots, n - 1` over the view's ``'nodes'`` or
    ``'graphs'``, kept with the view (made once per batch)."""
    count = view.num_nodes if of == 'nodes' else view.num_graphs
    return view_plan(view, ('range', of), lambda: torch.arange(
        count, device=view.batch.device))


class Target:
    r"""One output part and the positions its selectors read.

    Args:
        part (str): ``'diag'``, ``'off'``, ``'node'``, ``'graph'`` or
            ``'hyperedge'``.
        view (PairView): Index bundle of the batch (for order-1 data, any
            object with :obj:`batch`, :obj:`num_nodes`, :obj:`num_graphs`
            works for the ``'node'`` and ``'graph'`` parts).
        hyperedge_index (torch.Tensor, optional): :obj:`[k, h]` distinct-node
            tuples, for the ``'hyperedge'`` part.
    """
    def __init__(self, part: str, view,
                 hyperedge_index: Optional[Tensor] = None) -> None:
        self.part = part
        self.view = view
        self.hyperedge_index = hyperedge_index
        if part in ('diag', 'node'):  # one row per node, i = j
            self.num_rows = view.num_nodes
            nodes = index_range(view, 'nodes')
            self._nodes = (nodes, nodes)
            self.graph = view.batch
        elif part == 'off':
            self.num_rows = view.off_pos.numel()
            self._nodes = (view.off_row, view.off_col)
            self.graph = view.off_batch
        elif part == 'graph':
            self.num_rows = view.num_graphs
            self._nodes = None
            self.graph = index_range(view, 'graphs')
        elif part == 'hyperedge':
            if hyperedge_index is None:
                raise ValueError("the 'hyperedge' part needs "
                                 "'hyperedge_index'")
            self.num_rows = hyperedge_index.size(1)
            self._nodes = tuple(hyperedge_index)
            self.graph = view.batch[hyperedge_index[0]] if \
                self.num_rows else hyperedge_index[0]
        else:
            raise ValueError(f"unknown output part {part!r}")

    def node(self, selector) -> Tensor:
        if self._nodes is None:
            raise ValueError(f"selector {selector!r} needs nodes, but the "
                             f"'{self.part}' part has none")
        position = {'i': 0, 'j': 1}.get(selector, selector)
        return self._nodes[position]

    def position(self, selector) -> Tensor:
        r"""Node (``'i'``, ``'j'``, hyperedge slot) or graph (``'g'``) that
        a node- or graph-level term reads, per output row."""
        return self.graph if selector == 'g' else self.node(selector)

    def index(self, summary: str, selector) -> Index:
        r"""Where the term :obj:`(summary, selector)` reads, per output row:
        positions into the summary's rows and an optional 0/1 mask."""
        if summary in ('E', 'ET') and selector != 'g':
            if self.part == 'diag':
                return self.view.diag_pos, None
            if self.part != 'off' or selector != 'self':
                raise ValueError(f"term ({summary}, {selector}) is not "
                                 f"defined on the '{self.part}' part")
            if summary == 'E':
                return self.view.off_pos, None
            return self.view.off_transpose, self.view.off_has_transpose
        return self.position(selector), None


def gather(summary: Tensor, index: Index) -> Tensor:
    r"""Rows of :obj:`summary` at :obj:`index` (masked rows are zero)."""
    position, mask = index
    out = summary.index_select(0, position)
    if mask is not None:
        out = out * mask.view((-1, ) + (1, ) * (out.dim() - 1)).to(out.dtype)
    return out


def needed_summaries(classes: Iterable[EquivariantClass]) -> List[str]:
    r"""Names of the summaries the classes read, in first-use order."""
    return list(dict.fromkeys(s for c in classes for _, s, _ in c.terms))


def input_summaries(x: Tensor, view, in_order: int,
                    names: Sequence[str]) -> Dict[str, Tensor]:
    r"""The summaries (``docs/design.md``, "The 15 classes of 2→2")
    that :obj:`names` asks for.

    Args:
        x (torch.Tensor): Order-2 input :obj:`[P, *]` (pair entries) or
            order-1 input :obj:`[n, *]` (nodes).
        view: :class:`PairView` (order 2) or anything with :obj:`batch`,
            :obj:`num_nodes` and :obj:`num_graphs` (order 1).
        in_order (int): 1 or 2.
        names (list): Summary names.

    Returns:
        dict: ``E``/``ET``: :obj:`[P, *]`; ``D``/``R``/``C``/``X``:
        :obj:`[n, *]`; ``DS``/``ES``/``XS``: :obj:`[num_graphs, *]`.
    """
    n, b = view.num_nodes, view.num_graphs
    out: Dict[str, Tensor] = {}
    if in_order == 1:
        if 'X' in names:
            out['X'] = x
        if 'XS' in names:
            out['XS'] = scatter_sum(x, view.batch, b)
        return out
    off = x.index_select(0, view.off_pos) if any(
        s in names for s in ('R', 'C', 'ES')) else None
    if 'E' in names or 'ET' in names:
        out['E'] = out['ET'] = x
    if 'D' in names or 'DS' in names:
        diag = x.index_select(0, view.diag_pos)
        out['D'] = diag
        if 'DS' in names:
            out['DS'] = scatter_sum(diag, view.batch, b)
    if 'R' in names:
        out['R'] = scatter_sum(off, view.off_row, n)
    if 'C' in names:
        out['C'] = scatter_sum(off, view.off_col, n)
    if 'ES' in names:
        out['ES'] = scatter_sum(off, view.off_batch, b)
    return out


def summary_counts(view, in_order: int) -> Dict[str, Tensor]:
    r"""How many input elements each summary adds up (:obj:`long`)."""
    if in_order == 1:
        ones = torch.ones(view.num_nodes, dtype=torch.long,
                          device=view.batch.device)
        return {'X': ones, 'XS': view.nodes_per_graph}
    entries = torch.ones(view.num_entries, dtype=torch.long,
                         device=view.batch.device)
    nodes = torch.ones(view.num_nodes, dtype=torch.long,
                       device=view.batch.device)
    return {
        'E': entries, 'ET': entries, 'D': nodes, 'R': view.deg_out,
        'C': view.deg_in, 'DS': view.nodes_per_graph,
        'ES': view.edges_per_graph
    }


def class_counts(cls: EquivariantClass, target: Target,
                 counts: Dict[str, Tensor]) -> Tensor:
    r"""Exact size of the class's sum for every output row, :obj:`[rows]`
    (the same signed terms evaluated on the all-ones input)."""
    return evaluate_class(cls, target, counts)


def inverse_counts(cls: EquivariantClass, target: Target,
                   counts: Dict[str, Tensor], dtype: torch.dtype) -> Tensor:
    r""":math:`1 / c_\mu` per output row, 0 where the group is empty."""
    count = class_counts(cls, target, counts).to(dtype)
    return torch.where(count > 0, count.clamp(min=1).reciprocal(), 0.0)


def evaluate_class(cls: EquivariantClass, target: Target,
                   summaries: Dict[str, Tensor]) -> Tensor:
    r"""The class's (unnormalised) sum for every output row."""
    out = None
    for sign, name, selector in cls.terms:
        term = gather(summaries[name], target.index(name, selector))
        out = (term if sign > 0 else -term) if out is None else (
            out + term if sign > 0 else out - term)
    return out


def equivariant_linear(x: Tensor, view, in_order: int,
                       classes: Sequence[EquivariantClass], weight: Tensor,
                       target: Target, normalize: str = 'sum') -> Tensor:
    r"""One output part of an equivariant linear layer,
    :math:`\sum_\mu c_\mu^{-1} \, (\sum_{\text{terms}} \pm
    \text{summary}) \, W_\mu`, without bias.

    With ``normalize='sum'`` the weights of classes that share a term are
    merged, so every summary is projected and gathered once. With
    ``'mean'`` each class is divided by its exact count (empty groups give
    0).

    Args:
        x (torch.Tensor): Input :obj:`[P or n, C]`.
        view: The index bundle.
        in_order (int): 1 or 2.
        classes (list): Classes that write this part.
        weight (torch.Tensor): :obj:`[len(classes), C, C_out]`.
        target (Target): The output part.
        normalize (str): ``'sum'`` or ``'mean'``.

    :rtype: :class:`torch.Tensor` :obj:`[rows, C_out]`
    """
    summaries = input_summaries(x, view, in_order, needed_summaries(classes))
    out = x.new_zeros(target.num_rows, weight.size(-1))
    if normalize == 'sum':
        merged: Dict[Tuple[str, object], Tensor] = {}
        for w, cls in zip(weight, classes):
            for sign, name, selector in cls.terms:
                key = (name, selector)
                merged[key] = merged[key] + sign * w if key in merged else \
                    sign * w
        # Entry terms of a part with few rows (the diagonal) gather their
        # input rows, then project; the others project the whole input
        # (kept once for backward), then gather. Node- and graph-level
        # terms that read at the same selector are projected, added up at
        # their own (small) level and gathered once.
        at_selector: Dict[object, Tensor] = {}
        for (name, selector), w in merged.items():
            if name in ('E', 'ET'):
                index = target.index(name, selector)
                out = out + (gather(x, index) @ w
                             if 2 * target.num_rows < x.size(0) else
                             gather(x @ w, index))
                continue
            projected = summaries[name] @ w
            if selector in at_selector:
                at_selector[selector] = at_selector[selector] + projected
            else:
                at_selector[selector] = projected
        for selector, projected in at_selector.items():
            out = out + projected.index_select(0, target.position(selector))
        return out
    # the counts depend on the batch only: kept with the view
    counts = view_plan(view, ('summary_counts', in_order),
                       lambda: summary_counts(view, in_order))
    for w, cls in zip(weight, classes):
        projected = {name: summaries[name] @ w for _, name, _ in cls.terms}
        value = evaluate_class(cls, target, projected)
        if cls.aggregating:
            scale = view_plan(
                view, ('inverse_counts', in_order, target.part, cls, x.dtype),
                lambda: inverse_counts(cls, target, counts, x.dtype),
                keep=target.part != 'hyperedge')
            value = value * scale.unsqueeze(-1)
        out = out + value
    return out


def assemble_parts(parts: Dict[str, Tensor], view) -> Tensor:
    r"""Joins the per-part outputs into one tensor (diagonal and
    off-diagonal parts interleave into entry order)."""
    if 'diag' in parts:
        return view.assemble(parts['diag'], parts['off'])
    return next(iter(parts.values()))


def part_order(view) -> Tensor:
    r"""The entry of every row of the diagonal and off-diagonal parts, one
    part's rows after the other's (:func:`assemble_parts` inverts it), kept
    with the view."""
    return view_plan(view, 'part_order',
                     lambda: torch.cat([view.diag_pos, view.off_pos]))


def in_part_order(x: Tensor, view) -> Tensor:
    r"""The rows of :obj:`x` (one per entry) in :func:`part_order`. Off the
    CPU's layout the backward pass is a gather by the inverse order (a
    plan), not a scatter
    (:func:`~torch_geometric_hot.ops.planned_gather.gather_rows`)."""
    order = part_order(view)
    if layout_device(x) == 'cpu':
        return x.index_select(0, order)
    inverse = view_plan(view, 'part_order_inverse', lambda: inverse_index(
        order, torch.ones_like(order, dtype=torch.bool), order.numel()))
    return gather_rows(x, order, inverse)
