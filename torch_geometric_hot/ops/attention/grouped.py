r"""Exact softmax attention of the aggregating classes of a HOT layer by
the grouped operator, the path ``'grouped'`` (``docs/design.md``,
"Softmax attention").
"""
from typing import Dict, List, Optional, Sequence

import torch
from torch import Tensor

from torch_geometric_hot.ops.attention.dropout import class_seed, draw_seed
from torch_geometric_hot.ops.basis import EquivariantClass
from torch_geometric_hot.ops.equivariant import Target
from torch_geometric_hot.ops.grouped_softmax_attention import \
    grouped_softmax_attention, softmax_groups
from torch_geometric_hot.ops.key_groups import KEY_ROWS, \
    attention_index, summary_keys
from torch_geometric_hot.ops.native import SoftmaxGroups
from torch_geometric_hot.ops.plan_cache import view_plan
from torch_geometric_hot.ops.pooled_combination import ValueProjection
from torch_geometric_hot.ops.row_selection import select_rows


def class_groups(cls: EquivariantClass, target: Target, view,
                 in_order: int) -> SoftmaxGroups:
    r"""The groups of one aggregating class for
    :func:`grouped_softmax_attention`, its keys numbered in the order of
    its pool (:func:`~torch_geometric_hot.ops.key_groups.summary_keys`:
    the inputs of one kind) and hashed by dropout as their
    input rows, kept with the view."""
    def build() -> SoftmaxGroups:
        query_group, key_group, position, num_groups, query_ids, key_ids = \
            attention_index(cls, target, view, in_order)
        return softmax_groups(query_group, key_group,
                              torch.arange(position.numel(),
                                           device=position.device),
                              num_groups, query_ids, key_ids, position)

    return view_plan(view, ('grouped_softmax', in_order, target.part, cls),
                     build, keep=target.part != 'hyperedge')


def grouped_class_attention(classes: Sequence[Sequence[EquivariantClass]],
                            targets: Sequence[Target], view, in_order: int,
                            queries: Sequence[Tensor], keys: Tensor,
                            values: ValueProjection,
                            slots: Sequence[Sequence[int]],
                            dropout: float = 0.0,
                            seed: Optional[Tensor] = None) -> List[Tensor]:
    r"""Exact softmax attention of the aggregating classes of one or more
    output parts by :func:`grouped_softmax_attention`, class by class. The
    keys and the values are taken per kind of input the classes attend
    over (nodes or diagonal entries; off-diagonal entries): the keys of a
    kind gathered once, the values of all classes of a kind one product
    of the kind's inputs with their value weights.

    The arguments are those of
    :func:`~torch_geometric_hot.ops.attention.hot.hot_class_attention`,
    except :obj:`queries` (per part, its queries :obj:`[rows, H, d]`) and
    :obj:`seed` (the call's seed of dropout; :obj:`None`: drawn).

    Returns:
        Per part, its classes' outputs :obj:`[rows, classes, H, d_v]`.
    """
    if dropout > 0 and seed is None:
        seed = draw_seed(dropout)
    H, D = values.heads, values.head_channels
    weight = values.weight.view(-1, H * D, values.x.size(-1))
    kinds: Dict[str, list] = {}
    for p, (part, part_slots) in enumerate(zip(classes, slots)):
        for c, (cls, slot) in enumerate(zip(part, part_slots)):
            kinds.setdefault(KEY_ROWS[cls.pool[0]], []).append(
                (p, c, cls, slot))
    outs: List[List[Tensor]] = [[] for _ in classes]
    for members in kinds.values():
        position = summary_keys(members[0][2].pool[0], view, in_order).position
        kind_keys = keys.index_select(0, position)
        kind_values = torch.nn.functional.linear(
            values.x.index_select(0, position),
            select_rows(weight, [slot for *_, slot in members]).flatten(0, 1)
        ).view(position.numel(), len(members), H, D).unbind(1)  # one backward
        for m, (p, c, cls, slot) in enumerate(members):
            outs[p].append((c, grouped_softmax_attention(
                queries[p], kind_keys, kind_values[m],
                class_groups(cls, target=targets[p], view=view,
                             in_order=in_order), dropout,
                None if seed is None else class_seed(seed, slot))))
    return [torch.stack([out for _, out in sorted(part, key=lambda t: t[0])],
                        1) for part in outs]
