r"""The light (pointwise) 2→2 equivariant linear layer as one operation.

HOT's light layers (§4.1) keep the five pointwise classes of
:math:`L_{2 \to 2}`:

.. math::
    L(\mathbf{A})_{ii} &= A_{ii} W_1 + b_1 \\
    L(\mathbf{A})_{ij} &= A_{ij} W_2 + A_{ji} W_3 + A_{ii} W_4 + A_{jj} W_5
    + b_2 \qquad (i \ne j)

Every block of a HOT encoder runs five of them (keys, queries, the
attention's pointwise term and the two feed-forward layers), so they are
written here as two entry-sized matrix products and a few gathers, with a
backward pass that reuses the same shape: the transpose term's gradient is
the transposed gradient times :math:`W_3^\top`, and the diagonal entries'
gradients come from per-node sums of the gradient. No
:obj:`[entries, C]` buffer is zero-filled, and nothing is kept for backward
beyond the input. :func:`pair_light_linear_reference` (the class-by-class
sum) is the oracle.
"""
from typing import Optional, Tuple

import torch
from torch import Tensor

#: (part, terms) of the light 2→2 classes, in the order of the weights.
LIGHT_PAIR_CLASSES = (('diag', ((1, 'E', 'self'), )),
                      ('off', ((1, 'E', 'self'), )),
                      ('off', ((1, 'ET', 'self'), )),
                      ('off', ((1, 'D', 'i'), )),
                      ('off', ((1, 'D', 'j'), )))


def _transposed(x: Tensor, view) -> Tensor:
    # x[(j, i)] at every off-diagonal entry (i, j), 0 where (j, i) is
    # absent; a diagonal entry reads itself
    out = x.index_select(0, view.entry_transpose)
    if not view.all_transposes:
        out.masked_fill_(view.missing_transpose.unsqueeze(-1), 0)
    return out


class _PairLightLinear(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: Tensor, weight: Tensor, bias: Optional[Tensor],
                view) -> Tensor:
        x = x.contiguous()
        w_diag, w_self, w_t, w_i, w_j = weight.unbind(0)
        xd = x.index_select(0, view.diag_pos)  # [n, C]
        # Every entry as off-diagonal, then the diagonal rows replaced.
        out = torch.mm(x, w_self)
        out.addmm_(_transposed(x, view), w_t)
        at_i, at_j = xd @ w_i, xd @ w_j  # [n, C']
        diag = xd @ w_diag
        if bias is not None:
            at_i, diag = at_i + bias[1], diag + bias[0]
        out.add_(at_i.index_select(0, view.row))
        out.add_(at_j.index_select(0, view.col))
        out.index_copy_(0, view.diag_pos, diag)
        ctx.view, ctx.has_bias = view, bias is not None
        ctx.save_for_backward(x, weight)
        return out

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad: Tensor) -> Tuple:
        x, weight = ctx.saved_tensors
        view = ctx.view
        need_x, need_w, need_b = ctx.needs_input_grad[:3]
        grad = grad.contiguous()
        w_diag, w_self, w_t, w_i, w_j = weight.unbind(0)
        grad_d = grad.index_select(0, view.diag_pos)  # [n, C']
        grad_t = _transposed(grad, view)
        n = view.num_nodes
        # per node: the gradients of the off-diagonal entries of its row
        # (that read A_ii through W_4) and of its column (A_jj through W_5)
        at_i = grad.new_zeros(n, grad.size(1)).index_add_(
            0, view.row, grad).sub_(grad_d)
        at_j = grad.new_zeros(n, grad.size(1)).index_add_(
            0, view.col, grad).sub_(grad_d)
        grad_x = grad_w = grad_b = None
        if need_x:
            grad_x = torch.mm(grad, w_self.t())
            grad_x.addmm_(grad_t, w_t.t())
            grad_xd = grad_d @ w_diag.t() + at_i @ w_i.t() + at_j @ w_j.t()
            grad_x.index_copy_(0, view.diag_pos, grad_xd)
        if need_w:
            xd = x.index_select(0, view.diag_pos)
            xd_t = xd.t()
            grad_w = torch.stack([
                xd_t @ grad_d, x.t() @ grad - xd_t @ grad_d,
                x.t() @ grad_t - xd_t @ grad_d,  # grad_t[ii] = grad[ii]
                xd_t @ at_i, xd_t @ at_j
            ])
        if need_b and ctx.has_bias:
            diag_sum = grad_d.sum(0)
            grad_b = torch.stack([diag_sum, grad.sum(0) - diag_sum])
        return grad_x, grad_w, grad_b, None


def pair_light_linear(x: Tensor, view, weight: Tensor,
                      bias: Optional[Tensor] = None) -> Tensor:
    r"""The light 2→2 equivariant linear layer (the five pointwise classes
    of :data:`LIGHT_PAIR_CLASSES`) on the entries of a pair view.

    Args:
        x (torch.Tensor): Pair entries :obj:`[P, C]`.
        view (PairView): The entries' index bundle.
        weight (torch.Tensor): :obj:`[5, C, C']`, one matrix per class.
        bias (torch.Tensor, optional): :obj:`[2, C']`, diagonal then
            off-diagonal entries.

    :rtype: :class:`torch.Tensor` :obj:`[P, C']`
    """
    if weight.dim() != 3 or weight.size(0) != len(LIGHT_PAIR_CLASSES) or \
            weight.size(1) != x.size(-1):
        raise ValueError(f"'weight' must be [5, {x.size(-1)}, C_out], got "
                         f"{list(weight.shape)}")
    if bias is not None and bias.shape != (2, weight.size(-1)):
        raise ValueError(f"'bias' must be [2, {weight.size(-1)}], got "
                         f"{list(bias.shape)}")
    view.check_entries(x)
    return _PairLightLinear.apply(x, weight, bias, view)


def pair_light_linear_reference(x: Tensor, view, weight: Tensor,
                                bias: Optional[Tensor] = None) -> Tensor:
    r""":func:`pair_light_linear` class by class (the oracle)."""
    xd = x.index_select(0, view.diag_pos)
    diag = xd @ weight[0]
    off = (x.index_select(0, view.off_pos) @ weight[1] +
           view.transpose_rows(x) @ weight[2] +
           xd.index_select(0, view.off_row) @ weight[3] +
           xd.index_select(0, view.off_col) @ weight[4])
    if bias is not None:
        diag, off = diag + bias[0], off + bias[1]
    return view.assemble(diag, off)
