r"""Higher-order attention of every aggregating class on per-graph dense
blocks on size buckets, for batches of small graphs: per output part, key
kind and bucket one score block that all its classes share (on the coarse
layout of launch-bound devices, one block for the classes of both parts of
a pair output and every kind of key, on bins of graphs that share it),
each class masked by the group and exclusion ids of the sparse path
(``docs/design.md``, "Packed attention"; the path ``'packed'``).
"""
from typing import Dict, Hashable, List, NamedTuple, Optional, Sequence, \
    Tuple, Union

import torch
from torch import Tensor

from torch_geometric_hot.ops.attention.dropout import block_factors, \
    class_seed, draw_seed
from torch_geometric_hot.ops.attention.kernel_average import kernel_average
from torch_geometric_hot.ops.attention.pairs import softmax_class_attention
from torch_geometric_hot.ops.attention.projection import Projection, \
    project_outputs
from torch_geometric_hot.ops.basis import EquivariantClass
from torch_geometric_hot.ops.equivariant import Target, assemble_parts, \
    part_order
from torch_geometric_hot.ops.key_groups import KEY_ROWS, exclusion_ids, \
    summary_keys
from torch_geometric_hot.ops.part_bias import part_bias, part_indicator
from torch_geometric_hot.ops.plan_cache import making_plans_only, view_plan
from torch_geometric_hot.ops.planned_gather import gather_rows, \
    inverse_index
from torch_geometric_hot.ops.pooled_combination import ValueProjection
from torch_geometric_hot.ops.row_selection import select_rows
from torch_geometric_hot.ops.size_buckets import BUCKET_RATIO, \
    BucketLayout, blocks, bucket_layout, pack, squares
from torch_geometric_hot.validation import autocast_enabled

#: The kind of the rows of each output part.
QUERY_KIND = {'diag': 'node', 'off': 'off', 'node': 'node',
              'graph': 'graph'}
#: The kind of the rows of the diagonal and off-diagonal parts together
#: (their queries one part's rows after the other's): every entry of a
#: graph in its slots.
ENTRY_KIND = 'entry'
#: The most graphs that share a block on the coarse layout of launch-bound
#: devices (the width of its graph slots).
GRAPHS_PER_BIN = 8
#: The key of a part's output that holds all of its classes at once.
ALL_CLASSES = -1
#: The kinds of keys a group of classes attends over (one or several).
KeyKinds = Tuple[str, ...]


def packed_layout(view, pairs: bool,
                  ratio: float = BUCKET_RATIO) -> BucketLayout:
    r"""The size buckets of a batch's rows (kinds ``'node'``, ``'graph'``,
    and with :obj:`pairs` ``'off'``, the off-diagonal entries), the graphs
    sized by their nodes (plus off-diagonal entries with :obj:`pairs`);
    with a ratio above
    :data:`~torch_geometric_hot.ops.size_buckets.BUCKET_RATIO` (the coarse
    layout of launch-bound devices), graphs that share blocks: bins no
    larger than the bucket's largest graph, of at most
    :data:`GRAPHS_PER_BIN` graphs (the masks' ids keep graphs apart), in
    one bucket unless the buckets hold less than half of its score
    entries, and with :obj:`pairs` the kind :data:`ENTRY_KIND` too. Kept
    with the view."""
    merged = ratio > BUCKET_RATIO  # the coarse layout

    def build() -> BucketLayout:
        kinds = {'node': view.batch, 'graph': torch.arange(
            view.num_graphs, device=view.batch.device)}
        sizes = view.nodes_per_graph
        if pairs:
            kinds['off'] = view.off_batch
            sizes = sizes + view.edges_per_graph
            if merged:  # the parts' rows side by side
                kinds[ENTRY_KIND] = torch.cat([view.batch, view.off_batch])
        return bucket_layout(kinds, view.num_graphs, ratio,
                             squares if merged else None, sizes=sizes,
                             bins={'graph': GRAPHS_PER_BIN} if merged
                             else None)

    return view_plan(view, ('packed_layout', pairs, ratio), build)


class _GroupPlan(NamedTuple):
    # the classes of one output part that share their score blocks: each
    # compares `width` ids of a query with a key's (id 0 its group, seen
    # where equal; the others its exclusions, seen where they differ:
    # `match` [width, 1, 1, 1, 1]), kept as the distinct id columns per
    # bucket [G, U, L] (int32) and the column every (id, class) reads
    # (`query_columns`, `key_columns` [width * C]); the masks follow per
    # batch (_hidden)
    query_ids: List[Tensor]
    key_ids: List[Tensor]
    query_columns: Tensor
    key_columns: Tensor
    match: Tensor


