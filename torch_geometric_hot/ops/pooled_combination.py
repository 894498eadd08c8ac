r"""Kernel attention of one output part from its key pools to its classes
(DESIGN §5.2) as one operation: the summaries and readings of
:func:`~torch_geometric_hot.ops.kernel_attention.pool_readings`, then
:func:`~torch_geometric_hot.ops.class_combination.combine_classes`.

Natively, the two run as one autograd function, so that their backward
passes share the gradient buffers of the keys, values and queries: the
combination writes the query gradient and adds to the (zero-filled) key
and value gradients, then the readings add theirs. Two separate functions
would each zero-fill a key and a value gradient of their own, and autograd
would add them into a third. Otherwise it is the two functions in turn
(their torch paths are the oracles).
"""
from typing import Sequence

import torch
from torch import Tensor

from torch_geometric_hot.ops import native
from torch_geometric_hot.ops.class_combination import Term, \
    check_combination, combination_table, combine_classes, \
    native_combination, native_combination_backward
from torch_geometric_hot.ops.kernel_attention import Pool, Reading, \
    check_pool_readings, native_pool_readings, \
    native_pool_readings_backward, pool_readings, uses_native_pools


class _PooledCombination(torch.autograd.Function):
    @staticmethod
    def forward(ctx, pools, reads, table, slots, nonempty, eps, phi_k,
                values, phi_q, *positions):
        with native.workspace() as scratch:  # the readings: temporaries
            readings, plan = native_pool_readings(phi_k, values, phi_q,
                                                  pools, reads, scratch)
            out, saved = native_combination(ctx, table, readings, phi_q,
                                            phi_k, positions, values, slots,
                                            nonempty, eps)
        ctx.plan, ctx.reads = plan._replace(summaries=[]), reads
        ctx.save_for_backward(*saved, *plan.summaries)
        return out

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad):
        saved = ctx.saved_tensors
        split = len(saved) - len(ctx.plan.pools)  # then the summaries
        _, _, _, phi_q, phi_k, values = saved[:6]  # native_combination's
        need_k, need_v, need_q = ctx.needs_input_grad[6:9]
        grad_k = torch.zeros_like(phi_k) if need_k else None
        grad_v = torch.zeros_like(values) if need_v else None
        grad_q = phi_q.new_empty(phi_q.shape) if need_q else None
        n_r = len(ctx.reading_shapes)
        with native.workspace() as scratch:  # the readings' gradients too
            grad_readings = native_combination_backward(
                ctx, saved[:split], grad,
                [True] * n_r + [need_q, need_k, need_v],
                into=(grad_q, grad_k, grad_v), scratch=scratch)[:n_r]
            native_pool_readings_backward(
                ctx.plan._replace(summaries=saved[split:]), phi_k, values,
                phi_q, ctx.reads, grad_readings, grad_k, grad_v, grad_q,
                need_q, scratch)
        return (None, ) * 6 + (grad_k, grad_v, grad_q) + \
            (None, ) * (split - 6)


def pooled_combination(terms: Sequence[Sequence[Term]],
                       pools: Sequence[Pool], reads: Sequence[Reading],
                       phi_q: Tensor, phi_k: Tensor,
                       positions: Sequence[Tensor], values: Tensor,
                       slots: Sequence[int], nonempty: Tensor,
                       eps: float = 1e-6) -> Tensor:
    r""":func:`~torch_geometric_hot.ops.class_combination.combine_classes`
    of the readings that
    :func:`~torch_geometric_hot.ops.kernel_attention.pool_readings` makes
    of :obj:`pools` and :obj:`reads`.

    Args:
        terms (list): Per class, its
            :class:`~torch_geometric_hot.ops.class_combination.Term` list
            (reading terms index :obj:`reads`).
        pools (list): The summaries (:class:`Pool`).
        reads (list): Their readings (:class:`Reading`).
        phi_q, phi_k, positions, values, slots, nonempty, eps: As in
            :func:`~torch_geometric_hot.ops.class_combination.combine_classes`.

    :rtype: :class:`torch.Tensor` :obj:`[rows, classes, H, D]`
    """
    if not uses_native_pools(phi_k, values, phi_q, pools, reads):
        return combine_classes(
            terms, pool_readings(phi_k, values, phi_q, pools, reads), phi_q,
            phi_k, positions, values, slots, nonempty, eps)
    check_pool_readings(phi_k, values, phi_q, pools, reads, True)
    D = values.size(-1)
    widths = [len(pools[r.pool].slots if r.slots is None else r.slots) * D +
              1 for r in reads]
    check_combination(terms, widths, phi_q, phi_k, positions, values, slots,
                      nonempty)
    return _PooledCombination.apply(
        tuple(pools), tuple(reads),
        combination_table(terms, nonempty.device), tuple(slots),
        nonempty.to(torch.uint8).contiguous(), eps, phi_k.contiguous(),
        values.contiguous(), phi_q.contiguous(),
        *[p.contiguous() for p in positions])
