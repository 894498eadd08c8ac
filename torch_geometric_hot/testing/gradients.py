r"""Gradient checks that hold on every device."""
from typing import Callable, Sequence

import torch
from torch import Tensor

#: Largest difference :func:`assert_gradcheck` allows between two backward
#: passes with the same input on CUDA, whose atomic additions (scatter,
#: ``index_add``) sum in an order that changes from run to run.
CUDA_NONDET_TOL = 1e-12


def assert_gradcheck(fn: Callable, inputs: Sequence[Tensor],
                     **kwargs) -> None:
    r""":func:`torch.autograd.gradcheck` of :obj:`fn` at :obj:`inputs`
    (float64 tensors that require gradients), raising on failure. On CUDA
    the reentrancy check tolerates :data:`CUDA_NONDET_TOL` unless
    :obj:`nondet_tol` is given; other keyword arguments are passed on."""
    if any(t.device.type == 'cuda' for t in inputs):
        kwargs.setdefault('nondet_tol', CUDA_NONDET_TOL)
    assert torch.autograd.gradcheck(fn, tuple(inputs), **kwargs)
