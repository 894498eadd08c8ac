r"""Softmax attention of one class of the equivariant basis as one operator
whose backward pass recomputes it under :func:`torch.func.vjp`, the form
it takes under :func:`torch.compile` (``docs/design.md``, "Softmax
attention"): one node with a static output shape, so that no size read
from the data enters a compiled graph.

Both operators take the index tensors of
:func:`~torch_geometric_hot.ops.key_groups.attention_index`
after the queries, keys and values, then the dropout probability and its
seed (a tensor: the factors are hashes of the rows and the seed, so the
recomputation draws the forward pass's).
"""
from typing import Callable, List, Optional

import torch
from torch import Tensor

from torch_geometric_hot.ops import native
from torch_geometric_hot.ops.grouped_softmax_attention import \
    grouped_softmax_attention, grouped_softmax_gradients, softmax_groups
from torch_geometric_hot.validation import size_limit

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
        # no size limit: the forward pass checked these sizes, and the
        # backward pass may run in an autograd thread (CUDA), which does
        # not see the limit set where the forward pass ran
        with size_limit(_NO_LIMIT):
            return list(torch.func.vjp(lambda q, k, v: attend(
                q, k, v, query_group, key_group, key_position, num_groups,
                query_ids, key_ids, dropout, seed), q, k, v)[1](grad))

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
