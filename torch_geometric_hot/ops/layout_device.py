r"""The device a batch's layout is chosen for (``docs/design.md``,
"Paths"): index work built ahead of a step, in a
:class:`~torch.utils.data.DataLoader`'s worker processes on the CPU,
chooses the layout of the device the step runs on (:func:`planned_for`).
"""
import contextlib
from typing import Iterator, Union

import torch
from torch import Tensor

from torch_geometric_hot.ops.attention import dispatch
from torch_geometric_hot.ops.native import use_native


def layout_device(t: Tensor) -> str:
    r"""The device type whose layout a layer chooses for tensor :obj:`t`:
    the one set by :func:`planned_for` (or
    :func:`~torch_geometric_hot.ops.use_path`'s :obj:`device_type`), else
    :obj:`t`'s own."""
    return dispatch.problem('hot', 'softmax', (), t.device).device_type


@contextlib.contextmanager
def planned_for(device: Union[str, torch.device, None]) -> Iterator[None]:
    r"""Chooses layouts for :obj:`device` (its type; :obj:`None` leaves
    each tensor's own) in this thread for the duration
    (:func:`~torch_geometric_hot.ops.use_path` with its
    :obj:`device_type`, the paths forced around it kept), the native CPU
    kernels off unless it is the CPU (where the mode in force stays)."""
    if device is None:
        yield
        return
    kind = torch.device(device).type
    paths, _, operations = dispatch._forcing(False)  # kept as they are
    # the CPU keeps the native mode in force (the step runs under it)
    native = contextlib.nullcontext() if kind == 'cpu' else use_native('off')
    with dispatch.use_path(*paths, device_type=kind, operations=operations), \
            native:
        yield


def traced_layout(device: Union[str, torch.device]) -> torch.device:
    r"""The device whose layout a step compiled by :func:`torch.compile`
    is planned for: :obj:`device`, except the CPU, whose native kernels
    do not run in a traced graph: there, a GPU's (the launch-bound
    layout: one padded block per part, token blocks, no native kernel)."""
    device = torch.device(device)
    return torch.device('cuda') if device.type == 'cpu' else device
