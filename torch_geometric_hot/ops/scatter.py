r"""The scatter backend: the one place that decides how rows are reduced.

Every grouped sum and maximum in the library goes through
:func:`scatter_sum` and :func:`scatter_max` (the grouped softmax too,
:func:`~torch_geometric_hot.ops.grouped_softmax`). Sums use torch's native
``index_add`` on a flat view (as fast as ``torch_scatter`` on CPU, and
faster than :func:`torch_geometric.utils.scatter`, see :func:`scatter_sum`);
maxima use ``torch_scatter`` when it is installed (1.6--1.9x faster than
``Tensor.scatter_reduce`` on CPU) and fall back to pure torch otherwise.
No other module imports ``torch_scatter``.

The choice can be forced with the environment variable
``TORCH_GEOMETRIC_HOT_SCATTER`` (``"auto"``, ``"torch"`` or
``"torch_scatter"``) or, at run time and per thread, with :func:`use_backend`.
"""
import contextlib
import contextvars
import importlib.util
import math
import os
from typing import Iterator, Optional, Sequence, Tuple

import torch
from torch import Tensor

_BACKENDS = ('auto', 'torch', 'torch_scatter')


def torch_scatter_available() -> bool:
    r"""Whether the optional ``torch_scatter`` extension can be imported."""
    return importlib.util.find_spec('torch_scatter') is not None


def _resolve(name: str) -> str:
    if name not in _BACKENDS:
        raise ValueError(f"scatter backend must be one of {_BACKENDS}, "
                         f"got {name!r}")
    if name == 'auto':
        return 'torch_scatter' if torch_scatter_available() else 'torch'
    if name == 'torch_scatter' and not torch_scatter_available():
        raise ValueError("scatter backend 'torch_scatter' was requested but "
                         "the torch_scatter package is not installed")
    return name


_default_backend = _resolve(os.environ.get('TORCH_GEOMETRIC_HOT_SCATTER',
                                           'auto'))
# use_backend's choice, per thread and context (None: the default)
_backend_override: contextvars.ContextVar[Optional[str]] = \
    contextvars.ContextVar('torch_geometric_hot_scatter', default=None)


def current_backend() -> str:
    r"""The backend in use: ``"torch"`` or ``"torch_scatter"``."""
    backend = _backend_override.get()
    return _default_backend if backend is None else backend


@contextlib.contextmanager
def use_backend(name: str) -> Iterator[str]:
    r"""Temporarily switch the scatter backend (``"auto"``, ``"torch"`` or
    ``"torch_scatter"``) in this thread (a :mod:`contextvars` variable:
    other threads keep theirs)."""
    token = _backend_override.set(_resolve(name))
    try:
        yield current_backend()
    finally:
        _backend_override.reset(token)


def scatter_sum(src: Tensor, index: Tensor, dim_size: int) -> Tensor:
    r"""Sums the rows of :obj:`src` into :obj:`dim_size` groups.

    One ``index_add_`` on a flat :obj:`[E, F]` view:
    ``benchmarks/scatter_backends.py`` measured
    :func:`torch_geometric.utils.scatter` (``reduce='sum'``) 1.2x to 2.8x
    slower, forward and backward (:obj:`[E, 4, 16]` and :obj:`[E, 64]`
    rows, eight to a group, :math:`10^4` to :math:`10^6` rows, one CPU
    thread).

    Args:
        src (torch.Tensor): Values of shape :obj:`[E, *]`.
        index (torch.Tensor): Group of every row, shape :obj:`[E]`.
        dim_size (int): Number of groups; empty groups are zero.

    :rtype: :class:`torch.Tensor` of shape :obj:`[dim_size, *]`
    """
    out = src.new_zeros((dim_size, ) + tuple(src.shape[1:]))
    # index_add_ on a flat [E, F] view: on >2-D tensors torch takes a much
    # slower parallel path on CPU
    width = math.prod(src.shape[1:])
    out.view(dim_size, width).index_add_(0, index,
                                         src.reshape(src.size(0), width))
    return out


