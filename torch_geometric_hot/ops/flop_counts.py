r"""Floating-point operation counts of the library's custom operators, for
:class:`torch.utils.flop_counter.FlopCounterMode`.

A custom operator is opaque to the flop counter: without a formula, the
matrix products a ``torch_geometric_hot::`` operator performs inside it
(kernel attention's per-group outer-product sums :math:`\phi(K)^\top V`,
their readings :math:`\phi(q)^\top S`, a value projection computed in the
operator) would count zero. Importing this module (the package does)
registers a formula per operator, counting its products as the flop
counter counts :func:`torch.mm`: two operations per multiply-add.

Counted per operator, :math:`H` heads, :math:`R` random features, :math:`C`
value columns:

* ``segment_outer_sum``: :math:`2 E H R C` for :math:`E` rows;
  ``gather_contract``: :math:`2 E H R C`; each backward: that much per
  gradient asked for;
* ``favor_plus``: the random-feature product :math:`2 N H d r` for
  :math:`N` rows of :math:`d` channels and :math:`r` features; its
  backward the same (the gradient of the rows);
* ``pooled_combination``: per summary :math:`2 K H R (C + 1)` over its
  :math:`K` keys (the denominator is the extra column), per reading
  :math:`2 N H R (C + 1)` over its :math:`N` query rows, per single-key
  term :math:`2 N H (R + D)`, and the value projection
  :math:`2 P F W` when the operator computes it; its backward: twice the
  summaries, readings and single-key terms (a gradient for each operand),
  the projection recomputed, and one product per gradient of the
  projection asked for.

* ``pair_light_linear``: the entry-wise product :math:`2 P C \cdot 2C'`
  and the node-wise one :math:`2 n C \cdot 3C'` for :math:`P` entries of
  :math:`n` nodes, :math:`C` input and :math:`C'` output channels; its
  backward that much per gradient of the input or the weights asked for.
  Its passes over the entries are gathers, not products, and count zero,
  as PyTorch's own gathers do.

* ``grouped_softmax_attention``: the logits and the weighted sum of the
  values, :math:`2 P H (d + d_v)` over the :math:`P` (query, key) pairs of its
  groups (excluded keys included: their logits are computed); its
  backward :math:`2 P H (3 d + 2 d_v)` (the logits recomputed, the
  products with the values and the three gradients).
"""
from typing import List, Sequence

import torch
from torch import Tensor
from torch.utils.flop_counter import register_flop_formula

from torch_geometric_hot.ops.class_combination import SINGLE_KEY
from torch_geometric_hot.ops.grouped_softmax_attention import pair_count
from torch_geometric_hot.ops.pooled_combination import _decode

_ops = torch.ops.torch_geometric_hot


@register_flop_formula([_ops.segment_outer_sum, _ops.gather_contract],
                       get_raw=True)
def segment_product_flops(a: Tensor, b: Tensor, *args, **kwargs) -> int:
    r""":math:`2 E H R C` for ``segment_outer_sum`` of keys
    :obj:`a [E, H, R]` and values :obj:`b [E, H, C]`, and for
    ``gather_contract`` of queries :obj:`a [E, H, R]` and summaries
    :obj:`b [G, H, R, C]`."""
    return 2 * a.numel() * b.size(-1)


@register_flop_formula([_ops.segment_outer_sum_backward,
                        _ops.gather_contract_backward], get_raw=True)
def segment_product_backward_flops(grad: Tensor, a: Tensor, b: Tensor,
                                   index: Tensor, need_a: bool,
                                   need_b: bool, **kwargs) -> int:
    r"""One forward's count per gradient asked for."""
    return (int(need_a) + int(need_b)) * segment_product_flops(a, b)


@register_flop_formula([_ops.favor_plus, _ops.favor_plus_backward],
                       get_raw=True)
def favor_plus_flops(x: Tensor, projection: Tensor, *args, **kwargs) -> int:
    r""":math:`2 N H d r` for rows :obj:`[N, H, d]` and a projection
    :obj:`[r, d]`, forward or backward."""
    return 2 * x.numel() * projection.size(0)


