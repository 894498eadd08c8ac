r"""Input checks shared by views, transforms and layers: each names the
argument and what was expected, and runs before any work.

Two settings govern them, both per thread (and per :mod:`asyncio` task):
they are :mod:`contextvars`, so a context manager entered in one thread
never changes what another thread sees.

* **Validation** (:func:`validation`): the checks that read tensor values
  (graph ids in range, sorted batches, node indices in range, finite
  features) cost a pass over the input and a device synchronisation;
  ``with validation(False):`` skips them (shapes and dtypes are always
  checked), and so does tracing by :func:`torch.compile`. The
  process-wide default is on; the environment variable
  ``TORCH_GEOMETRIC_HOT_VALIDATION=off`` turns it off.
* **Size limit** (:func:`size_limit`): every transform or layer whose output
  can grow faster than its input (candidate tuples, hyperedge candidates,
  dense per-graph blocks) estimates the number of elements it would
  allocate and raises :class:`SizeLimitError` above the limit
  (:data:`DEFAULT_SIZE_LIMIT` elements, about 0.8 GB of 64-bit indices)
  instead of exhausting memory. Raise it for one block with
  ``with size_limit(10**9):``, or for the process with
  :func:`set_size_limit` or the environment variable
  ``TORCH_GEOMETRIC_HOT_SIZE_LIMIT``.

A layer or model that checked its input runs its own sublayers through
:func:`on_checked_features`: their features are computed from that input,
so :func:`check_features` skips its scan for NaN there (one pass and one
device synchronisation per sublayer otherwise).
"""
import contextlib
import contextvars
import os
from typing import Callable, Iterator, Optional, Tuple, TypeVar

import torch
from torch import Tensor

__all__ = [
    'SizeLimitError', 'current_size_limit', 'on_checked_features',
    'set_size_limit', 'size_limit', 'validating', 'validation'
]

INTEGER_DTYPES = (torch.long, torch.int, torch.int16, torch.uint8,
                  torch.int8)
#: Elements a size-guarded transform or layer may allocate by default.
DEFAULT_SIZE_LIMIT = 10**8


def _env_flag(name: str, default: bool) -> bool:
    value = os.environ.get(name, 'on' if default else 'off').lower()
    if value not in ('on', 'off', '1', '0', 'true', 'false'):
        raise ValueError(f"{name} must be 'on' or 'off', got {value!r}")
    return value in ('on', '1', 'true')


_default_validation = _env_flag('TORCH_GEOMETRIC_HOT_VALIDATION', True)
_default_size_limit = int(os.environ.get('TORCH_GEOMETRIC_HOT_SIZE_LIMIT',
                                         DEFAULT_SIZE_LIMIT))
_validation: contextvars.ContextVar[Optional[bool]] = \
    contextvars.ContextVar('torch_geometric_hot_validation', default=None)
_size_limit: contextvars.ContextVar[Optional[int]] = \
    contextvars.ContextVar('torch_geometric_hot_size_limit', default=None)
_features_checked: contextvars.ContextVar[bool] = contextvars.ContextVar(
    'torch_geometric_hot_features_checked', default=False)
T = TypeVar('T')


class SizeLimitError(ValueError):
    r"""An output would exceed the size limit (see :func:`size_limit`)."""


def validating() -> bool:
    r"""Whether the value checks run in this thread (see
    :func:`validation`); never while :func:`torch.compile` traces (a check
    would break the graph: validate before compiling)."""
    if torch.compiler.is_compiling():
        return False
    enabled = _validation.get()
    return _default_validation if enabled is None else enabled


@contextlib.contextmanager
def validation(enabled: bool) -> Iterator[None]:
    r"""Turns the value checks on or off in this thread (and the
    :mod:`contextvars` context) for the duration of the block. Off, bad
    input may fail deep inside torch or give a wrong answer: switch them
    off only for input that was validated before."""
    token = _validation.set(bool(enabled))
    try:
        yield
    finally:
        _validation.reset(token)


def current_size_limit() -> int:
    r"""The size limit in force in this thread, in elements."""
    limit = _size_limit.get()
    return _default_size_limit if limit is None else limit


def set_size_limit(limit: int) -> None:
    r"""Sets the process-wide default size limit (elements); a
    :func:`size_limit` block overrides it."""
    global _default_size_limit
    _default_size_limit = _check_limit(limit)


@contextlib.contextmanager
def size_limit(limit: int) -> Iterator[None]:
    r"""Sets the size limit (elements) in this thread for the duration of
    the block."""
    token = _size_limit.set(_check_limit(limit))
    try:
        yield
    finally:
        _size_limit.reset(token)


def _check_limit(limit: int) -> int:
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
        raise ValueError(f"the size limit must be a non-negative int, got "
                         f"{limit!r}")
    return limit