def packed_class_attention(attention: str,
                           classes: Sequence[Sequence[EquivariantClass]],
                           targets: Sequence[Target], view, in_order: int,
                           queries: Tensor, keys: Tensor,
                           values: ValueProjection,
                           slots: Sequence[Sequence[int]],
                           exact: bool = True, eps: float = 1e-6,
                           dropout: float = 0.0,
                           seed: Optional[Tensor] = None,
                           ratio: float = BUCKET_RATIO,
                           local_on_pairs: bool = False,
                           projection: Optional[Projection] = None
                           ) -> Union[List[Tensor], Tensor]:
    r"""Attention of the aggregating classes of one or more output parts
    on per-graph dense blocks (softmax attention's local classes on
    enumerated pairs where :obj:`local_on_pairs`); the same result as the
    sparse operations.

    The arguments are those of
    :func:`~torch_geometric_hot.ops.attention.hot.hot_class_attention`
    (the parts with classes only), and:

    Args:
        eps (float): Floor of the kernel denominator.
        seed (torch.Tensor, optional): The call's seed of dropout
            (:obj:`None`: drawn). Dropout of kernel attention, on the
            outputs, is the caller's.
        ratio (float): Largest ratio of graph sizes within one bucket.
        local_on_pairs (bool): Softmax attention's local classes on
            enumerated pairs, not on the blocks.
        projection (Projection, optional): The layer's output projections:
            then the layer's output
            (:func:`~torch_geometric_hot.ops.attention.projection.project_outputs`;
            parts that attend together projected in one product).

    Returns:
        Per part, its classes' outputs :obj:`[rows, classes, H, d_v]`;
        with :obj:`projection` the layer's output :obj:`[elements, F_out]`.
    """
    device = queries.device.type
    if attention == 'kernel' and (autocast_enabled(device)
                                  or queries.dtype != keys.dtype):
        # sums over whole graphs: in the widest dtype, not autocast's
        dtype = torch.promote_types(
            torch.promote_types(queries.dtype, keys.dtype),
            torch.promote_types(values.x.dtype, values.weight.dtype))
        with torch.autocast(device, enabled=False):
            outs = packed_class_attention(
                attention, classes, targets, view, in_order,
                queries.to(dtype), keys.to(dtype),
                values._replace(x=values.x.to(dtype),
                                weight=values.weight.to(dtype)), slots,
                exact, eps, dropout, seed, ratio, local_on_pairs)
        # the projections in autocast's dtype, as the other paths'
        return outs if projection is None else project_outputs(
            outs, targets, slots, projection, view)
    exact = exact or attention == 'softmax'
    if attention != 'softmax':
        dropout = 0.0
    elif dropout > 0 and seed is None:
        seed = draw_seed(dropout, queries.device)
    starts = [0]
    for target in targets:
        starts.append(starts[-1] + target.num_rows)
    part_queries = [queries[s:e] for s, e in zip(starts[:-1], starts[1:])]
    outs: List[Dict[int, Tensor]] = [{} for _ in targets]
    on_pairs = local_on_pairs and attention == 'softmax'
    _sparse(on_pairs, classes, targets, view, in_order, part_queries, keys,
            values, slots, dropout, seed, outs)
    joint = _packed(attention, on_pairs, ratio, classes, targets, view,
                    in_order, queries, part_queries, keys, values, slots,
                    exact, eps, dropout, seed, outs, projection)
    if joint is not None:
        return joint
    outs = [part[ALL_CLASSES] if ALL_CLASSES in part else
            torch.stack([part[c] for c in range(len(part))], 1)
            for part in outs]
    return outs if projection is None else project_outputs(
        outs, targets, slots, projection, view)


def _on_blocks(cls: EquivariantClass, on_pairs: bool) -> bool:
    r"""Whether the class attends on the blocks: the global classes, and the
    local ones unless :obj:`on_pairs`."""
    return cls.kind == 'global' or not on_pairs