def scatter_max(src: Tensor, index: Tensor, dim_size: int) -> Tensor:
    r"""Row-wise maximum of :obj:`src` per group (no gradient: it is meant
    for numerical stabilisers). Empty groups are zero. Its pure-torch path
    and :func:`torch_geometric.utils.scatter` (``reduce='max'``) take about
    the same time (PyG's 0.83x to 1.03x of ours in
    ``benchmarks/scatter_backends.py``); it is kept because it is where
    the scatter backend is chosen.

    Args:
        src (torch.Tensor): Values of shape :obj:`[E, *]`.
        index (torch.Tensor): Group of every row, shape :obj:`[E]`.
        dim_size (int): Number of groups.

    :rtype: :class:`torch.Tensor` of shape :obj:`[dim_size, *]`
    """
    src = src.detach()
    # torch_scatter has no fake-tensor kernels: under torch.compile the
    # pure-torch path is traced instead.
    if not torch.compiler.is_compiling() and src.numel() > 0 and \
            current_backend() == 'torch_scatter':
        import torch_scatter
        return torch_scatter.scatter_max(src, index, dim=0,
                                         dim_size=dim_size)[0]
    out = src.new_zeros((dim_size, ) + tuple(src.shape[1:]))
    expanded = index.view((-1, ) + (1, ) * (src.dim() - 1)).expand_as(src)
    return out.scatter_reduce_(0, expanded, src, reduce='amax',
                               include_self=False)


def segment_counts(index: Tensor, dim_size: int) -> Tensor:
    r"""Number of rows per group, as a :obj:`long` tensor of shape
    :obj:`[dim_size]`."""
    if torch.compiler.is_compiling():
        # bincount's length depends on the largest id; a sum of ones into
        # dim_size slots has a shape the compiler knows
        return index.new_zeros(dim_size, dtype=torch.long).index_add_(
            0, index, torch.ones_like(index, dtype=torch.long))
    return torch.bincount(index, minlength=dim_size)


def group_pairs(query_group: Tensor, key_group: Tensor, num_groups: int,
                query_ids: Sequence[Tensor] = (),
                key_ids: Sequence[Tensor] = ()) -> Tuple[Tensor, Tensor]:
    r"""All (query, key) pairs that share a group and that no exclusion
    removes, in :math:`O(\text{pairs} + K \log K)`: the one enumeration of
    pairs of every softmax and kernel attention path that enumerates them.

    Args:
        query_group (torch.Tensor): Group of every query :obj:`[Q]`.
        key_group (torch.Tensor): Group of every key :obj:`[K]`.
        num_groups (int): Number of groups.
        query_ids (sequence of torch.Tensor, optional): The exclusions as
            ids: per exclusion an id per query :obj:`[Q]` ...
        key_ids (sequence of torch.Tensor, optional): ... and an id per key
            :obj:`[K]`; a pair is removed where the two ids of an exclusion
            are equal.

    Returns:
        (query [pairs], key [pairs]): indices into the query and key lists.
    """
    order = torch.argsort(key_group, stable=True)
    counts = torch.bincount(key_group, minlength=num_groups)
    start = counts.cumsum(0) - counts
    per_query = counts.index_select(0, query_group)
    query = torch.repeat_interleave(
        torch.arange(query_group.numel(), device=query_group.device),
        per_query)
    first = per_query.cumsum(0) - per_query
    offset = torch.arange(query.numel(), device=query.device) - \
        first.index_select(0, query)
    key = order.index_select(0, start.index_select(0, query_group)
                             .index_select(0, query) + offset)
    if len(query_ids) == 0:
        return query, key
    keep = torch.ones_like(query, dtype=torch.bool)
    for q_ids, k_ids in zip(query_ids, key_ids):
        keep &= q_ids.index_select(0, query) != k_ids.index_select(0, key)
    return query[keep], key[keep]
