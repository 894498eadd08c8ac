r"""Exact softmax attention of a *global* class of the equivariant basis on
per-graph padded blocks (``docs/design.md``, "Softmax attention").

A global class lets every query attend over all input elements of its graph
except a few excluded ones (those sharing an index with the query, e.g.
class 15 of 2→2 drops the entries touching :math:`i` or :math:`j`).
Enumerating the (query, key) pairs, as
:func:`~torch_geometric_hot.ops.higher_order_attention.softmax_class_attention`
does, holds several :obj:`[pairs, H, d]` tensors; here queries and keys are
scattered into :obj:`[B, H, L, d]` blocks and attended with
:func:`torch.nn.functional.scaled_dot_product_attention` under a boolean
mask built from the exclusions, one block of queries at a time, so the
extra memory is :math:`O(B \cdot L_q^{\text{block}} \cdot L_k)` booleans
plus what the attention kernel needs. A batch of graphs of very different
sizes is packed into size buckets instead of one block padded to its
largest graph (:mod:`~torch_geometric_hot.ops.bucketed_global_softmax`,
when the block would hold at least twice the score entries). Either way the
padded blocks are checked against the size limit
(:func:`~torch_geometric_hot.ops.validation.size_limit`) before they are
allocated. The result is the same: the enumerated path is its test oracle.
Under :func:`torch.compile` the attention is one operator,
``torch_geometric_hot::global_class_softmax``
(:mod:`~torch_geometric_hot.ops.recomputed_attention`).
"""
from typing import List

import torch
import torch.nn.functional as F
from torch import Tensor

from torch_geometric_hot.ops.basis import EquivariantClass
from torch_geometric_hot.ops.bucketed_global_softmax import (
    bucketed_global_attention, global_buckets, padded_elements)
from torch_geometric_hot.ops.equivariant import Target
from torch_geometric_hot.ops.higher_order_attention import attention_index
from torch_geometric_hot.ops.recomputed_attention import dropout_seed, \
    recomputed_attention
from torch_geometric_hot.ops.token_attention import pad_by_graph, \
    token_positions
from torch_geometric_hot.ops.validation import check_size

#: Largest number of mask entries (B x query block x keys) per block.
BLOCK_ELEMENTS = 1 << 22


def global_softmax_class_attention(cls: EquivariantClass, target: Target,
                                   view, in_order: int, q: Tensor, k: Tensor,
                                   v: Tensor, dropout: float = 0.0,
                                   training: bool = False) -> Tensor:
    r"""Exact softmax attention of one global class over per-graph blocks.

    .. math::
        o_q = \sum_{k \in \mathcal{G}(q)}
        \mathrm{softmax}_{k \in \mathcal{G}(q)}(q^\top k)\, v_k,
        \qquad \mathcal{G}(q) = \{\text{keys of } q\text{'s graph}\}
        \setminus X(q)

    Every key block gets one extra all-zero key that a query may attend to
    only when its group :math:`\mathcal{G}(q)` is empty, so such a query
    outputs exactly 0 (no :math:`0/0`, finite gradients).

    Args:
        cls (EquivariantClass): A class with :obj:`kind == 'global'`.
        target (Target): Output part (the query rows).
        view: Index bundle.
        in_order (int): Input order.
        q (torch.Tensor): Queries :obj:`[rows, H, d]` (already scaled).
        k (torch.Tensor): Keys :obj:`[inputs, H, d]`.
        v (torch.Tensor): Values :obj:`[inputs, H, d_v]`.
        dropout (float): Dropout on the attention weights.
        training (bool): Whether dropout is active.

    :rtype: :class:`torch.Tensor` :obj:`[rows, H, d_v]`
    """
    if cls.kind != 'global':
        raise ValueError(f"class {cls.name} is {cls.kind}, not global")
    p = dropout if training else 0.0
    args = (q, k, v, *attention_index(cls, target, view, in_order), p)
    if torch.compiler.is_compiling():  # one node of the compiled graph
        return _global_class_softmax(*args, dropout_seed(p, q.device))
    return global_block_attention(*args)


def global_block_attention(q: Tensor, k: Tensor, v: Tensor,
                           query_graph: Tensor, key_graph: Tensor,
                           key_position: Tensor, num_graphs: int,
                           query_ids: List[Tensor], key_ids: List[Tensor],
                           dropout: float = 0.0) -> Tensor:
    r"""The attention of :func:`global_softmax_class_attention` from index
    tensors: the graph of every query row :obj:`[rows]`, the graph and the
    input row of every key :obj:`[K]`, and the exclusions as ids (see
    :func:`~torch_geometric_hot.ops.higher_order_attention.exclusion_ids`).

    :rtype: :class:`torch.Tensor` :obj:`[rows, H, d_v]`
    """
    rows, heads = q.size(0), q.size(1)
    if rows == 0:
        return v.new_zeros(0, heads, v.size(-1))
    ids = list(zip(query_ids, key_ids))
    q_pos, q_len = token_positions(query_graph, num_graphs)
    k_pos, k_len = token_positions(key_graph, num_graphs)
    widths = (heads * q.size(-1), heads * (k.size(-1) + v.size(-1)))
    buckets = global_buckets(query_graph, q_pos, q_len, key_graph, k_pos,
                             k_len, widths)  # checks the buckets' size
    if buckets is not None:  # graphs of very different sizes
        return bucketed_global_attention(
            q, k.index_select(0, key_position),
            v.index_select(0, key_position), ids, buckets, BLOCK_ELEMENTS,
            dropout)
    # host synchronisation: the padded lengths are the largest graph's
    len_q, len_k = int(q_len.max()), int(k_len.max()) + 1  # + zero key
    check_size(padded_elements([(num_graphs, len_q, len_k)], widths),
               f"global softmax attention's padded blocks ({num_graphs} "
               f"graphs x {len_k} keys of the largest)")

    def key_blocks(x: Tensor) -> Tensor:  # [K, H, d] -> [B, H, L_k, d]
        return pad_by_graph(x.index_select(0, key_position), key_graph,
                            k_pos, num_graphs, len_k).transpose(1, 2)

    keys, values = key_blocks(k), key_blocks(v)
    queries = pad_by_graph(q, query_graph, q_pos, num_graphs,
                           len_q).transpose(1, 2)  # [B, H, L_q, d]
    # key slots that hold a key: [B, L_k]
    real = torch.arange(len_k, device=q.device) < k_len.view(-1, 1)
    id_blocks = [(pad_by_graph(qi, query_graph, q_pos, num_graphs, len_q, -2),
                  pad_by_graph(ki, key_graph, k_pos, num_graphs, len_k, -3))
                 for qi, ki in ids]
    step = max(1, BLOCK_ELEMENTS // (num_graphs * len_k))
    outs = []
    for start in range(0, len_q, step):
        end = min(start + step, len_q)
        allowed = real.unsqueeze(1).expand(num_graphs, end - start,
                                           len_k).clone()
        for q_ids, k_ids in id_blocks:
            allowed &= q_ids[:, start:end].unsqueeze(-1) != \
                k_ids.unsqueeze(1)
        allowed[..., -1] = ~allowed.any(-1)  # empty group: the zero key
        outs.append(F.scaled_dot_product_attention(
            queries[:, :, start:end], keys, values,
            attn_mask=allowed.unsqueeze(1), dropout_p=dropout, scale=1.0))
    out = torch.cat(outs, 2) if len(outs) > 1 else outs[0]
    return out.transpose(1, 2)[query_graph, q_pos]  # [rows, H, d_v]


_global_class_softmax = recomputed_attention('global_class_softmax',
                                             global_block_attention)
