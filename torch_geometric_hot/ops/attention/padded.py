r"""Exact softmax attention of a *global* class of the equivariant basis on
per-graph padded blocks on size buckets, with
:func:`torch.nn.functional.scaled_dot_product_attention` under a boolean
mask of the exclusions, one chunk of queries at a time (``docs/design.md``,
"Softmax attention" and "Paths"; the path ``'padded'``, and as one
operator, ``'compiled'``).
"""
from typing import List, Optional, Tuple

import torch
import torch.nn.functional as F
from torch import Tensor

from torch_geometric_hot.ops.attention.dropout import block_factors, \
    draw_seed
from torch_geometric_hot.ops.attention.compiled import \
    recomputed_attention
from torch_geometric_hot.ops import size_buckets
from torch_geometric_hot.ops.layout_device import layout_device
from torch_geometric_hot.ops.plan_cache import plans_for
from torch_geometric_hot.ops.size_buckets import BucketLayout, \
    bucket_layout, padded_blocks
from torch_geometric_hot.validation import check_size, current_size_limit

#: Largest number of mask entries (graphs x query block x keys) per chunk
#: of queries.
BLOCK_ELEMENTS = 1 << 22
#: The same on devices other than the CPU (GPUs), where each chunk's
#: operations are kernel launches: a bound on a chunk's transient mask
#: and scores alone (the masks the backward pass keeps add up to the same
#: whatever the chunks). One graph of :math:`10^4` edges then takes two
#: chunks per class instead of 30.
LAUNCH_BOUND_BLOCK_ELEMENTS = 1 << 26


def global_buckets(query_graph: Tensor, key_graph: Tensor, num_graphs: int,
                   widths: Tuple[int, int] = (1, 1)) -> BucketLayout:
    r"""The size buckets of a global class's queries and keys (kinds
    ``'query'`` and ``'key'``; each graph's key block ends with at least
    one padding slot, the zero key), the graphs sorted by their queries
    plus keys, or one block padded to the largest graph where buckets save
    less than ``BUCKET_GAIN`` times its :math:`B \cdot L_q \cdot (L_k + 1)`
    score entries. The padded blocks (the elements of one query slot and
    of one key slot, keys and values, are :obj:`widths`) are checked
    against the size limit before any slot is built."""
    def check(counts: List[int], shapes: List[List[int]]) -> None:
        check_size(sum(count * (len_q * widths[0] + len_k * widths[1])
                       for count, (len_q, len_k) in zip(counts, shapes)),
                   f"global softmax attention's padded blocks ({num_graphs} "
                   f"graphs in {len(counts)} size buckets, up to "
                   f"{max((len_k for _, len_k in shapes), default=1)} keys)")

    return bucket_layout(
        {'query': query_graph, 'key': key_graph}, num_graphs,
        block=lambda graphs, _, shape: graphs * shape[0] * shape[1],
        padding={'key': 1}, check=check, masked=('key', ))


