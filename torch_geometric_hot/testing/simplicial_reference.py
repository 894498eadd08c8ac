r"""Dense brute-force oracles for N-simplicial attention on one graph: the
full :math:`n^{N+1}` logit tensor by :func:`torch.einsum` (multilinear) or
by :func:`torch.linalg.det` (determinant), a softmax over all key axes and
the value contraction by :func:`torch.einsum`. Small :math:`n` only."""
import string
from typing import Sequence

import torch
from torch import Tensor


def dense_simplicial_logits(query: Tensor, keys: Sequence[Tensor],
                            form: str = 'multilinear') -> Tensor:
    r"""All logits of one graph, shape :obj:`[H, n, n, ..., n]` (query axis
    first, then one axis per key slot).

    Args:
        query (torch.Tensor): :obj:`[n, H, d]`.
        keys (list): :math:`N` tensors :obj:`[n, H, d]`.
        form (str): ``'multilinear'`` or ``'determinant'``.
    """
    order = len(keys)
    n, heads, dim = query.shape
    axes = string.ascii_lowercase[:order + 1]
    if form == 'multilinear':
        inputs = ','.join(f'{a}hz' for a in axes)
        return torch.einsum(f'{inputs}->h{axes}', query, *keys) * dim**-0.5
    size = order + 1
    chunks = [t.reshape(n, heads, dim // size, size) for t in [query, *keys]]
    grids = torch.meshgrid(*[torch.arange(n, device=query.device)] * size,
                           indexing='ij')
    rows = [c[g.reshape(-1)] for c, g in zip(chunks, grids)]  # [n^(N+1),H,C,s]
    matrices = torch.stack(rows, dim=-2)  # [n^(N+1), H, C, N+1, N+1]
    dets = torch.linalg.det(matrices).sum(dim=-1) * dim**-0.5
    return dets.t().reshape((heads, ) + (n, ) * size)


def dense_simplicial_attention(query: Tensor, keys: Sequence[Tensor],
                               values: Sequence[Tensor],
                               form: str = 'multilinear') -> Tensor:
    r"""N-simplicial attention of one graph over all :math:`n^N` key tuples
    of every query (Algorithm 2 of the paper, without the skip).

    Args:
        query (torch.Tensor): :obj:`[n, H, d]`.
        keys (list): :math:`N` tensors :obj:`[n, H, d]`.
        values (list): :math:`N` tensors :obj:`[n, H, d_v]`.
        form (str): ``'multilinear'`` or ``'determinant'``.

    :rtype: :class:`torch.Tensor` of shape :obj:`[n, H, d_v]`
    """
    order = len(keys)
    logits = dense_simplicial_logits(query, keys, form)
    heads, n = logits.shape[:2]
    alpha = logits.reshape(heads, n, -1).softmax(dim=-1).reshape(logits.shape)
    axes = string.ascii_lowercase[1:order + 1]
    inputs = ','.join(f'{a}hz' for a in axes)
    return torch.einsum(f'hq{axes},{inputs}->qhz', alpha, *values)
