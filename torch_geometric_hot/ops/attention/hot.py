r"""The one entry point of HOT's class attention: the aggregating classes of
every output part of a layer attend, on the path the rule of
:mod:`~torch_geometric_hot.ops.attention.dispatch` picks
(``docs/design.md``, "Paths")."""
from typing import Dict, List, Optional, Sequence, Tuple, Union

import torch
from torch import Tensor

from torch_geometric_hot.ops.attention import dispatch
from torch_geometric_hot.ops.attention.dropout import class_seed, \
    draw_seed, drop_outputs
from torch_geometric_hot.ops.attention.grouped import grouped_class_attention
from torch_geometric_hot.ops.attention.packed import packed_class_attention
from torch_geometric_hot.ops.attention.padded import \
    global_block_attention, global_class_softmax
from torch_geometric_hot.ops.attention.pairs import local_class_softmax, \
    softmax_class_attention
from torch_geometric_hot.ops.attention.pooled import kernel_class_attention
from torch_geometric_hot.ops.attention.projection import Projection, \
    project_outputs
from torch_geometric_hot.ops.basis import EquivariantClass
from torch_geometric_hot.ops.equivariant import Target, \
    class_counts, summary_counts
from torch_geometric_hot.ops.key_groups import attention_index
from torch_geometric_hot.ops.plan_cache import is_planned, view_plan
from torch_geometric_hot.ops.pooled_combination import ValueProjection

__all__ = ['hot_class_attention', 'project_outputs', 'Projection',
           'ValueProjection', 'SIZE_SCALERS']

#: The functions :math:`s(c)` of a key group's size that
#: :func:`hot_class_attention` may multiply a class's output by.
SIZE_SCALERS = ('none', 'log', 'sqrt', 'count')

#: Attention weights by ``'{part}/{class}'``: (index [2, pairs],
#: alpha [pairs, H]), the index holding (row within the part, input row).
Weights = Dict[str, Tuple[Tensor, Tensor]]


