r"""The light (pointwise) 2→2 equivariant linear layer as one operation.

HOT's light layers (§4.1) keep the five pointwise classes of
:math:`L_{2 \to 2}`:

.. math::
    L(\mathbf{A})_{ii} &= A_{ii} W_1 + b_1 \\
    L(\mathbf{A})_{ij} &= A_{ij} W_2 + A_{ji} W_3 + A_{ii} W_4 + A_{jj} W_5
    + b_2 \qquad (i \ne j)

Every block of a HOT encoder runs five of them (keys, queries, the
attention's pointwise term and the two feed-forward layers), so they are
written here as two matrix products and one pass over the entries: the
entry-wise products :math:`Y = A [W_2 \,|\, W_3]` and the node-wise ones
:math:`N = A_{\text{diag}} [W_1 \,|\, W_4 \,|\, W_5]`, then every entry
gathers its terms from them (:func:`entry_gather`). The backward pass is
the same shape transposed: one pass (:func:`entry_scatter`) lays out
every entry's gradient next to its transpose's and sums the gradients of
every node's row and column, then four products give the input's and the
weights' gradients. Natively (:mod:`torch_geometric_hot.ops.native`,
``pair_entries.c``) each pass is one loop over the entries; otherwise a
few gathers and scatters. Nothing is kept for backward beyond the input.
:func:`pair_light_linear_reference` (the class-by-class sum) is the
oracle.
"""
from typing import Optional, Tuple

import torch
from torch import Tensor

from torch_geometric_hot.ops import native

#: (part, terms) of the light 2→2 classes, in the order of the weights.
LIGHT_PAIR_CLASSES = (('diag', ((1, 'E', 'self'), )),
                      ('off', ((1, 'E', 'self'), )),
                      ('off', ((1, 'ET', 'self'), )),
                      ('off', ((1, 'D', 'i'), )),
                      ('off', ((1, 'D', 'j'), )))


def _transposed(x: Tensor, transpose: Tensor) -> Tensor:
    # x[(j, i)] at every off-diagonal entry (i, j), 0 where (j, i) is
    # absent; a diagonal entry reads itself
    missing = transpose < 0
    return x.index_select(0, transpose.clamp(min=0)).masked_fill_(
        missing.unsqueeze(-1), 0)


def _pair_gather(y: Tensor, nodes: Tensor, row: Tensor, col: Tensor,
                 transpose: Tensor, diag_pos: Tensor) -> Tensor:
    C = nodes.size(1) // 3
    out = y[:, :C] + _transposed(y[:, C:], transpose)
    out.add_(nodes[:, C:2 * C].index_select(0, row))
    out.add_(nodes[:, 2 * C:].index_select(0, col))
    return out.index_copy_(0, diag_pos, nodes[:, :C])


def _pair_scatter(grad: Tensor, row: Tensor, col: Tensor, transpose: Tensor,
                  diag_pos: Tensor, num_nodes: int) -> Tuple[Tensor, Tensor]:
    grad_d = grad.index_select(0, diag_pos)
    entries = torch.cat([grad, _transposed(grad, transpose)], dim=1)
    entries.index_fill_(0, diag_pos, 0)
    zeros = grad.new_zeros(num_nodes, grad.size(1))
    nodes = torch.cat([grad_d, zeros.index_add(0, row, grad).sub_(grad_d),
                       zeros.index_add(0, col, grad).sub_(grad_d)], dim=1)
    return entries, nodes


@torch.library.custom_op('torch_geometric_hot::pair_gather', mutates_args=())
def _pair_gather_op(y: Tensor, nodes: Tensor, row: Tensor, col: Tensor,
                    transpose: Tensor, diag_pos: Tensor) -> Tensor:
    return _pair_gather(y, nodes, row, col, transpose, diag_pos)


