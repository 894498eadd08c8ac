r"""Brute-force dense oracles for the equivariant basis (``docs/design.md``,
"Oracles").

Every multi-index :math:`(\mathbf{o}, \mathbf{i})` of the :math:`l` output
and :math:`k` input positions is labelled by its equality pattern, the set
partition written as in :mod:`torch_geometric_hot.ops.basis` (positions
``o1 .. ol i1 .. ik``, blocks in order of their first position, joined by
``|``). The dense basis tensor of a class is the indicator of its label.
Meant for small :math:`n` (:math:`n^{k+l}` multi-indices) in float64.
"""
import itertools
from typing import Dict, Optional, Tuple

import torch
from torch import Tensor


def partition_label(values: Tuple[int, ...], out_order: int) -> str:
    r"""The equality pattern of a multi-index (outputs first)."""
    names = [f'o{a + 1}' for a in range(out_order)] + [
        f'i{a + 1}' for a in range(len(values) - out_order)
    ]
    blocks: Dict[int, str] = {}
    for name, value in zip(names, values):
        blocks[value] = blocks.get(value, '') + name
    return '|'.join(blocks.values())


def dense_basis(num_nodes: int, in_order: int, out_order: int,
                device: Optional[torch.device] = None) -> Dict[str, Tensor]:
    r"""Indicator tensors :obj:`[n^l, n^k]` (float64) of every class, keyed
    by partition label, on :obj:`device` (default: the CPU)."""
    out: Dict[str, Tensor] = {}
    size_out, size_in = num_nodes**out_order, num_nodes**in_order
    for flat, values in enumerate(
            itertools.product(range(num_nodes),
                              repeat=out_order + in_order)):
        label = partition_label(values, out_order)
        if label not in out:
            out[label] = torch.zeros(size_out, size_in, dtype=torch.float64)
        out[label].view(-1)[flat] = 1.0
    return {label: b.to(device) for label, b in out.items()}


def output_patterns(num_nodes: int, out_order: int,
                    device: Optional[torch.device] = None
                    ) -> Dict[str, Tensor]:
    r"""Indicators :obj:`[n^l]` of the output equality patterns (the
    bias classes, bell(l) of them), on :obj:`device` (default: the
    CPU)."""
    out: Dict[str, Tensor] = {}
    for flat, values in enumerate(
            itertools.product(range(num_nodes), repeat=out_order)):
        label = partition_label(values, out_order)
        out.setdefault(label, torch.zeros(num_nodes**out_order,
                                          dtype=torch.float64))[flat] = 1.0
    return {label: b.to(device) for label, b in out.items()}


def dense_equivariant_linear(x: Tensor, weights: Dict[str, Tensor],
                             in_order: int, out_order: int,
                             normalize: str = 'sum',
                             biases: Optional[Dict[str, Tensor]] = None
                             ) -> Tensor:
    r"""The dense layer :math:`\sum_\mu B^\mu x W_\mu (+ \text{bias})`.

    Args:
        x (torch.Tensor): Dense input :obj:`[n]*in_order + [C]`.
        weights (dict): Partition label → :obj:`[C, C_out]`.
        in_order (int): Input order.
        out_order (int): Output order.
        normalize (str): ``'sum'`` or ``'mean'`` (divide each class by its
            number of inputs per output; empty rows give 0).
        biases (dict, optional): Output-pattern label → :obj:`[C_out]`.

    Returns:
        :obj:`[n]*out_order + [C_out]`.
    """
    n = x.size(0) if in_order > 0 else 1
    flat = x.reshape(n**in_order, x.size(-1))
    basis = dense_basis(n, in_order, out_order, x.device)
    c_out = next(iter(weights.values())).size(-1)
    out = flat.new_zeros(n**out_order, c_out)
    for label, w in weights.items():
        b = basis.get(label)
        if b is None:
            continue  # a pattern that cannot occur for this n
        agg = b @ flat
        if normalize == 'mean':
            count = b.sum(dim=1, keepdim=True)
            agg = torch.where(count > 0, agg / count.clamp(min=1), 0.0)
        out = out + agg @ w
    if biases:
        patterns = output_patterns(n, out_order, x.device)
        for label, bias in biases.items():
            out = out + patterns[label].unsqueeze(-1) * bias
    return out.view([n] * out_order + [c_out])


def pair_to_dense(x: Tensor, pair_index: Tensor, num_nodes: int) -> Tensor:
    r"""Scatters pair-entry rows :obj:`[P, C]` into a dense
    :obj:`[n, n, C]` tensor (absent entries are zero)."""
    out = x.new_zeros(num_nodes, num_nodes, x.size(-1))
    out[pair_index[0], pair_index[1]] = x
    return out
