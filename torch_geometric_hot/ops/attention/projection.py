r"""The output projections of HOT's class attention: every class's output
times its projection, summed per output part, plus the part's bias and a
residual term."""
from typing import Hashable, NamedTuple, Optional, Sequence

import torch
from torch import Tensor

from torch_geometric_hot.ops.equivariant import Target, assemble_parts
from torch_geometric_hot.ops.row_selection import select_rows


class Projection(NamedTuple):
    r"""A layer's output projections: per class :obj:`weight`
    :obj:`[classes, H * d_v, F_out]` (the row of a class is its value
    slot) and per output part its :obj:`bias` :obj:`[parts, F_out]`; with
    :obj:`scales`, per part the factor of every class's output in every
    row :obj:`[rows, classes]` (:obj:`None` for a part without classes),
    applied before the projections, :obj:`scales_key`, what the scales
    depend on besides the view (plans derived from them are kept with the
    view under it), and :obj:`residual`, a term the output adds
    :obj:`[elements, F_out]` (a layer's light linear term: where the
    output is one product, its addend)."""
    weight: Tensor
    bias: Optional[Tensor] = None
    scales: Optional[Sequence[Optional[Tensor]]] = None
    scales_key: Hashable = None
    residual: Optional[Tensor] = None


def project_outputs(outs: Sequence[Optional[Tensor]],
                    targets: Sequence[Target], slots: Sequence[Sequence[int]],
                    projection: Projection, view) -> Tensor:
    r"""The layer's output from the outputs of
    :func:`~torch_geometric_hot.ops.attention.hot.hot_class_attention`:
    each part's class outputs, times their scales :math:`s_{\mu}` where
    the projection has them, times their output projections,

    .. math::
        \mathbf{Y}_{\mathbf{j}} = \sum_{\mu} s_{\mu}(\mathbf{j})
        \sum_{h=1}^{H} \mathbf{o}^{h,\mu}_{\mathbf{j}}
        \mathbf{W}^{O}_{h,\mu} + \mathbf{b}_{\text{part}}
        + \mathbf{R}_{\mathbf{j}},

    in one product per part, the parts then assembled into the output rows
    (pair entries in entry order), plus the residual :math:`\mathbf{R}`
    where the projection has one.

    Args:
        outs (list): Per part, :obj:`[rows, classes, H, d_v]` or
            :obj:`None` (a part without classes: its bias only).
        targets (list): The output parts.
        slots (list): Per part, per class, its value slot (its row of
            :obj:`weight`).
        projection (Projection): The output projections, biases, scales
            and residual.
        view: Index bundle.

    :rtype: :class:`torch.Tensor` :obj:`[elements, F_out]`
    """
    weight, bias, scales = projection.weight, projection.bias, \
        projection.scales
    dtype = next((out.dtype for out in outs if out is not None),
                 weight.dtype)
    parts = {}
    for p, (out, target) in enumerate(zip(outs, targets)):
        if out is None:  # its bias only
            y = weight.new_zeros(target.num_rows, weight.size(-1),
                                 dtype=dtype)
            parts[target.part] = y if bias is None else y + bias[p]
            continue
        if scales is not None:
            out = out * scales[p].to(out.dtype)[:, :, None, None]
        matrix = select_rows(weight, slots[p]).flatten(0, 1)
        out = out.reshape(target.num_rows, matrix.size(0))
        parts[target.part] = out @ matrix if bias is None else \
            torch.addmm(bias[p], out, matrix)
    out = assemble_parts(parts, view)
    return out if projection.residual is None else out + projection.residual
