r"""The light (pointwise) 2→2 equivariant linear layer as one operation.

HOT's light layers (§4.1) keep the five pointwise classes of
:math:`L_{2 \to 2}`:

.. math::
    L(\mathbf{A})_{ii} &= A_{ii} W_1 + b_1 \\
    L(\mathbf{A})_{ij} &= A_{ij} W_2 + A_{ji} W_3 + A_{ii} W_4 + A_{jj} W_5
    + b_2 \qquad (i \ne j)

Every block of a HOT encoder runs five of them (keys, queries, the
attention's pointwise term and the two feed-forward layers), so each is
one operator, ``torch_geometric_hot::pair_light_linear``: two matrix
products, the entry-wise :math:`Y = A [W_2 \,|\, W_3]` and the node-wise
:math:`N = A_{\text{diag}} [W_1 \,|\, W_4 \,|\, W_5]`, then one pass
over the entries in which every entry gathers its terms from them
(:func:`_gather`). Its backward operator,
``torch_geometric_hot::pair_light_linear_backward``, is the same shape
transposed: one pass (:func:`_scatter`) lays out every entry's
gradient next to its transpose's and sums the gradients of every node's
row and column, then one product per gradient asked for. Nothing is kept
for the backward pass beyond the input and the weights. The passes are a
few gathers and scatters in torch (any device) and one native loop over
the entries each
(:mod:`torch_geometric_hot.ops.native`, ``pair_entries.c``) where the
native kernels take the tensors.

Where they do not (GPUs, the native kernels off, a graph traced by
:func:`torch.compile` for a GPU's layout), the layer is not that operator
but four operations under autograd, few launches whatever the batch:
every entry gathers its five terms' rows, :math:`[A_{ii} \,|\, A_{ij}
\,|\, A_{ji} \,|\, A_{ii} \,|\, A_{jj}]` with a zero row for a term the
entry lacks (:func:`light_slots`, a plan kept with the view), and one
product with the five stacked weights gives its output
(:func:`_gathered_linear`). It does 2.5 times the first form's
arithmetic and keeps the gathered rows for the backward pass, five times
the input's size. The oracle of both is the class-by-class sum
:func:`~torch_geometric_hot.testing.pair_light_linear_reference`.
"""
from typing import List, Optional, Tuple

import torch
from torch import Tensor

from torch_geometric_hot.ops import native
from torch_geometric_hot.ops.part_bias import part_bias, part_indicator
from torch_geometric_hot.ops.plan_cache import making_plans_only, view_plan

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


def _gather(y: Tensor, nodes: Tensor, row: Tensor, col: Tensor,
            transpose: Tensor, diag_pos: Tensor) -> Tensor:
    r"""Every entry's light 2→2 output :obj:`[P, C]` from the entry-wise
    products :obj:`y = [A W_2, A W_3]` :obj:`[P, 2C]` and the node-wise
    ones :obj:`nodes = [A_d W_1 + b_1, A_d W_4 + b_2, A_d W_5]`
    :obj:`[n, 3C]`: a diagonal entry :math:`(i, i)` takes its node's first
    block, an off-diagonal :math:`(i, j)` adds its own first block of
    :obj:`y`, its transpose's second and the second and third node blocks
    of :math:`i` and :math:`j` (natively where the kernels take the
    tensors)."""
    if native.applies(y, nodes):
        return native.pair_gather(y.contiguous(), nodes.contiguous(),
                                  row.contiguous(), col.contiguous(),
                                  transpose.contiguous())
    C = nodes.size(1) // 3
    out = y[:, :C] + _transposed(y[:, C:], transpose)
    out.add_(nodes[:, C:2 * C].index_select(0, row))
    out.add_(nodes[:, 2 * C:].index_select(0, col))
    return out.index_copy_(0, diag_pos, nodes[:, :C])


def _scatter(grad: Tensor, row: Tensor, col: Tensor, transpose: Tensor,
             diag_pos: Tensor, num_nodes: int) -> Tuple[Tensor, Tensor]:
    r"""The adjoint of :func:`_gather`: the gradients of :obj:`y` (every
    off-diagonal entry's gradient and its transpose's; zero on the
    diagonal) and of :obj:`nodes` (per node, its diagonal entry's gradient
    and the sums over its row's and its column's off-diagonal entries)."""
    if native.applies(grad):
        return native.pair_scatter(grad.contiguous(), row.contiguous(),
                                   col.contiguous(), transpose.contiguous(),
                                   num_nodes)
    grad_d = grad.index_select(0, diag_pos)
    entries = torch.cat([grad, _transposed(grad, transpose)], dim=1)
    entries.index_fill_(0, diag_pos, 0)
    zeros = grad.new_zeros(num_nodes, grad.size(1))
    nodes = torch.cat([grad_d, zeros.index_add(0, row, grad).sub_(grad_d),
                       zeros.index_add(0, col, grad).sub_(grad_d)], dim=1)
    return entries, nodes


def _blocks(weight: Tensor) -> Tuple[Tensor, Tensor]:
    # the entry-wise weights [W_2 | W_3] [C, 2C'] and the node-wise ones
    # [W_1 | W_4 | W_5] [C, 3C']
    w_diag, w_self, w_t, w_i, w_j = weight.unbind(0)
    return (torch.cat([w_self, w_t], dim=1),
            torch.cat([w_diag, w_i, w_j], dim=1))


@torch.library.custom_op('torch_geometric_hot::pair_light_linear',
                         mutates_args=())
