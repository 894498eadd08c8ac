r"""The path ``'pairs'`` of softmax attention, the reference: exact
softmax over the enumerated (query, key) pairs of a class's key groups
(``docs/design.md``, "Softmax attention"); the only path that returns the
attention weights. :data:`local_class_softmax` is its form under
:func:`torch.compile` (the path ``'compiled'`` for local classes).
"""
from typing import List, Optional, Tuple

import torch
from torch import Tensor

from torch_geometric_hot.ops.attention.compiled import recomputed_attention
from torch_geometric_hot.ops.attention.dropout import dropout_threshold, \
    pair_dropout
from torch_geometric_hot.ops.basis import EquivariantClass
from torch_geometric_hot.ops.equivariant import Target
from torch_geometric_hot.ops.key_groups import class_pairs_from_index, \
    check_pair_count, class_pairs
from torch_geometric_hot.ops.softmax import check_pairs, \
    pair_softmax_attention


def _pair_width(q: Tensor, k: Tensor, v: Tensor) -> int:
    # the elements a (query, key) pair holds
    return q.size(1) * (q.size(-1) + k.size(-1) + v.size(-1))


def local_pair_attention(q: Tensor, k: Tensor, v: Tensor,
                         query_group: Tensor, key_group: Tensor,
                         key_position: Tensor, num_groups: int,
                         query_ids: List[Tensor], key_ids: List[Tensor],
                         dropout: float = 0.0,
                         seed: Optional[Tensor] = None) -> Tensor:
    r"""The output of :func:`softmax_class_attention` from index tensors
    (those of the operator ``torch_geometric_hot::class_pairs``), its pairs
    enumerated and checked against the size limit on every call; dropout
    drawn from :obj:`seed` (:obj:`None`: drawn).

    :rtype: :class:`torch.Tensor` :obj:`[rows, H, d_v]`
    """
    check_pair_count(query_group, key_group, num_groups, _pair_width(
        q, k, v), 'a local class')
    query, key = class_pairs_from_index(query_group, key_group,
                                        key_position, num_groups, query_ids,
                                        key_ids)
    return pair_softmax_attention(q, k, v, query, key, pair_dropout(
        query, key, seed, dropout_threshold(dropout)))[0]


#: :func:`local_pair_attention` as one operator whose backward recomputes
#: it (the path ``'compiled'``).
local_class_softmax = recomputed_attention('local_class_softmax',
                                           local_pair_attention)


def softmax_class_attention(
    cls: EquivariantClass, target: Target, view, in_order: int, q: Tensor,
    k: Tensor, v: Tensor, dropout: float = 0.0, training: bool = False,
    seed: Optional[Tensor] = None
) -> Tuple[Tensor, Tuple[Tensor, Tensor]]:
    r"""Exact softmax attention of one aggregating class.

    Args:
        cls (EquivariantClass): The class.
        target (Target): Output part (the query rows).
        view: Index bundle.
        in_order (int): Input order.
        q (torch.Tensor): Queries :obj:`[rows, H, d]` (already scaled).
        k (torch.Tensor): Keys :obj:`[inputs, H, d]`.
        v (torch.Tensor): Values :obj:`[inputs, H, d_v]`.
        dropout (float): Dropout on the attention weights.
        training (bool): Whether dropout is active.
        seed (torch.Tensor, optional): The class's seed of dropout
            (:mod:`~torch_geometric_hot.ops.attention.dropout`; :obj:`None`:
            drawn from torch's default generator).

    Returns:
        The output :obj:`[rows, H, d_v]` (zero for an empty key group) and
        the attention :obj:`(index [2, pairs], alpha [pairs, H])` where
        :obj:`index` holds (query row, input row).
    """
    width = _pair_width(q, k, v)
    query, key = class_pairs(cls, target, view, in_order, width)
    if not torch.compiler.is_compiling():  # checked when planned
        check_pairs(query.numel(), width, f'class {cls.name}')
    out, alpha, _ = pair_softmax_attention(q, k, v, query, key, pair_dropout(
        query, key, seed, dropout_threshold(dropout if training else 0.0)))
    return out, (torch.stack([query, key]), alpha)
