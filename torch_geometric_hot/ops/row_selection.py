r"""Rows of a tensor by a fixed list of row numbers (a layer's classes, a
part's value slots) without a host-to-device copy per call.

``t[[0, 1, 8]]`` turns the list into a CPU index tensor and copies it to
:obj:`t`'s device at every call; on a GPU such a copy from pageable memory
waits for the work queued before it. :func:`select_rows` takes a slice (a
view) when the rows are consecutive, and otherwise one
:meth:`~torch.Tensor.index_select` whose index tensor is made once per
list and device, on the device (from ranges: no host data crosses), and
then kept.
"""
from typing import Dict, Sequence, Tuple

import torch
from torch import Tensor

from torch_geometric_hot.ops.layout_device import layout_device

_indices: Dict[Tuple[Tuple[int, ...], torch.device], Tensor] = {}


def select_rows(t: Tensor, rows: Sequence[int], dim: int = 0) -> Tensor:
    r"""The rows :obj:`rows` of :obj:`t` along :obj:`dim` (the same as
    :obj:`t[rows]` for a list of ints and :obj:`dim` 0), a view when they
    are consecutive, :obj:`t` itself when they are all of its rows in
    order."""
    rows = tuple(rows)
    if rows and rows == tuple(range(rows[0], rows[0] + len(rows))):
        if len(rows) == t.size(dim):
            return t
        return t.narrow(dim, rows[0], len(rows))
    if torch.compiler.is_compiling() or layout_device(t) == 'cpu':
        # compiled: a constant of the graph
        return t[(slice(None), ) * (dim % t.dim()) + (list(rows), )]
    key = (rows, t.device)
    index = _indices.get(key)
    if index is None:
        index = _indices[key] = device_index(rows, t.device)
    return t.index_select(dim, index)


def device_index(rows: Sequence[int], device: torch.device) -> Tensor:
    r"""The index tensor of :obj:`rows` on :obj:`device`, made there from
    ranges (one per run of consecutive rows) without a copy from the host,
    which from pageable memory waits for the work queued on the device."""
    rows = tuple(rows)
    if not rows:
        return torch.empty(0, dtype=torch.long, device=device)
    runs, start = [], 0
    for end in range(1, len(rows) + 1):
        if end == len(rows) or rows[end] != rows[end - 1] + 1:
            runs.append(torch.arange(rows[start], rows[end - 1] + 1,
                                     device=device))
            start = end
    return torch.cat(runs)
