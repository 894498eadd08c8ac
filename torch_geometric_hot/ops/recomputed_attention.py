r"""Softmax attention of one class of the equivariant basis as one operator
whose backward pass recomputes it, the form it takes under
:func:`torch.compile`.

Exact softmax attention reads its layout from the data: a local class the
number of its (query, key) pairs, a global class the lengths of its padded
per-graph blocks. Traced, every such size is a symbol of the compiled
graph, and every step between the index tensors and the attention
(enumeration, sorting, padding, masking, the grouped softmax) is a node
that inductor compiles, for the forward and the backward pass. As an
operator, the attention is one node with a static output
:obj:`[rows, H, d_v]`; it runs eagerly inside the compiled graph (size
buckets, query chunks and size checks included), and its backward pass is
a second operator that runs it again under :func:`torch.func.vjp`, as
activation checkpointing does: a compiled graph holds no tensor whose size
is read from the data.

Both operators take the same arguments: queries :obj:`[rows, H, d]`, keys
:obj:`[inputs, H, d]`, values :obj:`[inputs, H, d_v]`, the group of every
query row :obj:`[rows]`, the group and the input row of every key of the
pool :obj:`[K]`, the number of groups, the distinct-index exclusions as
ids (per exclusion an id per query row and one per key; a key is excluded
for a query when they are equal), the dropout probability on the attention
weights and its seed (a tensor,
:func:`~torch_geometric_hot.ops.attention.dropout.draw_seed`; the factors
are hashes of the rows and the seed, so the recomputation draws the
forward pass's). On tensors that the native kernels take (the CPU) both
run the grouped operator of :mod:`~torch_geometric_hot.ops.\
grouped_softmax_attention` on the groups of those index tensors, as the
eager layers do.
"""
from typing import Callable, List, Optional

import torch
from torch import Tensor

from torch_geometric_hot.ops import native
from torch_geometric_hot.ops.grouped_softmax_attention import \
    grouped_softmax_attention, grouped_softmax_gradients, softmax_groups
from torch_geometric_hot.ops.validation import size_limit

_NO_LIMIT = 2**63 - 1

#: ``attend(q, k, v, query_group, key_group, key_position, num_groups,
#: query_ids, key_ids, dropout, seed) -> [rows, H, d_v]``, eagerly.
Attend = Callable[..., Tensor]


def recomputed_attention(name: str, attend: Attend):
    r"""The operator ``torch_geometric_hot::{name}`` running
    :obj:`attend`, with a fake implementation (the output shape) and a
    backward pass ``torch_geometric_hot::{name}_backward`` that recomputes
    it under :func:`torch.func.vjp`; on tensors that the native kernels
    take, both run the grouped operator on the groups of the index
    tensors instead (its output and log-sum-exp recomputed for its own
    backward operator)."""
    def forward(q: Tensor, k: Tensor, v: Tensor, query_group: Tensor,
                key_group: Tensor, key_position: Tensor, num_groups: int,
                query_ids: List[Tensor], key_ids: List[Tensor],
                dropout: float, seed: Optional[Tensor]) -> Tensor:
        if native.applies(q, k, v):
            return grouped_softmax_attention(q, k, v, softmax_groups(
                query_group, key_group, key_position, num_groups,
                query_ids, key_ids), dropout, seed)
        return attend(q, k, v, query_group, key_group, key_position,
                      num_groups, query_ids, key_ids, dropout, seed)

    def backward(grad: Tensor, q: Tensor, k: Tensor, v: Tensor,
                 query_group: Tensor, key_group: Tensor,
                 key_position: Tensor, num_groups: int,
                 query_ids: List[Tensor], key_ids: List[Tensor],
                 dropout: float, seed: Optional[Tensor],
                 grouped: bool) -> List[Tensor]:
        if grouped:  # as the forward pass ran (see setup_context)
            return list(grouped_softmax_gradients(
                grad, q, k, v, softmax_groups(
                    query_group, key_group, key_position, num_groups,
                    query_ids, key_ids), dropout, seed))

        def run(q: Tensor, k: Tensor, v: Tensor) -> Tensor:
            # no size limit: the forward pass checked these sizes, and the
            # backward pass may run in an autograd thread (CUDA), which
            # does not see the limit set where the forward pass ran
            with size_limit(_NO_LIMIT):
                return attend(q, k, v, query_group, key_group, key_position,
                              num_groups, query_ids, key_ids, dropout, seed)

        return list(torch.func.vjp(run, q, k, v)[1](grad))

    op = torch.library.custom_op(f'torch_geometric_hot::{name}', forward,
                                 mutates_args=())
    backward_op = torch.library.custom_op(
        f'torch_geometric_hot::{name}_backward', backward, mutates_args=())

    @op.register_fake
    def _(q, k, v, *args):
        return q.new_empty(q.size(0), q.size(1), v.size(-1))

    @backward_op.register_fake
    def _(grad, q, k, v, *args):
        return [torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)]

    def setup_context(ctx, inputs, output) -> None:
        q, k, v, query_group, key_group, key_position, num_groups, \
            query_ids, key_ids, dropout, seed = inputs
        ctx.constants = (num_groups, len(query_ids), dropout, seed is None,
                         native.applies(q, k, v))
        ctx.save_for_backward(q, k, v, query_group, key_group, key_position,
                              *query_ids, *key_ids,
                              *([] if seed is None else [seed]))

    def backward_pass(ctx, grad: Tensor):
        num_groups, num_ids, dropout, no_seed, grouped = ctx.constants
        q, k, v, query_group, key_group, key_position, *rest = \
            ctx.saved_tensors
        seed = None if no_seed else rest[-1]
        grads = backward_op(grad.contiguous(), q, k, v, query_group,
                            key_group, key_position, num_groups,
                            rest[:num_ids], rest[num_ids:2 * num_ids],
                            dropout, seed, grouped)
        return (*grads, None, None, None, None, [None] * num_ids,
                [None] * num_ids, None, None)

    op.register_autograd(backward_pass, setup_context=setup_context)
    return op
