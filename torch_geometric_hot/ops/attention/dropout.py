r"""The one dropout of attention, drawn alike on every path
(``docs/design.md``, "Dropout"): factors that are hashes of the rows, the
head and a seed drawn once per call from torch's default CPU generator,
so that the paths agree, the backward passes draw them again and no mask
is kept."""
from typing import Callable, Optional, Sequence, Union

import torch
from torch import Tensor

_MASK = 0xFFFFFFFF


def dropout_threshold(p: float) -> int:
    r"""The 32-bit threshold of dropout with probability :obj:`p`: a
    weight is dropped where its hash is below it (0: no dropout)."""
    return min(int(p * 2**32), 2**32 - 1)


def _mul32(x: Tensor, c: int) -> Tensor:
    # (x c) mod 2^32 for x in [0, 2^32): int64 products wrap modulo 2^64
    # (two's complement), whose low 32 bits are the product's
    return x * c & _MASK


def _mix32(x: Tensor) -> Tensor:
    x = _mul32(x ^ (x >> 16), 0x7FEB352D)
    x = _mul32(x ^ (x >> 15), 0x846CA68B)
    return x ^ (x >> 16)


def draw_seed(p: float,
              device: Optional[torch.device] = None) -> Optional[Tensor]:
    r"""The seed of one call's dropout with probability :obj:`p`: an
    integer tensor in :math:`[0, 2^{32})` drawn from torch's default CPU
    generator (in a graph that :func:`torch.compile` traces, from that of
    :obj:`device`, the inputs': a CUDA graph holds no CPU work), or
    :obj:`None` when :obj:`p` is 0."""
    if not 0.0 <= p < 1.0:
        raise ValueError(f"'dropout' must be in [0, 1), got {p}")
    if p == 0:
        return None
    if device is not None and torch.compiler.is_compiling():
        return torch.randint(2**32, (), device=device)
    return torch.randint(2**32, ())


def class_seed(seed: Tensor, slot: int) -> Tensor:
    r"""The seed of the class of value slot :obj:`slot` within a call of
    seed :obj:`seed` (the classes of a layer share their rows)."""
    return _mix32((seed + (slot * 0x27D4EB2F & _MASK)) & _MASK)


def keep_factors(query: Tensor, key: Tensor, head: Tensor,
                 seed: Union[int, Tensor], threshold: int,
                 dtype: torch.dtype) -> Tensor:
    r"""Dropout's factors of the weights of query rows :obj:`query`, key
    rows :obj:`key` and heads :obj:`head` (integer tensors, broadcast
    together with :obj:`seed`): :math:`2^{32} / (2^{32} - t)` where their
    32-bit hash is at least the threshold :math:`t`
    (:func:`dropout_threshold`), else 0."""
    x = _mix32((_mul32(query & _MASK, 0x9E3779B1) + seed) & _MASK)
    y = (_mul32(key & _MASK, 0x85EBCA77) + _mul32(head, 0xC2B2AE3D)) & _MASK
    keep = _mix32(x ^ y) >= threshold
    return keep.to(dtype) * (2**32 / (2**32 - threshold))


def pair_dropout(query: Tensor, key: Tensor, seed: Union[None, int, Tensor],
                 threshold: int) -> Optional[Callable[[Tensor], Tensor]]:
    r"""Dropout of the weights :obj:`[pairs, H]` of the enumerated (query
    row, key row) pairs :obj:`query`, :obj:`key` as a map of the weights
    (:obj:`None` without dropout; :obj:`seed` :obj:`None`: drawn)."""
    if not threshold:
        return None
    if seed is None:
        seed = draw_seed(threshold / 2**32, query.device)
    return lambda weights: weights * keep_factors(
        query.unsqueeze(1), key.unsqueeze(1),
        torch.arange(weights.size(1), device=query.device), seed, threshold,
        weights.dtype)


def block_factors(query_rows: Tensor, key_rows: Tensor, heads: int,
                  seed: Tensor, p: float, dtype: torch.dtype) -> Tensor:
    r"""Dropout's factors :obj:`[G, heads, L_q, L_k]` of blocks of
    :obj:`G` graphs whose query slots hold the rows :obj:`query_rows
    [G, L_q]` and whose key slots hold the rows :obj:`key_rows [G, L_k]`
    (their input rows)."""
    G = query_rows.size(0)
    head = torch.arange(heads, device=query_rows.device).view(-1, 1, 1)
    return keep_factors(query_rows.view(G, 1, -1, 1),
                        key_rows.view(G, 1, 1, -1), head, seed,
                        dropout_threshold(p), dtype)


def drop_outputs(out: Tensor, seeds: Sequence[Tensor], p: float) -> Tensor:
    r"""Dropout of outputs :obj:`[rows, C, H, D]` of :obj:`C` classes of
    seeds :obj:`seeds` (one each): the entry of row :math:`i`, head
    :math:`h` and channel :math:`c` by the factor of query row :math:`i`,
    key row :math:`c` and head :math:`h`."""
    rows, _, H, D = out.shape

    def arange(n: int) -> Tensor:
        return torch.arange(n, device=out.device)

    # a seed at a time: CPU scalars, which never travel to the device
    return out * torch.stack([
        keep_factors(arange(rows).view(-1, 1, 1), arange(D),
                     arange(H).view(-1, 1), seed, dropout_threshold(p),
                     out.dtype)
        for seed in seeds], 1)
