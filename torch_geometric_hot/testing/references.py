r"""Naive oracles of the engine's operations: each holds everything at once
and is what the tests check the operators and their paths against."""
from typing import List, Optional, Sequence, Tuple, Union

import torch
from torch import Tensor

from torch_geometric_hot.ops.class_combination import READING, \
    CombinationTerm
from torch_geometric_hot.ops.kernel_attention import SummaryKeys, Reading, \
    check_pool_readings, gather_contract, read_columns, torch_pool_outer_sum


def segment_outer_sum_reference(k: Tensor, v: Tensor, index: Tensor,
                                num_groups: int) -> Tensor:
    r"""Naive :func:`~torch_geometric_hot.ops.segment_outer_sum` (holds
    every outer product)."""
    outer = k.unsqueeze(-1) * v.unsqueeze(-2)
    out = outer.new_zeros((num_groups, ) + outer.shape[1:])
    for row, group in enumerate(index.tolist()):
        out[group] += outer[row]
    return out


def gather_contract_reference(q: Tensor, summary: Tensor,
                              index: Tensor) -> Tensor:
    r"""Naive :func:`~torch_geometric_hot.ops.gather_contract` (gathers
    every summary)."""
    return torch.einsum('ehr,ehrc->ehc', q, summary[index])


def pool_readings_reference(k: Tensor, values: Tensor, q: Tensor,
                            pools: Sequence[SummaryKeys],
                            reads: Sequence[Reading]) -> List[Tensor]:
    r"""Kernel attention's summaries and their readings, naively (the test
    oracle of the operator ``torch_geometric_hot::pooled_combination``).
    Every :class:`~torch_geometric_hot.ops.SummaryKeys` :math:`p` gives
    per-group summaries

    .. math::
        S^p_g = \sum_{e : \text{index}_e = g} k_{\text{pos}_e}
        [v_{\text{pos}_e, s_1}, \dots, v_{\text{pos}_e, s_n}, 1]^\top

    per head (:math:`s_1 \dots s_n` its slots; the last column sums the
    keys alone: the denominator), and every
    :class:`~torch_geometric_hot.ops.Reading` :math:`r` the contraction
    :math:`o^r_i = q_{b_r + i}^\top S^{p(r)}_{\text{index}^r_i}`
    (:math:`b_r` its start): the summaries of
    :func:`~torch_geometric_hot.ops.kernel_attention.torch_pool_outer_sum`
    read by :func:`~torch_geometric_hot.ops.gather_contract`.
    The operator ``torch_geometric_hot::pooled_combination``
    (:mod:`~torch_geometric_hot.ops.pooled_combination`) computes them
    natively on CPU: key and value rows read in place (no gathered or
    concatenated copies), groups of few keys read directly from them (no
    summary; see
    :class:`~torch_geometric_hot.ops.attention.dispatch.DirectReadings`).

    Args:
        k (torch.Tensor): Keys :obj:`[P, H, R]` (feature-mapped).
        values (torch.Tensor): Values :obj:`[P, slots, H, D]`.
        q (torch.Tensor): Queries :obj:`[rows, H, R]` (feature-mapped).
        pools (list): The summaries.
        reads (list): The readings.

    :rtype: list of :class:`torch.Tensor`
        :obj:`[rows, H, len(slots) * D + 1]`, one per reading (its slots, or
        all of its pool's)
    """
    check_pool_readings(k, values, q, pools, reads, True)
    summaries = [torch_pool_outer_sum(k, values, pool) for pool in pools]
    return [gather_contract(q[read.rows], summaries[read.pool], read.group)[
        ..., read_columns(pools[read.pool], read, values.size(-1))]
        for read in reads]


def combine_classes_reference(terms: Sequence[Sequence[CombinationTerm]],
                              readings: Sequence[Tensor], phi_q: Tensor,
                              phi_k: Tensor, positions: Sequence[Tensor],
                              values: Tensor, slots: Sequence[int],
                              nonempty: Tensor, eps: float,
                              with_denominators: bool = False
                              ) -> Union[Tensor, Tuple[Tensor, Tensor]]:
    r"""Naive
    :func:`~torch_geometric_hot.ops.class_combination.torch_combine_classes`
    (same arguments): every class's numerator and denominator added up
    term by term."""
    outputs, denominators = [], []
    D = values.size(-1)
    for c, class_terms in enumerate(terms):
        num = phi_q.new_zeros(phi_q.size(0), phi_q.size(1), D)
        den = phi_q.new_zeros(phi_q.size(0), phi_q.size(1))
        for term in class_terms:
            if term.kind == READING:
                reading = readings[term.src]
                t_num = reading[..., term.offset:term.offset + D]
                t_den = reading[..., -1]
            else:
                position = positions[term.src]
                exists = (position >= 0).to(phi_q.dtype).unsqueeze(-1)
                k_x = phi_k[position.clamp(min=0)]
                t_den = (phi_q * k_x).sum(-1) * exists
                t_num = t_den.unsqueeze(-1) * \
                    values[position.clamp(min=0), slots[c]]
            num = num + term.sign * t_num
            den = den + term.sign * t_den
        mask = nonempty[:, c].view(-1, 1, 1).to(num.dtype)
        outputs.append(num / den.clamp(min=eps).unsqueeze(-1) * mask)
        denominators.append(den)
    out = torch.stack(outputs, 1)
    return (out, torch.stack(denominators, 1)) if with_denominators else out


def pair_light_linear_reference(x: Tensor, view, weight: Tensor,
                                bias: Optional[Tensor] = None) -> Tensor:
    r""":func:`~torch_geometric_hot.ops.pair_light_linear` class by class
    (the oracle)."""
    xd = x.index_select(0, view.diag_pos)
    diag = xd @ weight[0]
    off = (x.index_select(0, view.off_pos) @ weight[1] +
           view.transpose_rows(x) @ weight[2] +
           xd.index_select(0, view.off_row) @ weight[3] +
           xd.index_select(0, view.off_col) @ weight[4])
    if bias is not None:
        diag, off = diag + bias[0], off + bias[1]
    return view.assemble(diag, off)


def dense_softmax_attention_reference(query: Tensor, key: Tensor,
                                      value: Tensor, token_batch: Tensor,
                                      num_graphs: int) -> Tensor:
    r"""Naive reference: an explicit :math:`\mathrm{softmax}(QK^\top /
    \sqrt{d}) V` per graph and head, in a Python loop over graphs."""
    out = value.new_zeros(value.shape)
    for g in range(num_graphs):
        idx = (token_batch == g).nonzero().view(-1)
        if idx.numel() == 0:
            continue
        q, k, v = (t[idx].transpose(0, 1) for t in (query, key, value))
        scores = q @ k.transpose(-1, -2) / query.size(-1)**0.5
        out[idx] = (scores.softmax(dim=-1) @ v).transpose(0, 1)
    return out