def _attention_flops(phi_q: Tensor, phi_k: Tensor, head_channels: int,
                     index: Sequence[Tensor], structure: List[int]) -> int:
    # the summaries, readings and single-key terms of pooled_combination
    pools, reads, parts = _decode(index, structure)
    H, R, D = phi_q.size(1), phi_q.size(2), head_channels
    flops = 0
    for pool in pools:
        flops += 2 * pool.position.numel() * H * R * (len(pool.slots) * D +
                                                      1)
    for read in reads:
        slots = pools[read.pool].slots if read.slots is None else read.slots
        flops += 2 * read.group.numel() * H * R * (len(slots) * D + 1)
    for part in parts:
        rows = part.nonempty.size(0)
        singles = sum(t.kind == SINGLE_KEY for terms in part.terms
                      for t in terms)
        flops += 2 * singles * rows * H * (R + D)
    return flops


def _projection_flops(values: Tensor, weight) -> int:
    return 0 if weight is None else 2 * values.numel() * weight.size(0)


@register_flop_formula(_ops.pooled_combination, get_raw=True)
def pooled_combination_flops(phi_k: Tensor, phi_q: Tensor, values: Tensor,
                             weight, index: Sequence[Tensor],
                             structure: List[int], heads: int,
                             head_channels: int, eps: float,
                             direct: List[float], **kwargs) -> int:
    r"""The summaries, readings, single-key terms and the value
    projection (when :obj:`weight` is given)."""
    return _attention_flops(phi_q, phi_k, head_channels, index, structure) \
        + _projection_flops(values, weight)


@register_flop_formula(_ops.pooled_combination_backward, get_raw=True)
def pooled_combination_backward_flops(grads, outs, dens, summaries, made_by,
                                      phi_k: Tensor, phi_q: Tensor,
                                      values: Tensor, weight,
                                      index: Sequence[Tensor],
                                      structure: List[int], heads: int,
                                      head_channels: int, eps: float,
                                      direct: List[float], needs: List[bool],
                                      **kwargs) -> int:
    r"""Twice the forward's attention products, the value projection
    recomputed and one product per gradient of it asked for."""
    projection = _projection_flops(values, weight)
    asked = int(needs[2]) + (int(needs[3]) if len(needs) > 3 else 0)
    return 2 * _attention_flops(phi_q, phi_k, head_channels, index,
                                structure) + projection * (1 + asked)


@register_flop_formula(_ops.pair_light_linear, get_raw=True)
def pair_light_linear_flops(x: Tensor, weight: Tensor, bias, row: Tensor,
                            col: Tensor, transpose: Tensor,
                            diag_pos: Tensor, **kwargs) -> int:
    r""":math:`2 C C' (2 P + 3 n)`: the entry-wise and node-wise
    products."""
    return 2 * x.size(1) * weight.size(-1) * (2 * x.size(0) +
                                              3 * diag_pos.numel())


@register_flop_formula(_ops.pair_light_linear_backward, get_raw=True)
def pair_light_linear_backward_flops(grad: Tensor, x: Tensor, weight: Tensor,
                                     row: Tensor, col: Tensor,
                                     transpose: Tensor, diag_pos: Tensor,
                                     need_x: bool, need_weight: bool,
                                     need_bias: bool, **kwargs) -> int:
    r"""The forward's count per gradient of the input or the weights asked
    for."""
    return (int(need_x) + int(need_weight)) * pair_light_linear_flops(
        x, weight, None, row, col, transpose, diag_pos)


@register_flop_formula(_ops.grouped_softmax_attention, get_raw=True)
def grouped_softmax_flops(q: Tensor, k: Tensor, v: Tensor, *args,
                          **kwargs) -> int:
    r""":math:`2 P H (d + d_v)` for :math:`P` (query, key) pairs."""
    costs = args[-3]  # before dropout's seed and threshold
    return 2 * pair_count(q.size(0), costs) * q.size(1) * (
        q.size(2) + v.size(2))


@register_flop_formula(_ops.grouped_softmax_attention_backward,
                       get_raw=True)
def grouped_softmax_backward_flops(grad: Tensor, q: Tensor, k: Tensor,
                                   v: Tensor, *args, **kwargs) -> int:
    r""":math:`2 P H (3 d + 2 d_v)`."""
    costs = args[-3]
    return 2 * pair_count(q.size(0), costs) * q.size(1) * (
        3 * q.size(2) + 2 * v.size(2))
