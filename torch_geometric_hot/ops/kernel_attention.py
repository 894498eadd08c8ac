r"""The two sparse primitives of kernel (linear) attention, each a custom
autograd function that works in chunks so that no
:obj:`[rows, heads, features, channels]` tensor is ever held for the whole
input:

* :func:`segment_outer_sum`: per-group key--value summaries
  :math:`S_g = \sum_{e : g(e) = g} \phi(k_e) v_e^\top`;
* :func:`gather_contract`: every query read against its group's summary,
  :math:`o_e = \phi(q_e)^\top S_{g(e)}`.

Each is the other's adjoint, so their backward passes call each other. On
CPU float32/float64 both run as native kernels
(:mod:`torch_geometric_hot.ops.native`) when those build: each pass visits
the rows group by group, and each backward is one fused pass.
Naive references (:func:`segment_outer_sum_reference`,
:func:`gather_contract_reference`) hold everything at once and exist for
tests.
"""
from typing import Optional, Tuple

import torch
from torch import Tensor

from torch_geometric_hot.ops import native

#: Elements of the largest temporary a chunk may create (small enough to
#: stay in cache between the product and the reduction that reads it).
CHUNK_ELEMENTS = 1 << 18


def _chunk_rows(rows: int, per_row: int) -> int:
    return max(1, min(rows, CHUNK_ELEMENTS // max(per_row, 1)))


def _outer_sum(k: Tensor, v: Tensor, index: Tensor, num_groups: int) -> Tensor:
    # k [E, H, R], v [E, H, C] -> [G, H, R, C]
    E, H, R = k.shape
    C = v.size(-1)
    if num_groups == 1:  # one group: a batched matmul over heads
        return torch.bmm(k.permute(1, 2, 0).contiguous(),
                         v.transpose(0, 1).contiguous()).unsqueeze(0)
    out = k.new_zeros(num_groups, H, R, C)
    step = _chunk_rows(E, H * R * C)
    for start in range(0, E, step):
        end = start + step
        outer = k[start:end].unsqueeze(-1) * v[start:end].unsqueeze(-2)
        # flat [e, H*R*C] rows: see ops.scatter.scatter_sum
        out.view(num_groups, H * R * C).index_add_(
            0, index[start:end], outer.view(outer.size(0), H * R * C))
    return out


def _contract(q: Tensor, summary: Tensor, index: Tensor) -> Tensor:
    # q [E, H, R], summary [G, H, R, C] -> [E, H, C]
    E, H, R = q.shape
    C = summary.size(-1)
    if summary.size(0) == 1:
        return torch.einsum('ehr,hrc->ehc', q, summary[0])
    # Row (e, h) is a weighted bag of the R summary rows (g(e), h, :) of a
    # flat [G*H*R, C] table: embedding_bag gathers and sums them in one
    # pass, without a [e, H, R, C] copy of the summary rows.
    table = summary.reshape(-1, C)
    offsets = (torch.arange(H, device=q.device).view(1, H, 1) * R +
               torch.arange(R, device=q.device).view(1, 1, R))
    out = q.new_empty(E, H, C)
    step = _chunk_rows(E, H * R)
    for start in range(0, E, step):
        end = start + step
        bags = index[start:end].view(-1, 1, 1) * (H * R) + offsets
        out[start:end] = torch.nn.functional.embedding_bag(
            bags.view(-1, R), table, mode='sum',
            per_sample_weights=q[start:end].reshape(-1, R)).view(-1, H, C)
    return out


def _native_order(index: Tensor, num_groups: int,
                  *tensors: Tensor) -> Tuple[Tensor, Optional[Tensor]]:
    # (index, the native kernels' row order), or (index, None) for the
    # torch path; the kernels read the index as contiguous int64 (one group
    # included: faster than the torch path's transposed copies and bmm)
    if index.dtype == torch.long and native.applies(*tensors):
        index = index.contiguous()
        return index, native.sort_rows(index, num_groups)
    return index, None


class _SegmentOuterSum(torch.autograd.Function):
    @staticmethod
    def forward(ctx, k, v, index, num_groups):
        index, order = _native_order(index, num_groups, k, v)
        out = _outer_sum(k, v, index, num_groups) if order is None else \
            native.outer_sum(k, v, index, order, num_groups)
        ctx.save_for_backward(k, v, index, order)
        return out

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad):
        k, v, index, order = ctx.saved_tensors
        need_k, need_v = ctx.needs_input_grad[:2]
        if order is not None:
            grad_k, grad_v = native.outer_sum_backward(k, v, grad, index,
                                                       order, need_k, need_v)
            return grad_k, grad_v, None, None
        grad_k = grad_v = None
        if need_k:
            grad_k = _contract(v, grad.transpose(-1, -2).contiguous(), index)
        if need_v:
            grad_v = _contract(k, grad, index)
        return grad_k, grad_v, None, None


class _GatherContract(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, summary, index):
        index, order = _native_order(index, summary.size(0), q, summary)
        out = _contract(q, summary, index) if order is None else \
            native.contract(q, summary, index, order)
        ctx.save_for_backward(q, summary, index, order)
        return out

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad):
        q, summary, index, order = ctx.saved_tensors
        need_q, need_s = ctx.needs_input_grad[:2]
        if order is not None:
            grad_q, grad_s = native.contract_backward(q, summary, grad, index,
                                                      order, need_q, need_s)
            return grad_q, grad_s, None
        grad_q = grad_s = None
        if need_q:
            grad_q = _contract(grad, summary.transpose(-1, -2).contiguous(),
                               index)
        if need_s:
            grad_s = _outer_sum(q, grad, index, summary.size(0))
        return grad_q, grad_s, None