def check_size(elements: int, what: str) -> None:
    r"""Raises :class:`SizeLimitError` when :obj:`elements` (an estimate of
    what :obj:`what` would allocate) exceeds the size limit. Code traced by
    :func:`torch.compile` is not checked (the size is often a symbol there,
    and the limit a per-thread setting), as the value checks are not: run
    representative input eagerly before compiling."""
    if torch.compiler.is_compiling():
        return
    limit = current_size_limit()
    if elements > limit:
        raise SizeLimitError(
            f"{what} would allocate {elements:,} elements, above the size "
            f"limit of {limit:,}; raise it with "
            f"'with torch_geometric_hot.validation.size_limit(n):' or "
            f"torch_geometric_hot.validation.set_size_limit(n) (or the "
            f"environment variable TORCH_GEOMETRIC_HOT_SIZE_LIMIT), or use "
            f"sparser "
            f"candidates")


def _shape(x) -> object:
    return list(x.shape) if isinstance(x, Tensor) else type(x).__name__


def check_edge_index(edge_index: Tensor, num_nodes: int,
                     name: str = 'edge_index') -> None:
    r"""Raises a clear error unless :obj:`edge_index` is a :obj:`[2, m]`
    integer tensor with values in :obj:`[0, num_nodes)` (the range check
    only while :func:`validating`)."""
    if not isinstance(edge_index, Tensor):
        raise TypeError(f"'{name}' must be a torch.Tensor, got "
                        f"{type(edge_index).__name__}")
    if edge_index.dtype not in INTEGER_DTYPES:
        raise TypeError(f"'{name}' must be an integer tensor, got dtype "
                        f"{edge_index.dtype}")
    if edge_index.dim() != 2 or edge_index.size(0) != 2:
        raise ValueError(f"'{name}' must have shape [2, num_edges], got "
                         f"{list(edge_index.shape)}")
    if edge_index.numel() > 0 and validating():
        low, high = int(edge_index.min()), int(edge_index.max())
        if low < 0 or high >= num_nodes:
            raise ValueError(f"'{name}' has node indices in [{low}, {high}] "
                             f"but the graph has {num_nodes} nodes")


def check_within_graphs(edge_index: Tensor, batch: Tensor,
                        name: str = 'edge_index') -> None:
    r"""Raises a :class:`ValueError` naming :obj:`name` if an edge joins
    nodes of two different graphs of :obj:`batch` (only while
    :func:`validating`: a host synchronisation)."""
    if edge_index.numel() and validating() and bool(
            (batch[edge_index[0]] != batch[edge_index[1]]).any()):
        raise ValueError(f"'{name}' connects nodes of different graphs "
                         f"(its two ends have different ids in 'batch')")


def check_rows(x: Tensor, count: int, name: str, row: str) -> None:
    r"""Raises unless :obj:`x` is a tensor with :obj:`count` rows (one per
    :obj:`row`, e.g. ``'node'``)."""
    if not isinstance(x, Tensor) or x.dim() < 1 or x.size(0) != count:
        raise ValueError(f"'{name}' must have one row per {row} ({count}), "
                         f"got {_shape(x)}")


def autocast_enabled(device_type: str) -> bool:
    r"""Whether :func:`torch.autocast` is on for :obj:`device_type` (never
    for a device type without autocast, such as ``meta``)."""
    if not torch.compiler.is_compiling() and \
            not torch.amp.is_autocast_available(device_type):
        return False  # (a compiled graph runs on a device with autocast)
    return torch.is_autocast_enabled(device_type)


def check_parameter_dtype(x: Tensor, dtype: torch.dtype,
                          name: str = 'x') -> None:
    r"""Raises unless :obj:`x` has dtype :obj:`dtype` (a layer's parameter
    dtype) or runs under :func:`torch.autocast`."""
    if x.dtype != dtype and not autocast_enabled(x.device.type):
        raise TypeError(f"'{name}' has dtype {x.dtype} but the layer's "
                        f"parameters are {dtype}: cast one to the other "
                        f"({name}.to({dtype}) or layer.to({x.dtype})), or "
                        f"run under torch.autocast")