def hot_class_attention(attention: str, targets: Sequence[Target],
                        classes: Sequence[Sequence[EquivariantClass]],
                        slots: Sequence[Sequence[int]], view, in_order: int,
                        out_order: int, queries: Tensor, keys: Tensor,
                        values: ValueProjection, exact: bool = True,
                        dropout: float = 0.0,
                        weights: Optional[Weights] = None,
                        path: Optional[str] = None,
                        size_scaler: str = 'none',
                        projection: Optional[Projection] = None
                        ) -> Union[List[Optional[Tensor]], Tensor]:
    r"""Attention of the aggregating classes of every output part of a HOT
    layer.

    Args:
        attention (str): ``'softmax'`` or ``'kernel'``.
        targets (list): The output parts, in the order of the query rows.
        classes (list): Per part, its aggregating classes (maybe none).
        slots (list): Per part, per class, its value slot.
        view: Index bundle.
        in_order (int): Input order.
        out_order (int): Output order.
        queries (torch.Tensor): Queries :obj:`[rows, H, d]` of all parts,
            one part's rows after the other's (scaled for softmax
            attention, mapped by the feature map for kernel attention).
        keys (torch.Tensor): Keys :obj:`[inputs, H, d]` (mapped for kernel
            attention).
        values (ValueProjection): The value projection of all classes.
        exact (bool): Keep the distinct-index exclusions (kernel
            attention; softmax attention is always exact).
        dropout (float): Dropout probability on the attention weights
            (softmax) or on each class's output (kernel); 0 outside
            training. One seed per call, drawn from torch's default
            generator (:mod:`~torch_geometric_hot.ops.attention.dropout`):
            every path draws the same factors.
        weights (dict, optional): Filled with the attention weights of
            every class (softmax attention; path ``'pairs'``).
        path (str, optional): Force a path of
            :data:`~torch_geometric_hot.ops.attention.dispatch.PATHS`.
        size_scaler (str): Multiply every class's output by :math:`s(c)`
            of its key group's size :math:`c` for the output row
            (:data:`SIZE_SCALERS`: ``'log'`` :math:`\log(1 + c)`,
            ``'sqrt'`` :math:`\sqrt{c}`, ``'count'`` :math:`c`); the sizes
            are kept with the view.
        projection (Projection, optional): The layer's output projections:
            then the layer's output
            (:func:`~torch_geometric_hot.ops.attention.projection.project_outputs`;
            the packed path projects the parts it attends together in one
            product).

    Returns:
        Per part, its classes' outputs :obj:`[rows, classes, H, d_v]`, or
        :obj:`None` for a part without classes; with :obj:`projection` the
        layer's output :obj:`[elements, F_out]`.
    """
    if size_scaler not in SIZE_SCALERS:
        raise ValueError(f"'size_scaler' must be one of {SIZE_SCALERS}, got "
                         f"{size_scaler!r}")
    names = [p for p, part in enumerate(classes) if part]
    outs: List[Optional[Tensor]] = [None] * len(targets)
    if not names:
        return outs if projection is None else project_outputs(
            outs, targets, slots, projection, view)
    scales = None if size_scaler == 'none' else [
        _size_scales(view, in_order, target, part, size_scaler,
                     values.x.dtype) if part else None
        for target, part in zip(targets, classes)]
    if scales is not None and projection is not None:  # scaled there
        projection = projection._replace(scales=scales, scales_key=(
            'size_scale', in_order, size_scaler,
            tuple(t.part for t in targets),
            tuple(tuple(c.name for c in part) for part in classes),
            values.x.dtype))
    rows, start = [], 0
    for target in targets:
        rows.append(slice(start, start + target.num_rows))
        start += target.num_rows
    problem = dispatch.problem('hot', attention, (queries, keys),
                               queries.device, weights=weights is not None,
                               in_order=in_order, out_order=out_order,
                               view=view, planned=is_planned(view))
    chosen = dispatch.choose(problem, path)
    seed = draw_seed(dropout, queries.device)
    part_targets = [targets[p] for p in names]
    part_classes = [classes[p] for p in names]
    part_slots = [slots[p] for p in names]
    if chosen == 'grouped':
        results = grouped_class_attention(
            part_classes, part_targets, view, in_order,
            [queries[rows[p]] for p in names], keys, values, part_slots,
            dropout, seed)
    elif chosen in ('packed', 'pooled'):
        if len(names) < len(targets):  # the parts with classes only
            queries = torch.cat([queries[rows[p]] for p in names])
        if chosen == 'packed':
            device_type = problem.device_type
            # the projection in the packed path where no output dropout
            # follows the attention and every part attends
            projected = projection is not None and \
                (attention == 'softmax' or seed is None) and \
                len(names) == len(targets)
            results = packed_class_attention(
                attention, part_classes, part_targets, view, in_order,
                queries, keys, values, part_slots, exact, dropout=dropout,
                seed=seed, ratio=dispatch.bucket_ratio(device_type),
                local_on_pairs=dispatch.local_softmax_on_pairs(device_type),
                projection=projection if projected else None)
            if projected:
                return results
        else:
            results = kernel_class_attention(
                part_classes, part_targets, view, in_order, queries, keys,
                values, part_slots, exact)
        if attention == 'kernel' and seed is not None:
            results = [drop_outputs(out, [class_seed(seed, slot)
                                          for slot in part], dropout)
                       for out, part in zip(results, part_slots)]
    else:  # class by class
        v = values.values().unbind(1)  # one backward for all classes
        results = []
        for p in names:
            q, per_class = queries[rows[p]], []
            for cls, slot in zip(classes[p], slots[p]):
                drawn = None if seed is None else class_seed(seed, slot)
                if chosen == 'pairs' or chosen == 'padded' and \
                        cls.kind != 'global':
                    out, alpha = softmax_class_attention(
                        cls, targets[p], view, in_order, q, keys, v[slot],
                        dropout, dropout > 0, drawn)
                    if weights is not None:
                        weights[f'{targets[p].part}/{cls.name}'] = alpha
                else:  # 'padded' (a global class) or 'compiled'
                    operator = global_block_attention \
                        if chosen == 'padded' else global_class_softmax \
                        if cls.kind == 'global' else local_class_softmax
                    out = operator(q, keys, v[slot], *attention_index(
                        cls, targets[p], view, in_order), dropout, drawn)
                per_class.append(out)
            results.append(torch.stack(per_class, 1))
    for p, result in zip(names, results):
        if scales is not None and projection is None:
            result = result * scales[p].to(result.dtype).view(
                targets[p].num_rows, len(classes[p]), 1, 1)
        outs[p] = result
    return outs if projection is None else project_outputs(
        outs, targets, slots, projection, view)


def _size_scales(view, in_order: int, target: Target,
                 classes: Sequence[EquivariantClass], size_scaler: str,
                 dtype: torch.dtype) -> Tensor:
    r""":math:`s(c_\mu(\mathbf{j}))` of every class for every output row,
    :obj:`[rows, classes]`, kept with the view."""
    def scales() -> Tensor:
        counts = summary_counts(view, in_order)
        size = torch.stack([class_counts(cls, target, counts)
                            for cls in classes], 1).to(dtype)
        if size_scaler == 'log':
            return torch.log1p(size)
        if size_scaler == 'sqrt':
            return size.sqrt()
        return size
    return view_plan(view, ('size_scale', in_order, target.part, size_scaler,
                            tuple(c.name for c in classes), dtype), scales,
                     keep=target.part != 'hyperedge')