def segment_outer_sum(k: Tensor, v: Tensor, index: Tensor,
                      num_groups: int) -> Tensor:
    r"""Per-group sums of outer products,
    :math:`S_g = \sum_{e : g(e) = g} k_e v_e^\top` per head.

    Args:
        k (torch.Tensor): :obj:`[E, H, R]` (feature-mapped keys).
        v (torch.Tensor): :obj:`[E, H, C]` (values).
        index (torch.Tensor): Group of every row :obj:`[E]`.
        num_groups (int): Number of groups :math:`G`.

    :rtype: :class:`torch.Tensor` :obj:`[G, H, R, C]`
    """
    return _SegmentOuterSum.apply(k, v, index, num_groups)


def gather_contract(q: Tensor, summary: Tensor, index: Tensor,
                    mask: Optional[Tensor] = None) -> Tensor:
    r"""Contracts every row with its group's summary,
    :math:`o_e = q_e^\top S_{g(e)}` per head.

    Args:
        q (torch.Tensor): :obj:`[E, H, R]` (feature-mapped queries).
        summary (torch.Tensor): :obj:`[G, H, R, C]`.
        index (torch.Tensor): Group of every row :obj:`[E]`.
        mask (torch.Tensor, optional): Rows whose output is forced to zero
            where :obj:`False`.

    :rtype: :class:`torch.Tensor` :obj:`[E, H, C]`
    """
    out = _GatherContract.apply(q, summary, index)
    if mask is not None:
        out = out * mask.view(-1, 1, 1).to(out.dtype)
    return out


def segment_outer_sum_reference(k: Tensor, v: Tensor, index: Tensor,
                                num_groups: int) -> Tensor:
    r"""Naive :func:`segment_outer_sum` (holds every outer product)."""
    outer = k.unsqueeze(-1) * v.unsqueeze(-2)
    out = outer.new_zeros((num_groups, ) + outer.shape[1:])
    for row, group in enumerate(index.tolist()):
        out[group] += outer[row]
    return out


def gather_contract_reference(q: Tensor, summary: Tensor,
                              index: Tensor) -> Tensor:
    r"""Naive :func:`gather_contract` (gathers every summary)."""
    return torch.einsum('ehr,ehrc->ehc', q, summary[index])