def check_features(x: Tensor, channels: Optional[int] = None,
                   dtype: Optional[torch.dtype] = None,
                   name: str = 'x') -> None:
    r"""Raises unless :obj:`x` is a 2-dimensional floating-point tensor
    with :obj:`channels` columns (when given) and, outside
    :func:`torch.autocast`, of dtype :obj:`dtype` (a layer's parameter
    dtype, when given); while :func:`validating`, also when it holds a NaN
    or an infinity (without the check, one propagates to every output row
    of its graph, never to other graphs), unless inside
    :func:`on_checked_features`."""
    if not isinstance(x, Tensor) or x.dim() != 2:
        raise ValueError(f"'{name}' must be a 2-dimensional tensor [rows, "
                         f"channels], got {_shape(x)}")
    if channels is not None and x.size(1) != channels:
        raise ValueError(f"'{name}' must have {channels} channels (the "
                         f"layer's input width), got {x.size(1)}")
    if not x.is_floating_point():
        raise TypeError(f"'{name}' must be a floating-point tensor, got "
                        f"dtype {x.dtype} (integer features need an "
                        f"encoder first, e.g. CategoricalEncoder)")
    if dtype is not None:
        check_parameter_dtype(x, dtype, name)
    # a sum is finite unless an entry is not (or, rarely, it overflows:
    # then the exact check decides); ten times faster than isfinite()
    if x.numel() and validating() and not _features_checked.get() and \
            not bool(torch.isfinite(x.detach().sum())):
        finite = torch.isfinite(x).all(dim=1)
        if not bool(finite.all()):
            row = int((~finite).nonzero()[0])
            raise ValueError(f"'{name}' holds NaN or infinite values (first "
                             f"in row {row}): attention would spread them to "
                             f"every row of that graph")


def on_checked_features(fn: Callable[..., T], *args, **kwargs) -> T:
    r"""Calls :obj:`fn` with :obj:`args` and :obj:`kwargs`,
    :func:`check_features` skipping its scan for NaN meanwhile (in this
    thread): for a layer or model whose input was checked and that hands
    its sublayers features computed from it. Shapes and dtypes are still
    checked."""
    if torch.compiler.is_compiling():  # no scan while tracing anyway
        return fn(*args, **kwargs)
    token = _features_checked.set(True)
    try:
        return fn(*args, **kwargs)
    finally:
        _features_checked.reset(token)


def check_batch(batch: Optional[Tensor], num_nodes: int,
                num_graphs: Optional[int] = None, name: str = 'batch',
                sorted: bool = False, device: Optional[torch.device] = None
                ) -> Tuple[Tensor, int]:
    r"""Checks a graph-id vector and returns it as :obj:`long` with the
    number of graphs (:obj:`num_graphs`, or one more than the largest id).

    :obj:`None` means one graph. Otherwise :obj:`batch` must be a 1-D
    integer tensor of :obj:`num_nodes` entries; while :func:`validating`,
    its ids must lie in :obj:`[0, num_graphs)` and, with :obj:`sorted`,
    be non-decreasing (each graph's rows contiguous, as PyG batches are).
    """
    if num_graphs is not None and (isinstance(num_graphs, bool) or
                                   not isinstance(num_graphs, int) or
                                   num_graphs < 0):
        raise ValueError(f"'num_graphs' must be a non-negative int, got "
                         f"{num_graphs!r}")
    if batch is None:
        if num_graphs == 0 and num_nodes:
            raise ValueError(f"'num_graphs' is 0 but there are {num_nodes} "
                             f"rows and no '{name}' (every row is in graph "
                             f"0)")
        return (torch.zeros(num_nodes, dtype=torch.long, device=device),
                1 if num_graphs is None else num_graphs)
    if not isinstance(batch, Tensor) or batch.dim() != 1 or \
            batch.numel() != num_nodes:
        raise ValueError(f"'{name}' must be a vector with one graph id per "
                         f"row ({num_nodes}), got {_shape(batch)}")
    if batch.dtype not in INTEGER_DTYPES:
        raise TypeError(f"'{name}' must be an integer tensor of graph ids, "
                        f"got dtype {batch.dtype}")
    batch = batch.long()
    if num_graphs is None:
        num_graphs = int(batch.max()) + 1 if num_nodes else 1
    if num_nodes and validating():
        low, high = int(batch.min()), int(batch.max())
        if low < 0 or high >= num_graphs:
            raise ValueError(f"'{name}' holds graph ids in [{low}, {high}] "
                             f"but num_graphs is {num_graphs} (ids must lie "
                             f"in [0, num_graphs))")
        if sorted and bool((batch[1:] < batch[:-1]).any()):
            raise ValueError(f"'{name}' must be sorted (each graph's rows "
                             f"contiguous), as PyG batches are")
    return batch, num_graphs


def check_device(x: Optional[Tensor], device: torch.device, name: str,
                 owner: str = "'x'") -> None:
    r"""Raises a :class:`ValueError` naming :obj:`name` unless :obj:`x`
    (when given) lives on :obj:`device`, the device of :obj:`owner` (the
    input or view the layer computes on)."""
    if isinstance(x, Tensor) and x.device != device:
        raise ValueError(f"'{name}' is on {x.device} but {owner} is on "
                         f"{device}: move both to one device")
