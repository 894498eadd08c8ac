r"""The device a batch's layout is chosen for.

The layers pick their layout by the kind of device they run on (the
packed blocks' bucket ratio, whether softmax attention keeps its local
classes sparse, TokenGT's token layout): on the CPU the native kernels
and fine buckets, elsewhere (GPUs) few, coarse operations. Index work
built ahead of a step, in a :class:`~torch.utils.data.DataLoader`'s
worker processes on the CPU, must choose the layout of the device the
step runs on: :func:`planned_for` sets that device for the duration (and
switches the native CPU kernels off for any other device, as they never
run there), so that plans built on the CPU are the ones the device uses.
"""
import contextlib
import contextvars
from typing import Iterator, Optional, Union

import torch
from torch import Tensor

from torch_geometric_hot.ops.native import use_native

_override: contextvars.ContextVar[Optional[str]] = contextvars.ContextVar(
    'torch_geometric_hot_layout_device', default=None)


def layout_device(t: Tensor) -> str:
    r"""The device type whose layout a layer chooses for tensor :obj:`t`:
    the one set by :func:`planned_for`, else :obj:`t`'s own."""
    override = _override.get()
    return t.device.type if override is None else override


@contextlib.contextmanager
def planned_for(device: Union[str, torch.device, None]) -> Iterator[None]:
    r"""Chooses layouts for :obj:`device` (its type; :obj:`None` leaves
    each tensor's own) in this thread for the duration, the native CPU
    kernels off unless it is the CPU."""
    if device is None:
        yield
        return
    kind = torch.device(device).type
    token = _override.set(kind)
    try:
        with use_native('auto' if kind == 'cpu' else 'off'):
            yield
    finally:
        _override.reset(token)
