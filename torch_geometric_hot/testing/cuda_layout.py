r"""Runs code with the layout a CUDA device would choose, on any device."""
import contextlib
from typing import Iterator

from torch_geometric_hot.ops.layout_device import planned_for


@contextlib.contextmanager
def cuda_layout() -> Iterator[None]:
    r"""The layers choose CUDA's layout for the duration (the native CPU
    kernels off, the packed blocks and token layouts CUDA uses), whatever
    device the tensors are on: the operators a GPU step runs, counted or
    recorded on the CPU."""
    with planned_for('cuda'):
        yield
