r"""A module's update without its skip connection."""
from typing import Any

import torch
from torch import Tensor


class WithoutResidual(torch.nn.Module):
    r"""Runs a layer of the form :math:`x' = x + f(x)` and returns the pure
    update :math:`f(x) = x' - x`, e.g. the N-simplicial attention of
    :class:`~torch_geometric_hot.nn.SimplicialAttention` without its skip
    connection, as in the over-smoothing theorems of `Dussolle & Liò 2025
    <https://arxiv.org/abs/2511.04624>`_ (§3.2).

    The subtraction costs a rounding error of order
    :math:`\epsilon \lVert x \rVert` (use float64 to study residuals near
    zero).

    Args:
        module (torch.nn.Module): A layer whose output is its input plus an
            update of the same shape.

    Shapes:
        - **input:** what :obj:`module` takes, :obj:`x` first
        - **output:** the shape of :obj:`x`
    """
    def __init__(self, module: torch.nn.Module) -> None:
        super().__init__()
        self.module = module

    def reset_parameters(self) -> None:
        self.module.reset_parameters()

    def forward(self, x: Tensor, *args: Any, **kwargs: Any) -> Tensor:
        out = self.module(x, *args, **kwargs)
        if out.shape != x.shape:
            raise ValueError(f"WithoutResidual needs a module whose output "
                             f"has the input's shape {tuple(x.shape)}, got "
                             f"{tuple(out.shape)}")
        return out - x

    def __repr__(self) -> str:
        return f'{self.__class__.__name__}({self.module})'
