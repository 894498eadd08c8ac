r"""Memory for the temporaries of a native operation, kept between calls.

Eager PyTorch takes every tensor from the system allocator, which returns
large blocks to the kernel when they are freed, so each new large tensor
arrives as untouched pages: on a 2-vCPU machine (``docs/design.md``, "Measured
costs") a page
fault per 4 KB fills them at about 1 GB/s, against 54--65 GB/s for memory
already mapped. An operation's own temporaries (the readings of kernel
attention, their gradients, the summary-gradient scratch) live only while
it runs, so they can come from one buffer per thread that stays mapped
from call to call:

.. code-block:: python

    with workspace() as scratch:
        readings = scratch.empty((rows, H, C), torch.float32)
        ...  # nothing taken from `scratch` outlives the block

The buffer grows to the largest operation seen (a request that does not
fit is allocated on its own, and the next operation gets a buffer that
fits all of this one's requests); :func:`release_workspace` frees it.
Nested operations and other threads get buffers of their own (a nested
one, plain allocations).
"""
import contextlib
import math
import threading
from typing import Iterator, Optional, Sequence

import torch
from torch import Tensor

#: Alignment of every temporary, in bytes (a cache line).
ALIGN = 64
_local = threading.local()


class Scratch:
    r"""The temporaries of one operation (see :func:`workspace`)."""
    def __init__(self, buffer: Optional[Tensor]) -> None:
        self.buffer = buffer
        self.used = 0  # bytes taken, from the buffer or not

    def empty(self, shape: Sequence[int], dtype: torch.dtype) -> Tensor:
        r"""An uninitialised temporary."""
        nbytes = math.prod(shape) * dtype.itemsize
        start, self.used = self.used, self.used + -(-nbytes // ALIGN) * ALIGN
        if self.buffer is None or self.used > self.buffer.numel():
            return torch.empty(shape, dtype=dtype)
        return self.buffer[start:start + nbytes].view(dtype).view(shape)

    def zeros(self, shape: Sequence[int], dtype: torch.dtype) -> Tensor:
        r"""A zero-filled temporary."""
        return self.empty(shape, dtype).zero_()


@contextlib.contextmanager
def workspace() -> Iterator[Scratch]:
    r"""The temporaries of one operation on this thread, carved from a
    buffer kept between calls; none may be used after the block."""
    if getattr(_local, 'active', False):  # nested: plain allocations
        yield Scratch(None)
        return
    need = getattr(_local, 'need', 0)
    buffer = getattr(_local, 'buffer', None)
    if need and (buffer is None or buffer.numel() < need):
        buffer = _local.buffer = torch.empty(need, dtype=torch.uint8)
    scratch = Scratch(buffer)
    _local.active = True
    try:
        yield scratch
    finally:
        _local.active = False
        _local.need = max(need, scratch.used)


def release_workspace() -> None:
    r"""Frees this thread's workspace buffer (the next operation that takes
    temporaries allocates them afresh)."""
    _local.buffer, _local.need = None, 0