def _light_op(x: Tensor, weight: Tensor, bias: Optional[Tensor],
              row: Tensor, col: Tensor, transpose: Tensor,
              diag_pos: Tensor) -> Tensor:
    # two products, then one pass over the entries
    x = x.contiguous()
    entry_w, node_w = _blocks(weight)
    y = x @ entry_w  # [P, 2C']
    nodes = x.index_select(0, diag_pos) @ node_w  # [n, 3C']
    if bias is not None:
        nodes[:, :2 * weight.size(-1)] += bias.view(1, -1)
    return _gather(y, nodes, row, col, transpose, diag_pos)


@_light_op.register_fake
def _(x, weight, bias, row, col, transpose, diag_pos):
    return x.new_empty(x.size(0), weight.size(-1))


@torch.library.custom_op('torch_geometric_hot::pair_light_linear_backward',
                         mutates_args=())
def _light_backward_op(grad: Tensor, x: Tensor, weight: Tensor, row: Tensor,
                       col: Tensor, transpose: Tensor, diag_pos: Tensor,
                       need_x: bool, need_weight: bool,
                       need_bias: bool) -> List[Tensor]:
    # one pass over the entries, then one product per gradient
    grad_y, grad_nodes = _scatter(grad.contiguous(), row, col, transpose,
                                  diag_pos, diag_pos.size(0))
    grads = []
    if need_x:
        entry_w, node_w = _blocks(weight)
        grads.append((grad_y @ entry_w.t()).index_copy_(
            0, diag_pos, grad_nodes @ node_w.t()))
    if need_weight:
        entry_w = (x.t() @ grad_y).view(x.size(1), 2, -1)
        node_w = (x.index_select(0, diag_pos).t() @ grad_nodes
                  ).view(x.size(1), 3, -1)
        grads.append(torch.stack([node_w[:, 0], entry_w[:, 0],
                                  entry_w[:, 1], node_w[:, 1], node_w[:, 2]]))
    if need_bias:
        grads.append(grad_nodes[:, :2 * weight.size(-1)].sum(0).view(2, -1))
    return grads


@_light_backward_op.register_fake
def _(grad, x, weight, row, col, transpose, diag_pos, need_x, need_weight,
      need_bias):
    shapes = [x.shape] * need_x + [weight.shape] * need_weight + \
        [(2, weight.size(-1))] * need_bias
    return [grad.new_empty(shape) for shape in shapes]


def _setup(ctx, inputs, output) -> None:
    x, weight, bias, *indices = inputs
    ctx.has_bias = bias is not None
    ctx.dtypes = (output.dtype, weight.dtype,
                  None if bias is None else bias.dtype)
    ctx.save_for_backward(x, weight, *indices)


def _grad(ctx, grad: Tensor):
    need_x, need_weight, need_bias = ctx.needs_input_grad[:3]
    need_bias = need_bias and ctx.has_bias
    # The products run in the output's dtype, as they did forward (under
    # autocast a lower precision than the weights'); each gradient is
    # returned in its input's dtype.
    dtype, weight_dtype, bias_dtype = ctx.dtypes
    x, weight, *indices = ctx.saved_tensors
    grads = iter(_light_backward_op(grad.to(dtype), x.to(dtype),
                                    weight.to(dtype), *indices, need_x,
                                    need_weight, need_bias))
    return (next(grads).to(x.dtype) if need_x else None,
            next(grads).to(weight_dtype) if need_weight else None,
            next(grads).to(bias_dtype) if need_bias else None, None, None,
            None, None)


_light_op.register_autograd(_grad, setup_context=_setup)


def light_slots(row: Tensor, col: Tensor, transpose: Tensor,
                diag_pos: Tensor) -> Tuple[Tensor, Tensor]:
    r"""The rows every entry reads for its five terms, in the order of the
    weights, :obj:`[P, 5]` (:obj:`P`, the zero row appended to the input,
    for a term the entry lacks: a diagonal entry reads only its first, an
    off-diagonal one all but its first, its transpose where present), and
    the entries' :func:`~torch_geometric_hot.ops.part_bias.part_indicator`
    :obj:`[P, 2]` (their biases' rows)."""
    on = row != col
    entry = torch.arange(row.size(0), device=row.device)
    zero = torch.full_like(entry, row.size(0))
    return torch.stack([
        torch.where(on, zero, entry), torch.where(on, entry, zero),
        torch.where(on & (transpose >= 0), transpose, zero),
        torch.where(on, diag_pos.index_select(0, row), zero),
        torch.where(on, diag_pos.index_select(0, col), zero)], 1), \
        part_indicator(on)


def _one_operator(x: Tensor, weight: Tensor) -> bool:
    # the operator where its native passes take the tensors; in a graph
    # that torch.compile traces (which cannot read the native mode), on the
    # CPU, the operator deciding when it runs
    if torch.compiler.is_compiling():
        return x.device.type == 'cpu'
    return native.applies(x, weight)


def _gathered_linear(x: Tensor, weight: Tensor, bias: Optional[Tensor],
                     slots: Tensor, parts: Tensor) -> Tensor:
    r"""The light layer as a gather of every entry's five terms' rows
    (:func:`light_slots`) and one product, under autograd."""
    P, C = x.shape
    terms = torch.nn.functional.pad(x, (0, 0, 0, 1)).index_select(
        0, slots.view(-1)).view(P, slots.size(1) * C)
    weight = weight.reshape(-1, weight.size(-1))
    if bias is None:
        return terms @ weight
    return torch.addmm(part_bias(bias, parts), terms, weight)


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
    one_operator = _one_operator(x, weight)
    if not one_operator:  # its plan: the rows of the gather
        slots = view_plan(view, 'light_slots', lambda: light_slots(
            view.row, view.col, view.transpose, view.diag_pos))
    if making_plans_only():  # index work only
        return x.new_zeros(x.size(0), weight.size(-1))
    if one_operator:
        return _light_op(x, weight, bias, view.row, view.col,
                         view.transpose, view.diag_pos)
    return _gathered_linear(x, weight, bias, *slots)
