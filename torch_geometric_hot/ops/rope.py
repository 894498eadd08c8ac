r"""Rotary position embeddings (RoPE) for the determinant form of
N-simplicial attention (`Dussolle & Liò 2025
<https://arxiv.org/abs/2511.04624>`_, §2.4; `Su et al. 2021
<https://arxiv.org/abs/2104.09864>`_ for :math:`N = 1`).

Channels are split into chunks of :math:`s = N+1`; chunk :math:`c` of a node
at integer position :math:`p` is rotated by

.. math::
    R_c(p) = \exp(p\, \theta_c\, \Omega), \qquad
    \theta_c = \mathrm{base}^{-c/C},

with :math:`\Omega` the fixed skew-symmetric :math:`s \times s` generator
:math:`\Omega_{i,i+1} = -\Omega_{i+1,i} = 1` (for :math:`s = 2` the usual
RoPE rotation). Since :math:`R_c(p) \in SO(s)` and
:math:`R_c(p + r) = R_c(r) R_c(p)`, a determinant logit of rotated vectors is
unchanged when every position of the tuple is shifted by the same amount:
it depends on relative positions only.
"""
from functools import lru_cache
from typing import Optional

import torch
from torch import Tensor


@lru_cache(maxsize=None)
def rotation_generator(size: int,
                       device: Optional[torch.device] = None) -> Tensor:
    r"""The skew-symmetric generator :math:`\Omega` of shape
    :obj:`[size, size]` (float64) on :obj:`device` (cached per size and
    device)."""
    omega = torch.zeros(size, size, dtype=torch.float64, device=device)
    upper = torch.arange(size - 1, device=device)
    omega[upper, upper + 1] = 1.0
    omega[upper + 1, upper] = -1.0
    return omega


def rotary_matrices(pos: Tensor, num_chunks: int, size: int,
                    base: float = 10000.0) -> Tensor:
    r"""Rotations :math:`R_c(p)` of every position and chunk.

    Args:
        pos (torch.Tensor): Integer positions :obj:`[n]`.
        num_chunks (int): Number of chunks :math:`C` per head.
        size (int): Chunk size :math:`s = N+1`.
        base (float): Frequency base. (default: :obj:`10000.0`)

    :rtype: :class:`torch.Tensor` of shape :obj:`[n, C, s, s]` (float64)
    """
    if pos.dim() != 1 or pos.dtype.is_floating_point or pos.is_complex():
        raise TypeError(f"'pos' must be a 1-D integer tensor, got dtype "
                        f"{pos.dtype} and shape {tuple(pos.shape)}")
    theta = base**(-torch.arange(
        num_chunks, dtype=torch.float64, device=pos.device) / num_chunks)
    angle = pos.to(torch.float64).view(-1, 1) * theta
    omega = rotation_generator(size, pos.device)
    return torch.linalg.matrix_exp(angle.view(-1, num_chunks, 1, 1) * omega)


def apply_rotary(x: Tensor, pos: Tensor, size: int,
                 base: float = 10000.0) -> Tensor:
    r"""Rotates every :obj:`size`-chunk of :obj:`x` by :math:`R_c(p)`.

    Args:
        x (torch.Tensor): Queries or keys :obj:`[n, H, d]`, :math:`d` a
            multiple of :obj:`size`.
        pos (torch.Tensor): Integer positions :obj:`[n]`.
        size (int): Chunk size :math:`s = N+1`.
        base (float): Frequency base. (default: :obj:`10000.0`)

    :rtype: :class:`torch.Tensor` of the shape of :obj:`x`
    """
    if x.dim() != 3 or x.size(-1) % size != 0:
        raise ValueError(f"'x' must have shape [n, H, d] with d a multiple "
                         f"of the chunk size {size}, got {tuple(x.shape)}")
    if pos.numel() != x.size(0):
        raise ValueError(f"'pos' must have one entry per node ({x.size(0)})"
                         f", got {pos.numel()}")
    n, heads, dim = x.shape
    rot = rotary_matrices(pos, dim // size, size, base).to(x.dtype)
    chunks = x.view(n, heads, dim // size, size)
    return torch.einsum('ncij,nhcj->nhci', rot, chunks).reshape(n, heads, dim)