def global_block_attention(q: Tensor, k: Tensor, v: Tensor,
                           query_graph: Tensor, key_graph: Tensor,
                           key_position: Optional[Tensor], num_graphs: int,
                           query_ids: List[Tensor], key_ids: List[Tensor],
                           dropout: float = 0.0,
                           seed: Optional[Tensor] = None,
                           layout: Optional[BucketLayout] = None,
                           scale: Optional[float] = 1.0) -> Tensor:
    r"""Exact softmax attention of one global class,

    .. math::
        o_q = \sum_{k \in \mathcal{G}(q)}
        \mathrm{softmax}_{k \in \mathcal{G}(q)}(q^\top k)\, v_k,
        \qquad \mathcal{G}(q) = \{\text{keys of } q\text{'s graph}\}
        \setminus X(q),

    from index tensors: the graph of every query row :obj:`[rows]`, the
    graph and the input row of every key :obj:`[K]`, and the exclusions
    :math:`X(q)` as ids (see
    :func:`~torch_geometric_hot.ops.key_groups.exclusion_ids`),
    on the blocks of :func:`global_buckets`, one chunk of queries at a time
    (at most ``BLOCK_ELEMENTS`` mask entries, ``LAUNCH_BOUND_BLOCK_ELEMENTS``
    on a layout for another device). Every key block ends with an
    all-zero key that a query attends to only when its group is empty, so
    such a query outputs exactly 0 (no :math:`0/0`, finite gradients).
    With dropout the weights are
    computed explicitly and multiplied by
    :func:`~torch_geometric_hot.ops.attention.dropout.keep_factors` of
    :obj:`seed` (:obj:`None`: drawn). Self-attention without exclusions
    (TokenGT's) takes no :obj:`key_position` (the keys are the queries'
    rows) and a :obj:`layout` of one kind ``'token'``, its key-padding
    masks the only ones. Without dropout the fused call scales the logits
    by :obj:`scale` (:obj:`None`: :math:`1 / \sqrt{d}`).

    :rtype: :class:`torch.Tensor` :obj:`[rows, H, d_v]`
    """
    rows, heads = q.size(0), q.size(1)
    if rows == 0:
        return v.new_zeros(0, heads, v.size(-1))
    if layout is None:  # kept with the index tensors, per rule and limit
        widths = (heads * q.size(-1), heads * (k.size(-1) + v.size(-1)))
        layout = plans_for([query_graph, key_graph]).plan(
            ('global_buckets', num_graphs, widths, size_buckets.BUCKET_GAIN,
             current_size_limit()),
            lambda: global_buckets(query_graph, key_graph, num_graphs,
                                   widths))
    q_kind, k_kind = ('query', 'key') if key_position is not None else \
        ('token', 'token')
    q_slots = layout.slots[q_kind]
    if key_position is not None:
        k, v = k.index_select(0, key_position), v.index_select(0, key_position)
    queries, keys, values = (padded_blocks(x, layout, kind) for x, kind in (
        (q, q_kind), (k, k_kind), (v, k_kind)))
    # padding never matches: queries -2, keys -3
    id_blocks = [(padded_blocks(qi, layout, q_kind, -2),
                  padded_blocks(ki, layout, k_kind, -3))
                 for qi, ki in zip(query_ids, key_ids)]
    limit = BLOCK_ELEMENTS if layout_device(q) == 'cpu' else \
        LAUNCH_BOUND_BLOCK_ELEMENTS
    drop = dropout > 0
    if drop:  # the rows dropout hashes: the query rows, the keys' inputs
        seed = draw_seed(dropout) if seed is None else seed
        query_rows = layout.blocks(q_slots.taken_row, q_kind)
        key_rows = query_rows if key_position is None else \
            padded_blocks(key_position, layout, k_kind)
    out = []
    for b, (count, len_q, len_k, real) in enumerate(zip(
            layout.counts, q_slots.widths, layout.slots[k_kind].widths,
            layout.masks[k_kind])):
        if len_q == 0:  # graphs with keys but no query rows
            continue
        query = queries[b].transpose(1, 2)  # [count, H, len_q, d]
        key, value = keys[b].transpose(1, 2), values[b].transpose(1, 2)
        step = len_q if key_position is None else \
            max(1, limit // (count * len_k))
        chunks = []
        for start in range(0, len_q, step):
            end = min(start + step, len_q)
            whole = step >= len_q  # one chunk: no slice operations
            chunk = query if whole else query[:, :, start:end]
            allowed = real  # [count, 1, 1, len_k], None: every key
            if key_position is not None:
                allowed = real.view(count, 1, len_k).expand(
                    count, end - start, len_k).clone()
                for q_ids, k_ids in id_blocks:
                    allowed &= q_ids[b][:, start:end].unsqueeze(-1) != \
                        k_ids[b].unsqueeze(1)
                allowed[..., -1] = ~allowed.any(-1)  # empty group: zero key
                allowed = allowed.unsqueeze(1)
            if not drop:
                chunks.append(F.scaled_dot_product_attention(
                    chunk, key, value, attn_mask=allowed,
                    scale=scale))  # [count, H, end - start, d_v]
                continue
            score = chunk @ key.mT
            if allowed is not None:
                score = score.masked_fill(~allowed, -float('inf'))
            chunks.append((torch.softmax(score, -1) * block_factors(
                query_rows[b] if whole else query_rows[b][:, start:end],
                key_rows[b], heads, seed,
                dropout, score.dtype)) @ value)
        block = torch.cat(chunks, 2) if len(chunks) > 1 else chunks[0]
        out.append(block.transpose(1, 2).reshape(
            count * len_q, heads, block.size(-1)))
    return torch.cat(out).index_select(0, q_slots.row_slot)


#: :func:`global_block_attention` as one operator whose backward
#: recomputes it (the path ``'compiled'``).
global_class_softmax = recomputed_attention('global_class_softmax',
                                            global_block_attention)
