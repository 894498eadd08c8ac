r"""The key groups of a class of the equivariant basis: the input rows a
class attends over for every output row (its summary's keys, their groups,
the distinct-index exclusions as ids), and the (query, key) pairs that no
exclusion removes (``docs/design.md``, "Higher-order attention"). Every
path of :mod:`~torch_geometric_hot.ops.attention` takes a class's keys from
here.
"""
from typing import List, Optional, Tuple

import torch
from torch import Tensor

from torch_geometric_hot.ops.basis import EquivariantClass
from torch_geometric_hot.ops.equivariant import Target, index_range
from torch_geometric_hot.ops.kernel_attention import SummaryKeys
from torch_geometric_hot.ops.plan_cache import view_plan
from torch_geometric_hot.ops.scatter import group_pairs
from torch_geometric_hot.ops.softmax import check_pairs

#: The summaries that name one input element (a single key), not a sum.
SINGLE_KEY_SUMMARIES = ('E', 'ET', 'D', 'X')
#: The input rows the keys of each aggregate summary are: nodes (order 1)
#: or diagonal entries (order 2), ``'node'``; off-diagonal entries,
#: ``'off'``. Summaries of one kind share their keys' input rows.
KEY_ROWS = {'R': 'off', 'C': 'off', 'ES': 'off', 'DS': 'node', 'XS': 'node'}


def summary_keys(summary: str, view, in_order: int,
                 slots: Tuple[int, ...] = ()) -> SummaryKeys:
    r"""The keys of an aggregate summary of :obj:`view`: the input rows it
    adds up, their groups and the value :obj:`slots` it carries."""
    if in_order == 1 and summary != 'XS':
        raise ValueError(f"no summary {summary!r} on order 1")
    if in_order == 1 or summary == 'DS':
        position = view.diag_pos if in_order == 2 else \
            index_range(view, 'nodes')
        return SummaryKeys(position, view.batch, view.num_graphs, slots)
    group, num_groups = {
        'R': (view.off_row, view.num_nodes),
        'C': (view.off_col, view.num_nodes),
        'ES': (view.off_batch, view.num_graphs),
    }[summary]
    return SummaryKeys(view.off_pos, group, num_groups, slots)


def key_position(summary: str, selector, target: Target,
                 view) -> Tuple[Tensor, Optional[Tensor]]:
    r"""Input row of a single-key term for every query row (and a mask for
    transposes that do not exist)."""
    position, mask = target.index(summary, selector)
    if summary == 'D':
        position = view.diag_pos.index_select(0, position)
    return position, mask


def exclusion_ids(cls: EquivariantClass, target: Target, view,
                  pool: SummaryKeys) -> List[Tuple[Tensor, Tensor]]:
    r"""The class's exclusions as ids: per excluded (summary, selector), an
    id per query row and an id per key of :obj:`pool` such that the key is
    excluded for the query exactly when the two are equal (ids of keys are
    non-negative; a query that excludes no key gets -1)."""
    out = []
    for summary, selector in cls.exclusions:
        if summary in SINGLE_KEY_SUMMARIES:  # compare input rows
            position, mask = key_position(summary, selector, target, view)
            if mask is not None:
                position = position.masked_fill(~mask, -1)
            out.append((position, pool.position))
        elif KEY_ROWS[cls.pool[0]] == 'node':  # a node key: its node
            out.append((target.node(selector), index_range(view, 'nodes')))
        else:  # the entries of a row (R) or column (C) of a node
            ends = view.off_row if summary == 'R' else view.off_col
            out.append((target.node(selector), ends))
    return out


@torch.library.custom_op('torch_geometric_hot::class_pairs', mutates_args=())
def class_pairs_from_index(query_group: Tensor, key_group: Tensor,
                           key_position: Tensor, num_groups: int,
                           query_ids: List[Tensor], key_ids: List[Tensor]
                           ) -> Tuple[Tensor, Tensor]:
    query, key = group_pairs(query_group, key_group, num_groups, query_ids,
                             key_ids)
    return query, key_position.index_select(0, key)


@class_pairs_from_index.register_fake
def _(query_group, key_group, key_position, num_groups, query_ids, key_ids):
    pairs = torch.library.get_ctx().new_dynamic_size()
    return query_group.new_empty(pairs), key_position.new_empty(pairs)


def class_pairs(cls: EquivariantClass, target: Target, view, in_order: int,
                width: int = 1) -> Tuple[Tensor, Tensor]:
    r"""The (query row, input row) pairs a class attends over: every key of
    the query's group that no exclusion removes (the operator
    ``torch_geometric_hot::class_pairs``: one node of a compiled graph,
    whose pair count is a data-dependent size). Kept with the view
    (:class:`~torch_geometric_hot.data.PlanCache`), so that the layers of a
    model enumerate them once per batch. Eagerly, the pairs are counted
    first and checked against the size limit at :obj:`width` elements per
    pair (a row of a hub holds :math:`\deg^2` of them).

    Returns:
        (query [pairs], input row [pairs])
    """
    def build() -> Tuple[Tensor, Tensor]:
        args = attention_index(cls, target, view, in_order)
        if not torch.compiler.is_compiling():
            check_pair_count(args[0], args[1], args[3], width,
                             f'class {cls.name}')
        return class_pairs_from_index(*args)

    return view_plan(view, ('class_pairs', in_order, target.part, cls), build,
                     keep=target.part != 'hyperedge')


def attention_index(cls: EquivariantClass, target: Target, view,
                    in_order: int
                    ) -> Tuple[Tensor, Tensor, Tensor, int, List[Tensor],
                               List[Tensor]]:
    r"""The index tensors of one class's softmax attention, as its
    operators take them (:mod:`~torch_geometric_hot.ops.attention.padded`,
    :mod:`~torch_geometric_hot.ops.attention.compiled`): the group of every
    query row, the group and the input row of every key of the class's
    pool, the number of groups, and the exclusions as ids
    (:func:`exclusion_ids`: per exclusion the ids of the query rows, then
    per exclusion those of the keys)."""
    summary, selector = cls.pool
    pool = summary_keys(summary, view, in_order)
    ids = exclusion_ids(cls, target, view, pool)
    return (target.index(summary, selector)[0], pool.group, pool.position,
            pool.num_groups, [q for q, _ in ids], [k for _, k in ids])


def check_pair_count(query_group: Tensor, key_group: Tensor,
                     num_groups: int, width: int, what: str) -> None:
    r"""Checks the (query, key) pairs of groups against the size limit
    before they are enumerated, at :obj:`width` elements per pair (host
    synchronisation: their count)."""
    check_pairs(int(torch.bincount(key_group, minlength=num_groups)
                    .index_select(0, query_group).sum()), width, what)
