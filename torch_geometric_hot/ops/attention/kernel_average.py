r"""Kernel attention's average over a block's keys, with its backward pass
written out.

On the packed layout a block holds the kernel scores
:math:`s_{qk} = \phi(q)^\top \phi(k)` of a bin of graphs, and each class
sees some of the keys (a mask :math:`h_{qk}`, true where hidden). The
output of query :math:`q` is the average of the values it sees,

.. math::
    w_{qk} = [\lnot h_{qk}]\, s_{qk}, \qquad
    t_q = \sum_k w_{qk}, \qquad
    o_q = \frac{\sum_k w_{qk} v_k}{\max(t_q, \epsilon)},

(a query that sees no key outputs :math:`0 / \epsilon = 0`). Autograd
would take its backward pass through five nodes (the mask, the sum, the
clamp, the product and the division) in about fourteen operators; the
adjoint is short,

.. math::
    \bar{v}_k = \sum_q w_{qk} \frac{\bar{o}_q}{d_q}, \qquad
    \bar{s}_{qk} = [\lnot h_{qk}] \left(\frac{\bar{o}_q^\top v_k}{d_q}
    - [t_q \ge \epsilon] \frac{\bar{o}_q^\top o_q}{d_q}\right),

with :math:`d_q = \max(t_q, \epsilon)`: one node and nine operators, which
on a launch-bound device is host time saved per block.
:func:`kernel_average_autograd` is the same map by autograd, the reference
of the tests.
"""
import torch
from torch import Tensor


class _KernelAverage(torch.autograd.Function):
    @staticmethod
    def forward(ctx, score: Tensor, v: Tensor, hidden: Tensor,
                eps: float) -> Tensor:
        weights, total, den, out = _forward(score, v, hidden, eps)
        ctx.save_for_backward(weights, v, hidden, total, den, out)
        ctx.eps = eps
        ctx.score_shape = score.shape
        return out

    @staticmethod
    def backward(ctx, grad: Tensor):
        weights, v, hidden, total, den, out = ctx.saved_tensors
        G, C, H, Lq, Lk = weights.shape
        D = v.size(-1)
        g = grad / den  # [G, C, H, Lq, D]
        # the products in the values' dtype, as forward (under autocast
        # a lower precision than the division's)
        g_v = g.to(v.dtype).reshape(G * C * H, Lq, D)
        grad_v = None
        if ctx.needs_input_grad[1]:
            grad_v = torch.bmm(weights.reshape(G * C * H, Lq, Lk).mT,
                               g_v).view(v.shape)
        grad_score = None
        if ctx.needs_input_grad[0]:
            # through the total: - g . o where the clamp let it through
            along = (g * out).sum(-1, keepdim=True).masked_fill_(
                total < ctx.eps, 0)
            grad_w = torch.bmm(g_v, v.reshape(G * C * H, Lk, D).mT).view(
                G, C, H, Lq, Lk).sub_(along).masked_fill_(hidden, 0)
            grad_score = grad_w.sum_to_size(ctx.score_shape)
        return grad_score, grad_v, None, None


def _forward(score: Tensor, v: Tensor, hidden: Tensor, eps: float):
    # the masked weights, their totals, the denominators and the averages
    G, C, H, Lk, D = v.shape
    Lq = score.size(-2)
    weights = score.masked_fill(hidden, 0)  # [G, C, H, Lq, Lk]
    total = weights.sum(-1, keepdim=True)
    den = total.clamp(min=eps)
    out = torch.bmm(weights.reshape(G * C * H, Lq, Lk),
                    v.reshape(G * C * H, Lk, D)).view(G, C, H, Lq, D)
    return weights, total, den, out / den


def kernel_average(score: Tensor, v: Tensor, hidden: Tensor,
                   eps: float) -> Tensor:
    r"""The average of the values each query sees, weighted by its kernel
    scores (the module's equation), with the backward pass written out.

    Args:
        score (torch.Tensor): Kernel scores :obj:`[G, 1, H, Lq, Lk]` (or
            :obj:`[G, C, H, Lq, Lk]`), nonnegative.
        v (torch.Tensor): Values :obj:`[G, C, H, Lk, D]`.
        hidden (torch.Tensor): The keys each query does not see, boolean,
            broadcastable to :obj:`[G, C, H, Lq, Lk]`.
        eps (float): The least denominator.

    :rtype: :class:`torch.Tensor` :obj:`[G, C, H, Lq, D]`
    """
    return _KernelAverage.apply(score, v, hidden, eps)


def kernel_average_autograd(score: Tensor, v: Tensor, hidden: Tensor,
                            eps: float) -> Tensor:
    r""":func:`kernel_average` by autograd."""
    return _forward(score, v, hidden, eps)[3]
