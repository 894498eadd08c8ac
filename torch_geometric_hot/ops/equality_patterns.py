r"""Equality patterns of index tuples: the :math:`\mathrm{bell}(k)` type
identifiers of order-:math:`k` TokenGT tokens
(`Kim et al. 2022 <https://arxiv.org/abs/2207.02505>`_, §3.3).

The pattern of a tuple :math:`(i_1, \dots, i_k)` is the set partition of its
positions into blocks of equal entries, written as a restricted growth
string: position :math:`a` gets the number of the block it belongs to, blocks
numbered in order of first appearance (e.g. :math:`(7, 3, 7) \mapsto
(0, 1, 0)`).
"""
import itertools
from functools import lru_cache
from typing import List, Tuple

import torch
from torch import Tensor


@lru_cache(maxsize=None)
def restricted_growth_strings(k: int) -> Tuple[Tuple[int, ...], ...]:
    r"""All :math:`\mathrm{bell}(k)` set partitions of :math:`k` positions
    as restricted growth strings, in lexicographic order (the all-equal
    pattern first, the all-distinct one last)."""
    if k < 1:
        raise ValueError(f"'k' must be a positive integer, got {k!r}")
    out: List[Tuple[int, ...]] = []
    for rgs in itertools.product(range(k), repeat=k):
        if all(rgs[a] <= max(rgs[:a], default=-1) + 1 for a in range(k)):
            out.append(rgs)
    return tuple(out)


def bell(k: int) -> int:
    r"""The Bell number :math:`\mathrm{bell}(k)` (number of patterns)."""
    return len(restricted_growth_strings(k))


def equality_pattern(index: Tensor) -> Tensor:
    r"""The pattern number of every column of an index tuple tensor.

    Args:
        index (torch.Tensor): Tuples as columns, shape :obj:`[k, h]`.

    :rtype: :class:`torch.Tensor` of shape :obj:`[h]`, values in
        :obj:`[0, bell(k))`, numbered as :func:`restricted_growth_strings`.
    """
    if index.dim() != 2 or index.size(0) < 1:
        raise ValueError(f"'index' must have shape [k, num_tuples] with "
                         f"k >= 1, got {tuple(index.shape)}")
    k = index.size(0)
    # label[a] = the first position equal to position a, then renumbered
    # into block order, folded into one base-k code per column.
    equal = index.unsqueeze(0) == index.unsqueeze(1)  # [k, k, h]
    first = equal.int().argmax(dim=1)  # [k, h]
    is_new = first == torch.arange(k, device=index.device).view(-1, 1)
    block = torch.cumsum(is_new.long(), dim=0) - 1  # block id at first pos
    label = block.gather(0, first)  # [k, h]
    weights = k**torch.arange(k - 1, -1, -1, device=index.device)
    code = (label * weights.view(-1, 1)).sum(dim=0)
    table = torch.full((k**k, ), -1, dtype=torch.long, device=index.device)
    for number, rgs in enumerate(restricted_growth_strings(k)):
        table[sum(v * k**(k - 1 - a) for a, v in enumerate(rgs))] = number
    return table[code]