def _packed(attention: str, on_pairs: bool, ratio: float, classes,
            targets, view, in_order: int, queries: Tensor,
            part_queries: List[Tensor], keys: Tensor,
            values: ValueProjection, slots, exact: bool, eps: float,
            dropout: float, seed: Optional[Tensor],
            outs: List[Dict[int, Tensor]],
            projection: Optional[Projection] = None) -> Optional[Tensor]:
    r"""The classes of :func:`_on_blocks` on the packed layout, into
    :obj:`outs`: per group of classes that share their score blocks
    (:func:`_query_groups`), one score block per bucket and one batched
    product for all of the group's classes. With :obj:`projection`, a
    group of every class of every part gives the layer's output instead
    (:func:`_projected`)."""
    merged = ratio > BUCKET_RATIO  # launch-bound: fewer, larger products
    groups = _query_groups(targets, [_key_kind_groups(part, on_pairs, merged)
                                     for part in classes], merged, slots)
    if not groups:
        return None
    # the layer's output straight from the slots: one group holds every
    # class of every part (the parts of a pair output attending together)
    whole = projection is not None and len(groups) == 1 and \
        len(groups[0].parts) == len(targets) > 1 and \
        sum(map(len, classes)) == sum(len(m) for _, _, m in groups[0].parts)
    H, D = values.heads, values.head_channels
    weight = values.weight.view(-1, H * D, values.x.size(-1))
    pairs = in_order == 2 or any(t.part in ('diag', 'off') for t in targets)
    layout = packed_layout(view, pairs, ratio)
    key_blocks: Dict[KeyKinds, List[Tensor]] = {}
    for group in groups:
        kind, kinds = group.kind, group.kinds
        q = part_queries[group.parts[0][0]] if len(group.parts) == 1 \
            else queries
        starts = {p: start for p, start, _ in group.parts}
        members = [(classes[p][c], targets[p], starts[p])
                   for p, c in group.columns]
        C = len(members)
        position, taken, widths = _key_rows([cls for cls, _, _ in members],
                                            view, in_order, pairs, layout,
                                            kinds)
        key, plan = _cached_plan(members, q.size(0), kind, view, in_order,
                                 exact, layout, kinds)
        query_slots = layout.slots[kind]
        q_index = _heads_first_rows(
            view, ('query', layout.ratio, pairs, kind),
            query_slots.taken_row, query_slots.taken, layout.counts,
            query_slots.widths, H, q.size(0), merged)
        k_index = _heads_first_rows(
            view, ('keys', layout.ratio, in_order, pairs, kinds), position,
            taken, layout.counts, widths, H, keys.size(0), merged)
        v_index = _heads_first_rows(  # a key row's every class and head
            view, ('keys', layout.ratio, in_order, pairs, kinds), position,
            taken, layout.counts, widths, C * H, values.x.size(0), merged)
        if making_plans_only():
            if dropout > 0:  # the rows dropout hashes: a plan too
                _slot_rows(view, group, targets, layout)
            if whole:
                return _projected(None, group, targets, slots, projection,
                                  view, layout, H)
            _slot_outputs(None, view, layout, kind, C, H, pairs)
            _distribute(q.new_zeros(q.size(0), C, H, D), group, targets,
                        classes, outs)
            continue
        # padded query slots: any row (their outputs are dropped)
        q_blocks = _heads_first(q, q_index, layout.counts,
                                layout.slots[kind].widths)
        if kinds not in key_blocks:  # the keys of these kinds, once
            key_blocks[kinds] = _heads_first(keys, k_index, layout.counts,
                                             widths)
        group_slots = [slots[p][c] for p, c in group.columns]
        # the values of every input row, then the key slots' heads first
        v_blocks = _heads_first((values.x @ select_rows(
            weight, group_slots).view(C * H * D, -1).t()).view(
                -1, C * H, D), v_index, layout.counts, widths)
        drops: List[Optional[Tensor]] = [None] * len(v_blocks)
        if dropout > 0:  # [G, C, H, Lq, Lk], a class at a time
            # the rows dropout hashes: the query rows within their part,
            # the keys' inputs
            q_rows = layout.blocks(_slot_rows(view, group, targets,
                                              layout), kind)
            seeds = [class_seed(seed, slot) for slot in group_slots]
            drops = [torch.stack([block_factors(
                q_r, k_r, H, s, dropout, q.dtype) for s in seeds], 1)
                for q_r, k_r in zip(q_rows, blocks(
                    position, layout.counts, widths))]
        outs_b = [
            _attend(attention, torch.bmm(q_b, k_b.mT), v_b.view(
                v_b.size(0) // (C * H), C, H, v_b.size(1), D), hidden, eps,
                drop)
            for q_b, k_b, v_b, hidden, drop in zip(
                q_blocks, key_blocks[kinds], v_blocks,
                _hidden(view, key, plan), drops)
        ]
        if whole:
            return _projected(outs_b, group, targets, slots, projection,
                              view, layout, H)
        result = _slot_outputs(outs_b, view, layout, kind, C, H, pairs) \
            if outs_b else q.new_zeros(q.size(0), C, H, D)
        _distribute(result, group, targets, classes, outs)
    return None


def _output_rows(view, layout: BucketLayout, kind: str, classes: int,
                 heads: int, row_slot: Tensor, key: Hashable) -> Tensor:
    r"""The rows of the flat outputs of a group's blocks (:func:`_attend`,
    concatenated, then one zero row) that hold, for every row of
    :obj:`row_slot` (the slot of each output row; :math:`S`: none, which
    reads the zero row), its :obj:`classes` times :obj:`heads` outputs,
    class-major: :obj:`[rows * classes * heads]`, kept with the view under
    :obj:`key` (which tells the layouts of one view apart)."""
    def build() -> Tensor:
        CH = classes * heads
        widths = layout.slots[kind].widths
        kw = dict(device=row_slot.device, dtype=index_dtype(
            sum(c * w for c, w in zip(layout.counts, widths)) * CH + 1))
        within = torch.arange(CH, **kw)
        slot_rows, first = [], 0
        for count, width in zip(layout.counts, widths):
            graph = torch.arange(count, **kw).view(-1, 1, 1)
            position = torch.arange(width, **kw).view(1, -1, 1)
            slot_rows.append((first + (graph * CH + within) * width +
                              position).view(-1, CH))
            first += count * CH * width
        slot_rows.append(torch.full((1, CH), first, **kw))
        return torch.cat(slot_rows).index_select(0, row_slot).view(-1)

    return view_plan(view, ('packed_output_rows', layout.ratio, kind,
                            classes, heads) + key, build)


def _gathered_outputs(outs_b: List[Tensor], index: Tensor, C: int, H: int,
                      zero_row: bool) -> Tensor:
    r"""The outputs :obj:`[rows, C, H, D]` that :obj:`index`
    (:func:`_output_rows`) gathers from the flat outputs of a group's
    blocks :obj:`[*, D]`, one after the other, then with :obj:`zero_row` a
    zero row (read by rows without a slot)."""
    D = outs_b[0].size(-1)
    if zero_row:
        outs_b = outs_b + [outs_b[0].new_zeros(1, D)]
    flat = outs_b[0] if len(outs_b) == 1 else torch.cat(outs_b)
    return flat.index_select(0, index).view(-1, C, H, D)


def _slot_outputs(outs_b: Optional[List[Tensor]], view,
                  layout: BucketLayout, kind: str, C: int, H: int,
                  pairs: bool) -> Optional[Tensor]:
    r"""A group's outputs by row of :obj:`kind` :obj:`[rows, C, H, D]`
    from the flat outputs of its blocks (:obj:`None`: the plan only) on
    the layout :obj:`layout` (of pair rows where :obj:`pairs`): one gather
    (rows of a graph in no bucket, an empty one, read zeros)."""
    index = _output_rows(view, layout, kind, C, H,
                         layout.slots[kind].row_slot, (pairs, ))
    if outs_b is None:
        return None
    # every node and entry has a slot, an empty graph none
    return _gathered_outputs(outs_b, index, C, H, kind == 'graph')


class _QueryGroup(NamedTuple):
    # classes that share their score blocks: the kind of their query rows,
    # the kinds of their keys, per output part (index, first row of the
    # part among the group's query rows, its classes), and the (part,
    # class) of every column of the group's class dimension, by value slot
    kind: str
    kinds: KeyKinds
    parts: List[Tuple[int, int, List[int]]]
    columns: List[Tuple[int, int]]


def _query_groups(targets, groups: List[Dict[KeyKinds, List[int]]],
                  merged: bool, slots) -> List[_QueryGroup]:
    r"""The groups of classes that share their score blocks: those of one
    output part and kinds of keys (:func:`_key_kind_groups`), or with
    :obj:`merged` (the coarse layout of launch-bound devices) the classes
    of the diagonal and off-diagonal parts together, on the slots of every
    entry of a graph (:data:`ENTRY_KIND`): one product for both parts, of
    which each class's mask keeps its own part's rows. A group's classes
    run in the order of their value slots (:obj:`slots`): consecutive
    slots (all of a layer's, for one) read the projections as a view, not
    a gather."""
    def group(kind, kinds, parts) -> _QueryGroup:
        columns = sorted(((p, c) for p, _, members in parts
                          for c in members),
                         key=lambda pc: slots[pc[0]][pc[1]])
        return _QueryGroup(kind, kinds, parts, columns)

    out = [group(QUERY_KIND[target.part], kinds, [(p, 0, members)])
           for p, (target, part_groups) in enumerate(zip(targets, groups))
           for kinds, members in part_groups.items()]
    if merged and [t.part for t in targets] == ['diag', 'off'] and \
            [g.parts[0][0] for g in out] == [0, 1] and \
            out[0].kinds == out[1].kinds:
        diag, off = out
        return [group(ENTRY_KIND, diag.kinds, [
            diag.parts[0], (1, targets[0].num_rows, off.parts[0][2])])]
    return out


def _distribute(result: Tensor, group: _QueryGroup, targets, classes,
                outs: List[Dict[int, Tensor]]) -> None:
    r"""A group's outputs :obj:`[rows, C, H, D]` into the outputs of its
    parts: each part's rows and classes (columns)."""
    for p, start, _ in group.parts:
        rows = result if len(group.parts) == 1 else \
            result[start:start + targets[p].num_rows]
        columns = [i for i, (q, _) in enumerate(group.columns) if q == p]
        members = [group.columns[i][1] for i in columns]
        if columns == list(range(columns[0], columns[0] + len(columns))):
            _store(outs[p], members, classes[p],
                   rows[:, columns[0]:columns[0] + len(columns)])
        else:  # the part's columns among the other parts'
            for c, i in zip(members, columns):
                outs[p][c] = rows[:, i]


def _projected(outs_b: Optional[List[Tensor]], group: _QueryGroup,
               targets, slots, projection: Projection, view,
               layout: BucketLayout, H: int) -> Tensor:
    r"""The layer's output :obj:`[entries, F_out]` from the flat outputs of
    the blocks (:func:`_attend`; :obj:`None`: planning only) of a group of
    every class of the diagonal and off-diagonal parts with :obj:`H`
    heads: every entry's outputs gathered in entry order, times
    its classes' scales where the projection has them, times the classes'
    projections in one product, plus its part's bias and the residual
    (the product's addend)."""
    def build() -> Tuple[Tensor, Tensor]:
        order = part_order(view)
        entry_slot = torch.empty_like(order).index_copy_(
            0, order, layout.slots[ENTRY_KIND].row_slot)
        off = torch.zeros_like(order, dtype=torch.bool).index_fill_(
            0, view.off_pos, True)
        return entry_slot, part_indicator(off)

    entry_slot, entry_part = view_plan(
        view, ('packed_entry_slots', layout.ratio), build)
    C = len(group.columns)
    index = _output_rows(view, layout, ENTRY_KIND, C, H, entry_slot,
                         ('entries', ))
    weight, bias, scales = projection.weight, projection.bias, \
        projection.scales
    addend = projection.residual
    if bias is not None:
        addend = part_bias(bias, entry_part) if addend is None else \
            addend + part_bias(bias, entry_part)
    if scales is not None:  # [entries, C], kept with the view
        entry_scales = view_plan(
            view, ('packed_entry_scales', projection.scales_key,
                   tuple(group.columns)),
            lambda: _entry_scales(scales, group, targets, view))
    if not outs_b:  # planning only, or no entry at all
        y = weight.new_zeros(view.num_entries, weight.size(-1))
        return y if addend is None else y + addend
    group_slots = [slots[p][c] for p, c in group.columns]
    weight = select_rows(weight, group_slots).flatten(0, 1)
    rows = _gathered_outputs(outs_b, index, C, H, False)
    if scales is not None:
        rows = rows * entry_scales.to(rows.dtype)[:, :, None, None]
    rows = rows.reshape(rows.size(0), -1)
    if addend is None:
        return rows @ weight
    return torch.addmm(addend, rows, weight)


def _entry_scales(scales: Sequence[Tensor], group: _QueryGroup, targets,
                  view) -> Tensor:
    r"""The scales of a group of every class of the diagonal and
    off-diagonal parts :obj:`[entries, C]` in entry order, a column per
    class of the group: in an entry's row, its part's classes' scales,
    and zeros for the other part's classes (whose masks give it no
    output)."""
    parts = {}
    for p, _, _ in group.parts:
        own = torch.cat([scales[p], scales[p].new_zeros(len(scales[p]), 1)],
                        1)  # its last column: zeros
        parts[targets[p].part] = own[:, [c if q == p else -1
                                         for q, c in group.columns]]
    return assemble_parts(parts, view)


def _slot_rows(view, group: _QueryGroup, targets,
               layout: BucketLayout) -> Tensor:
    r"""The row within its part of every query slot of the group (row 0 in
    a padding slot), kept with the view."""
    taken = layout.slots[group.kind].taken_row
    if len(group.parts) == 1:  # the part's own rows
        return taken

    def build() -> Tensor:
        return torch.cat([torch.arange(targets[p].num_rows,
                                       device=taken.device)
                          for p, _, _ in group.parts]).index_select(0, taken)

    return view_plan(view, ('packed_slot_rows', layout.ratio, group.kind,
                            tuple(targets[p].part for p, _, _ in group.parts)),
                     build)


def _store(out: Dict[int, Tensor], members: List[int], part_classes,
           result: Tensor) -> None:
    r"""The outputs :obj:`[rows, C, H, D]` of a group's classes into the
    part's :obj:`out`."""
    if members == list(range(len(part_classes))):
        out[ALL_CLASSES] = result  # the part's classes, in order
    else:
        for c, result_c in zip(members, result.unbind(1)):
            out[c] = result_c  # one backward for the group


def _key_kind_groups(part: Sequence[EquivariantClass], on_pairs: bool,
                     merged: bool) -> Dict[KeyKinds, List[int]]:
    r"""The classes of one output part that attend on the blocks, in
    groups that share their score blocks: by the kind of their keys, or
    with :obj:`merged` (the coarse layout of launch-bound devices) all in
    one group over the keys of every kind (each class's mask keeps its
    own), one product per part instead of one per key kind."""
    groups: Dict[KeyKinds, List[int]] = {}
    for c, cls in enumerate(part):
        if _on_blocks(cls, on_pairs):
            groups.setdefault((KEY_ROWS[cls.pool[0]], ), []).append(c)
    if not merged or len(groups) < 2:
        return groups
    kinds = tuple(k for (k, ) in groups)
    return {kinds: sorted(c for members in groups.values() for c in members)}


def _heads_first_rows(view, key: Hashable, rows: Tensor, taken: Tensor,
                      counts: List[int], widths: List[int], heads: int,
                      num_rows: int, invert: bool
                      ) -> Tuple[Tensor, Optional[Tensor]]:
    r"""The rows of :obj:`x.reshape(-1, r)` (:obj:`x` :obj:`[num_rows,
    heads, r]`) that :func:`_heads_first` gathers to lay out the rows
    :obj:`rows` of :obj:`x` heads first, per bucket :obj:`[counts[b],
    heads, widths[b]]` (row times :obj:`heads` plus head), and with
    :obj:`invert` (launch-bound devices) the gather's
    :func:`~torch_geometric_hot.ops.planned_gather.inverse_index` (the
    slots :obj:`taken` read their rows; padded slots are masked out or
    dropped after), kept with the view under :obj:`key`."""
    def build() -> Tuple[Tensor, Optional[Tensor]]:
        dtype = index_dtype(num_rows * heads)
        if not counts:
            return rows[:0].to(dtype), None
        head = torch.arange(heads, device=rows.device, dtype=dtype).view(
            1, heads, 1)
        index = torch.cat([(b.to(dtype).unsqueeze(1) * heads + head).view(-1)
                           for b in blocks(rows, counts, widths)])
        if not invert:
            return index, None
        taken_heads = torch.cat([
            b.unsqueeze(1).expand(-1, heads, -1).reshape(-1)
            for b in blocks(taken, counts, widths)])
        return index, inverse_index(index, taken_heads, num_rows * heads)

    return view_plan(view, ('packed_heads_first', heads) + key, build)


def index_dtype(size: int) -> torch.dtype:
    r"""The dtype of a planned index into :obj:`size` rows: 32-bit where
    it holds them (half the memory of a batch's plans: these indices
    number rows times classes times heads), else 64-bit."""
    return torch.int32 if size <= torch.iinfo(torch.int32).max else \
        torch.int64


def _heads_first(x: Tensor, index: Tuple[Tensor, Optional[Tensor]],
                 counts: List[int], widths: List[int]) -> List[Tensor]:
    r"""Rows of :obj:`x` :obj:`[N, H, r]` as one block
    :obj:`[counts[b] * H, widths[b], r]` per bucket, a graph slot's heads
    side by side (the batch of the score products): one gather of the
    (row, head) pairs in that order (:func:`_heads_first_rows`: the index
    and its inverse), views after it."""
    H, r = x.shape[1:]
    return blocks(gather_rows(x.reshape(-1, r), *index),
                  [c * H for c in counts], widths)


def _attend(attention: str, score: Tensor, v: Tensor, hidden: Tensor,
            eps: float, drop: Optional[Tensor] = None) -> Tensor:
    r"""One bucket, all classes of a group: scores
    :obj:`[G * H, Lq, Lk]`, values :obj:`[G, C, H, Lk, D]`, the keys each
    query does not see :obj:`[G, C, 1, Lq, Lk]` ->
    :obj:`[G * C * H * Lq, D]` (flat, in that order); softmax weights times
    dropout's factors
    :obj:`drop` :obj:`[G, C, H, Lq, Lk]` where given."""
    G, C, H, Lk, D = v.shape
    Lq = score.size(-2)
    score = score.view(G, 1, H, Lq, Lk)
    if attention == 'kernel':  # a row without keys: 0 / eps
        return kernel_average(score, v, hidden, eps).view(-1, D)
    # the weights of the keys a row does not see are exactly 0, all of
    # them in a row without keys (which then outputs 0)
    weights = torch.softmax(score.masked_fill(
        hidden, torch.finfo(score.dtype).min), -1).masked_fill(hidden, 0)
    if drop is not None:
        weights = weights * drop
    # one flat batched product
    out = torch.bmm(weights.reshape(G * C * H, Lq, Lk),
                    v.reshape(G * C * H, Lk, D))
    return out.view(-1, D)


def _sparse(on_pairs: bool, classes, targets, view, in_order: int,
            part_queries: List[Tensor], keys: Tensor,
            values: ValueProjection, slots, dropout: float,
            seed: Optional[Tensor], outs: List[Dict[int, Tensor]]) -> None:
    r"""The other classes (softmax attention's local ones, where
    :obj:`on_pairs`) on enumerated pairs, into :obj:`outs`."""
    local = [[c for c, cls in enumerate(part)
              if not _on_blocks(cls, on_pairs)] for part in classes]
    parts = [p for p, members in enumerate(local) if members]
    if not parts:
        return
    H, D = values.heads, values.head_channels
    weight = values.weight.view(-1, H * D, values.x.size(-1))
    local_slots = [slots[p][c] for p in parts for c in local[p]]
    local_values = ValueProjection(
        values.x,
        select_rows(weight, local_slots).reshape(-1, values.x.size(-1)), H,
        D)
    v = local_values.values().unbind(1)  # one backward for all classes
    slot = 0
    for p in parts:
        for c in local[p]:
            outs[p][c] = softmax_class_attention(
                classes[p][c], targets[p], view, in_order, part_queries[p],
                keys, v[slot], dropout, dropout > 0,
                None if seed is None else class_seed(seed, slots[p][c]))[0]
            slot += 1


def _key_rows(classes: Sequence[EquivariantClass], view, in_order: int,
              pairs: bool, layout: BucketLayout, kinds: KeyKinds
              ) -> Tuple[Tensor, Tensor, List[int]]:
    r"""The input row of every key slot of :obj:`kinds` (row 0 for
    padding: padded keys are masked out) and whether it is taken (not
    padding), the slots of each graph those of every kind one after the
    other, and the key slots per graph of every bucket."""
    def build() -> Tuple[Tensor, Tensor, List[int]]:
        rows, taken = [], []
        for kind in kinds:
            summary = next(cls.pool[0] for cls in classes
                           if KEY_ROWS[cls.pool[0]] == kind)
            slots = layout.slots[kind]
            rows.append(layout.blocks(summary_keys(
                summary, view, in_order).position.index_select(
                    0, slots.taken_row), kind))
            taken.append(layout.blocks(slots.taken, kind))
        widths = [sum(b.size(1) for b in kind_blocks)
                  for kind_blocks in zip(*rows)]
        if not widths:  # no graph with key slots (an empty batch)
            slots = layout.slots[kinds[0]]
            return slots.taken_row, slots.taken, widths
        return _side_by_side(rows), _side_by_side(taken), widths

    return view_plan(view, ('packed_key_rows', in_order, pairs, kinds,
                            layout.ratio), build)


def _side_by_side(per_kind: List[List[Tensor]]) -> Tensor:
    r"""Blocks of slots of one or more kinds (per kind, per bucket
    :obj:`[blocks, width]`) as one flat tensor, each graph's slots of every
    kind one after the other."""
    if len(per_kind) == 1:
        return torch.cat([b.reshape(-1) for b in per_kind[0]])
    return torch.cat([torch.cat(kind_blocks, 1).reshape(-1)
                      for kind_blocks in zip(*per_kind)])


#: A class of a group, with its output part and the first row of that
#: part among the group's query rows.
Member = Tuple[EquivariantClass, Target, int]


def _cached_plan(members: List[Member], rows: int, query_kind: str, view,
                 in_order: int, exact: bool, layout: BucketLayout,
                 kinds: KeyKinds) -> Tuple[Hashable, _GroupPlan]:
    r"""The group's plan (:func:`_build_plan`), kept with the view, and
    its key."""
    key = ('packed_class_attention', layout.ratio, in_order, query_kind,
           tuple((cls, target.part, start) for cls, target, start in members),
           exact, kinds)
    return key, view_plan(view, key, lambda: _build_plan(
        members, rows, query_kind, view, in_order, exact, layout, kinds))


def _build_plan(members: List[Member], rows: int, query_kind: str, view,
                in_order: int, exact: bool, layout: BucketLayout,
                kinds: KeyKinds) -> _GroupPlan:
    r"""The ids that decide which keys each query of each class sees: a key
    of its group (its graph, by the layout, or its node) that none of the
    class's exclusions removes. The classes' group and exclusion ids are
    packed side by side, one column per class and id; a class with fewer
    exclusions gets ids that never match, and so do the keys of a kind
    other than the class's own (:obj:`kinds` holds several: the keys of
    every kind side by side in each graph's slots, as :func:`_key_rows`
    lays them out), and the query rows of a part other than the class's
    own (the group's :obj:`rows` hold several parts' rows)."""
    columns = []
    for cls, target, start in members:
        summary, selector = cls.pool
        pool = summary_keys(summary, view, in_order)
        ids = [(target.index(summary, selector)[0], pool.group)] + \
            (exclusion_ids(cls, target, view, pool) if exact else [])
        columns.append([(_spread(q, start, rows), k) for q, k in ids])
    members = [cls for cls, _, _ in members]
    width = max(len(ids) for ids in columns)
    # per (id, class) column, e-major: its ids (None: padding, which
    # matches nothing: queries -2, keys -3), keys per kind of key
    q_cols = [ids[e][0] if e < len(ids) else None
              for e in range(width) for ids in columns]
    k_cols = [tuple(ids[e][1] if e < len(ids) and
                    KEY_ROWS[cls.pool[0]] == kind else None
                    for kind in kinds)
              for e in range(width) for cls, ids in zip(members, columns)]
    device = columns[0][0][0].device
    q_distinct, query_columns = _distinct(q_cols, device)
    k_distinct, key_columns = _distinct(k_cols, device)
    query_ids = _id_blocks(layout, query_kind, [
        _column(c, -2, columns[0][0][0]) for c in q_distinct], -2)
    per_kind = []
    for k, kind in enumerate(kinds):
        like = next(ids[0][1] for cls, ids in zip(members, columns)
                    if KEY_ROWS[cls.pool[0]] == kind)
        per_kind.append(_id_blocks(layout, kind, [
            _column(c[k], -3, like) for c in k_distinct], -3))
    key_ids = per_kind[0] if len(per_kind) == 1 else \
        [torch.cat(b, -1) for b in zip(*per_kind)]
    match = torch.arange(width, device=query_columns.device) == 0
    return _GroupPlan(query_ids, key_ids, query_columns, key_columns,
                      match.view(width, 1, 1, 1, 1))


def _distinct(cols: List, device: torch.device) -> Tuple[List, Tensor]:
    r"""The distinct columns of :obj:`cols` (id tensors, :obj:`None` for
    padding, or tuples of them), by identity then by value, and the
    distinct column of each (on :obj:`device`)."""
    def same(a, b) -> bool:
        if isinstance(a, tuple):
            return all(same(x, y) for x, y in zip(a, b))
        return a is b or (a is not None and b is not None and
                          a.shape == b.shape and torch.equal(a, b))

    def identity(col) -> Hashable:
        return tuple(map(id, col)) if isinstance(col, tuple) else id(col)

    distinct: List = []
    index = []
    seen: Dict[Hashable, int] = {}  # by identity: compared once
    for col in cols:
        found = seen.get(identity(col))
        if found is None:
            found = next((u for u, d in enumerate(distinct)
                          if same(col, d)), None)
        if found is None:
            found = len(distinct)
            distinct.append(col)
        seen[identity(col)] = found
        index.append(found)
    return distinct, torch.tensor(index, dtype=torch.long, device=device)


def _spread(ids: Tensor, start: int, rows: int) -> Tensor:
    r"""A part's query ids :obj:`[part rows]` among a group's :obj:`rows`
    from :obj:`start`, the other rows -2 (matching no key)."""
    if start == 0 and ids.size(0) == rows:
        return ids
    out = ids.new_full((rows, ), -2)
    out[start:start + ids.size(0)] = ids
    return out


def _column(ids: Optional[Tensor], fill: int, like: Tensor) -> Tensor:
    r"""A column of ids as int32 (:obj:`fill` everywhere for padding)."""
    return torch.full_like(like, fill, dtype=torch.int32) if ids is None \
        else ids.int()


def _id_blocks(layout: BucketLayout, kind: str, columns: List[Tensor],
               fill: int) -> List[Tensor]:
    r"""Id columns (one :obj:`[rows]` each) packed, padding slots
    :obj:`fill`, as one block :obj:`[G_b, U, L_b]` per bucket."""
    packed = pack(torch.stack(columns, 1), layout.slots[kind].slot_row,
                  fill)
    return [b.transpose(1, 2).contiguous()
            for b in layout.blocks(packed, kind)]


def _hidden(view, key: Hashable, plan: _GroupPlan) -> List[Tensor]:
    r"""Per bucket the keys each query of each class does not see
    :obj:`[G, C, 1, Lq, Lk]` (bool), from the group's plan; made once per
    batch (kept with the view)."""
    width = plan.match.size(0)
    C = plan.query_columns.numel() // width

    def build() -> List[Tensor]:
        hidden = []
        for q, k in zip(plan.query_ids, plan.key_ids):
            G, Lq, Lk = q.size(0), q.size(-1), k.size(-1)
            q = q.index_select(1, plan.query_columns).view(
                G, width, C, 1, Lq, 1)
            k = k.index_select(1, plan.key_columns).view(
                G, width, C, 1, 1, Lk)
            hidden.append((q != k).squeeze(1) if width == 1 else
                          ((q == k) != plan.match).any(1))
        return hidden

    return view_plan(view, ('packed_hidden', ) + key, build)
