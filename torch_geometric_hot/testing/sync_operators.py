r"""Records the operators that force a host synchronisation: a
device-to-host read, or an output whose size depends on the values of
its input. On a GPU each one stalls the host until the device has caught
up with it; a training step that runs none of them can queue its kernels
ahead of the device (and be captured as a CUDA graph). The recording
works on any device, the CPU included, as a proxy for a GPU's."""
from collections import Counter
from typing import Any, Callable, Dict, List

import torch
from torch import Tensor
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from torch_geometric_hot.testing.operator_counts import python_implementation

#: Operators that read device values on the host or size their output by
#: them (every overload).
SYNC_OPERATORS = frozenset({
    'aten::_local_scalar_dense', 'aten::item', 'aten::is_nonzero',
    'aten::nonzero', 'aten::argwhere', 'aten::masked_select',
    'aten::unique', 'aten::_unique', 'aten::_unique2', 'aten::unique_dim',
    'aten::unique_consecutive', 'aten::unique_dim_consecutive',
    'aten::bincount', 'aten::histc', 'aten::equal', 'aten::allclose',
    'aten::_assert_async', 'aten::_assert_scalar',
    'aten::_nested_tensor_from_mask', 'aten::segment_reduce',
})


def _is_sync(func, args, kwargs) -> bool:
    name = func._schema.name
    if name in SYNC_OPERATORS:
        return True
    if name == 'aten::repeat_interleave':  # its size unless it is given
        return func._overloadname.startswith('Tensor') and \
            kwargs.get('output_size') is None and not (
                len(args) > 2 and isinstance(args[-1], int))
    if name == 'aten::where' and len(args) == 1:  # where(cond): nonzero
        return True
    if name == 'aten::lift_fresh' and args[0].dim():
        # host data made into a tensor (a list turned into an index, say)
        # while the layouts are another device's (cuda_layout): there it
        # is copied from the host's pageable memory
        from torch_geometric_hot.ops.layout_device import layout_device
        return layout_device(args[0]) != 'cpu'
    if name in ('aten::index', 'aten::index_put', 'aten::index_put_',
                'aten::_index_put_impl_'):  # boolean masks: nonzero
        indices = args[1] if len(args) > 1 else kwargs.get('indices', [])
        if any(t is not None and t.dtype in (torch.bool, torch.uint8)
               for t in indices):
            return True
    tensors = [t for t in tree_flatten((args, kwargs))[0]
               if isinstance(t, Tensor)]
    devices = {t.device.type for t in tensors}
    if name in ('aten::_to_copy', 'aten::copy_', 'aten::to'):
        target = kwargs.get('device')
        if target is not None:
            devices.add(torch.device(target).type)
        return 'cpu' in devices and len(devices) > 1  # device <-> host
    # a host tensor among a device's (an index, say) is copied to the
    # device first; a 0-dimensional one is read on the host as a scalar
    return len(devices) > 1 and any(t.device.type == 'cpu' and t.dim()
                                    for t in tensors)


class SyncRecorder(TorchDispatchMode):
    r"""Records, while active, every operator that forces a host
    synchronisation (:data:`SYNC_OPERATORS`, :obj:`repeat_interleave`
    without :obj:`output_size`, single-argument :obj:`where`, indexing with
    a boolean mask, copies between a device and the host, host tensors
    other than 0-dimensional ones among a device's, and tensors of host
    data made while the layouts are chosen for another device, see
    :func:`~torch_geometric_hot.testing.cuda_layout`), those inside custom
    operators included, every
    :meth:`torch.Tensor.tolist` and :meth:`torch.Tensor.numpy` (which read
    values without dispatching an operator), and every
    :func:`torch.tensor` and :func:`torch.as_tensor` of host data on
    another device (a copy from the host's pageable memory, which waits
    for the device, that the dispatcher does not show).

    Attributes:
        counts (collections.Counter): Recorded operator names and their
            calls.

    Example::

        with SyncRecorder() as recorder:
            loss = model(batch).sum()
            loss.backward()
        assert not recorder.counts, recorder.counts
    """
    def __init__(self) -> None:
        super().__init__()
        self.counts: Counter = Counter()
        self._saved: List[Any] = []
        self._depth = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        implementation = python_implementation(func)
        if implementation is not None:  # the operators inside it
            with self:
                return implementation(*args, **kwargs)
        if _is_sync(func, args, kwargs):
            self.counts[str(func)] += 1
        return func(*args, **kwargs)

    def _wrap(self, name: str) -> Callable:
        original = getattr(Tensor, name)

        def read(tensor: Tensor, *args, **kwargs):
            self.counts[f'Tensor.{name}'] += 1
            return original(tensor, *args, **kwargs)

        self._saved.append((Tensor, name, original))
        return read

    def _wrap_factory(self, name: str) -> Callable:
        original = getattr(torch, name)

        def create(data, *args, **kwargs):
            device = kwargs.get('device')
            source = data.device.type if isinstance(data, Tensor) else 'cpu'
            if device is not None and source == 'cpu' and \
                    torch.device(device).type != 'cpu':
                self.counts[f'torch.{name}'] += 1
            return original(data, *args, **kwargs)

        self._saved.append((torch, name, original))
        return create

    def __enter__(self) -> 'SyncRecorder':
        # entered again around a custom operator's implementation: the
        # functions stay wrapped until the outermost exit
        self._depth += 1
        if self._depth == 1:
            for name in ('tolist', 'numpy'):
                setattr(Tensor, name, self._wrap(name))
            for name in ('tensor', 'as_tensor'):
                setattr(torch, name, self._wrap_factory(name))
        return super().__enter__()

    def __exit__(self, *exc) -> None:
        try:
            super().__exit__(*exc)
        finally:
            self._depth -= 1
            if self._depth == 0:
                for owner, name, original in reversed(self._saved):
                    setattr(owner, name, original)
                self._saved.clear()

    def summary(self) -> Dict[str, int]:
        r"""The recorded operators, most frequent first."""
        return dict(self.counts.most_common())
