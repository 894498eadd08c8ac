r"""The output projections of HOT's class attention: every class's output
times its projection, summed per output part, plus the part's bias."""
from typing import NamedTuple, Optional, Sequence

import torch
from torch import Tensor

from torch_geometric_hot.ops.equivariant import Target, assemble_parts
from torch_geometric_hot.ops.row_selection import select_rows


class Projection(NamedTuple):
    r"""A layer's output projections: per class :obj:`weight`
    :obj:`[classes, H * d_v, F_out]` (the row of a class is its value
    slot) and per output part its :obj:`bias` :obj:`[parts, F_out]`."""
    weight: Tensor
    bias: Optional[Tensor] = None


def project_outputs(outs: Sequence[Optional[Tensor]],
                    targets: Sequence[Target], slots: Sequence[Sequence[int]],
                    weight: Tensor, bias: Optional[Tensor], view) -> Tensor:
    r"""The layer's output from the outputs of
    :func:`~torch_geometric_hot.ops.attention.hot.hot_class_attention`:
    each part's class outputs times their output projections,

    .. math::
        \mathbf{Y}_{\mathbf{j}} = \sum_{\mu} \sum_{h=1}^{H}
        \mathbf{o}^{h,\mu}_{\mathbf{j}} \mathbf{W}^{O}_{h,\mu}
        + \mathbf{b}_{\text{part}},

    in one product per part, the parts then assembled into the output rows
    (pair entries in entry order).

    Args:
        outs (list): Per part, :obj:`[rows, classes, H, d_v]` or
            :obj:`None` (a part without classes: its bias only).
        targets (list): The output parts.
        slots (list): Per part, per class, its value slot (its row of
            :obj:`weight`).
        weight (torch.Tensor): The output projections
            :obj:`[classes, H * d_v, F_out]`.
        bias (torch.Tensor, optional): Per part, its bias
            :obj:`[parts, F_out]`.
        view: Index bundle.

    :rtype: :class:`torch.Tensor` :obj:`[elements, F_out]`
    """
    dtype = next((out.dtype for out in outs if out is not None),
                 weight.dtype)
    parts = {}
    for p, (out, target) in enumerate(zip(outs, targets)):
        if out is None:  # its bias only
            y = weight.new_zeros(target.num_rows, weight.size(-1),
                                 dtype=dtype)
            parts[target.part] = y if bias is None else y + bias[p]
            continue
        projection = select_rows(weight, slots[p]).flatten(0, 1)
        out = out.reshape(target.num_rows, projection.size(0))
        parts[target.part] = out @ projection if bias is None else \
            torch.addmm(bias[p], out, projection)
    return assemble_parts(parts, view)