@_pair_gather_op.register_fake
def _(y, nodes, row, col, transpose, diag_pos):
    return y.new_empty(y.size(0), nodes.size(1) // 3)


@_pair_gather_op.register_kernel('cpu')
def _(y, nodes, row, col, transpose, diag_pos):
    if not native.applies(y, nodes):
        return _pair_gather(y, nodes, row, col, transpose, diag_pos)
    return native.pair_gather(y.contiguous(), nodes.contiguous(),
                              row.contiguous(), col.contiguous(),
                              transpose.contiguous())


@torch.library.custom_op('torch_geometric_hot::pair_scatter', mutates_args=())
def _pair_scatter_op(grad: Tensor, row: Tensor, col: Tensor,
                     transpose: Tensor, diag_pos: Tensor,
                     num_nodes: int) -> Tuple[Tensor, Tensor]:
    return _pair_scatter(grad, row, col, transpose, diag_pos, num_nodes)


@_pair_scatter_op.register_fake
def _(grad, row, col, transpose, diag_pos, num_nodes):
    return (grad.new_empty(grad.size(0), 2 * grad.size(1)),
            grad.new_empty(num_nodes, 3 * grad.size(1)))


@_pair_scatter_op.register_kernel('cpu')
def _(grad, row, col, transpose, diag_pos, num_nodes):
    if not native.applies(grad):
        return _pair_scatter(grad, row, col, transpose, diag_pos, num_nodes)
    return native.pair_scatter(grad.contiguous(), row.contiguous(),
                               col.contiguous(), transpose.contiguous(),
                               num_nodes)


def _gather_setup(ctx, inputs, output) -> None:
    y, nodes, *indices = inputs
    ctx.save_for_backward(*indices)
    ctx.num_nodes = nodes.size(0)


def _scatter_setup(ctx, inputs, output) -> None:
    _, *indices, ctx.num_nodes = inputs
    ctx.save_for_backward(*indices)


def _pair_gather_grad(ctx, grad):
    entries, nodes = _pair_scatter_op(grad.contiguous(), *ctx.saved_tensors,
                                      ctx.num_nodes)
    return entries, nodes, None, None, None, None


def _pair_scatter_grad(ctx, grad_entries, grad_nodes):
    grad = _pair_gather_op(grad_entries.contiguous(),
                           grad_nodes.contiguous(), *ctx.saved_tensors)
    return grad, None, None, None, None, None


_pair_gather_op.register_autograd(_pair_gather_grad,
                                  setup_context=_gather_setup)
_pair_scatter_op.register_autograd(_pair_scatter_grad,
                                   setup_context=_scatter_setup)


def _indices(view) -> Tuple[Tensor, Tensor, Tensor, Tensor]:
    return view.row, view.col, view.transpose, view.diag_pos


def entry_gather(y: Tensor, nodes: Tensor, view) -> Tensor:
    r"""Every entry's light 2→2 output :obj:`[P, C]` from the entry-wise
    products :obj:`y = [A W_2, A W_3]` :obj:`[P, 2C]` and the node-wise
    ones :obj:`nodes = [A_d W_1 + b_1, A_d W_4 + b_2, A_d W_5]`
    :obj:`[n, 3C]`: a diagonal entry :math:`(i, i)` takes its node's first
    block, an off-diagonal :math:`(i, j)` adds its own first block of
    :obj:`y`, its transpose's second and the second and third node blocks
    of :math:`i` and :math:`j` (the operator
    ``torch_geometric_hot::pair_gather``, natively on CPU)."""
    return _pair_gather_op(y, nodes, *_indices(view))


def entry_scatter(grad: Tensor, view) -> Tuple[Tensor, Tensor]:
    r"""The adjoint of :func:`entry_gather`: the gradients of :obj:`y`
    (every off-diagonal entry's gradient and its transpose's; zero on the
    diagonal) and of :obj:`nodes` (per node, its diagonal entry's gradient
    and the sums over its row's and its column's off-diagonal entries; the
    operator ``torch_geometric_hot::pair_scatter``)."""
    return _pair_scatter_op(grad, *_indices(view), view.num_nodes)


class _PairLightLinear(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: Tensor, weight: Tensor, bias: Optional[Tensor],
                view) -> Tensor:
        x = x.contiguous()
        w_diag, w_self, w_t, w_i, w_j = weight.unbind(0)
        y = x @ torch.cat([w_self, w_t], dim=1)  # [P, 2C']
        nodes = x.index_select(0, view.diag_pos) @ torch.cat(
            [w_diag, w_i, w_j], dim=1)  # [n, 3C']
        if bias is not None:
            nodes[:, :2 * weight.size(-1)] += bias.view(1, -1)
        ctx.view, ctx.has_bias = view, bias is not None
        ctx.save_for_backward(x, weight)
        return entry_gather(y, nodes, view)

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad: Tensor) -> Tuple:
        x, weight = ctx.saved_tensors
        view = ctx.view
        need_x, need_w, need_b = ctx.needs_input_grad[:3]
        w_diag, w_self, w_t, w_i, w_j = weight.unbind(0)
        grad_y, grad_nodes = entry_scatter(grad, view)
        grad_x = grad_w = grad_b = None
        if need_x:
            grad_x = grad_y @ torch.cat([w_self, w_t], dim=1).t()
            grad_x.index_copy_(0, view.diag_pos, grad_nodes @ torch.cat(
                [w_diag, w_i, w_j], dim=1).t())
        if need_w:
            entry_w = (x.t() @ grad_y).view(x.size(1), 2, -1)
            node_w = (x.index_select(0, view.diag_pos).t() @ grad_nodes
                      ).view(x.size(1), 3, -1)
            grad_w = torch.stack([node_w[:, 0], entry_w[:, 0],
                                  entry_w[:, 1], node_w[:, 1], node_w[:, 2]])
        if need_b and ctx.has_bias:
            grad_b = grad_nodes[:, :2 * weight.size(-1)].sum(0).view(2, -1)
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
