r"""Counts the operators a piece of code dispatches: on a GPU each is (at
least) one kernel launch, so their number is what a step of many small
operations costs there, counted on any device."""
from collections import Counter
from typing import Callable, Dict, Optional

from torch.utils._python_dispatch import TorchDispatchMode


def python_implementation(func) -> Optional[Callable]:
    r"""The Python function behind :obj:`func` when it is a custom operator
    of :func:`torch.library.custom_op` (:obj:`None` otherwise): what it
    runs, for a recorder to see the operators inside, which a dispatch mode
    does not see when it calls the operator."""
    if func.namespace in ('aten', 'prims'):
        return None
    try:
        from torch._library.custom_ops import _maybe_get_opdef
    except ImportError:  # pragma: no cover (an older torch)
        return None
    opdef = _maybe_get_opdef(func._name)
    return None if opdef is None else opdef._init_fn


#: Operators that are not views by their schema and launch no kernel
#: either: allocations, and views of a fresh result.
NO_KERNEL = frozenset({'aten._unsafe_view', 'aten.empty', 'aten.empty_like',
                       'aten.empty_strided', 'aten.new_empty',
                       'aten.new_empty_strided', 'aten.lift_fresh'})


def launches_kernel(func) -> bool:
    r"""Whether the operator :obj:`func` runs a kernel on a GPU: neither a
    view (by its schema) nor one of :data:`NO_KERNEL`."""
    return not func.is_view and str(func.overloadpacket) not in NO_KERNEL


class OperatorCounter(TorchDispatchMode):
    r"""Counts, while active, every aten operator dispatched (views and
    metadata operators included: the count is deterministic for a given
    code path and input), and apart those that launch a kernel on a GPU
    (``launches_kernel``). A custom operator counts as the operators
    its implementation dispatches (:func:`python_implementation`): on a
    GPU, its launches.

    Attributes:
        counts (collections.Counter): Operator names (overload packets)
            and their calls.
        launches (int): The calls of operators that launch a kernel.
    """
    def __init__(self) -> None:
        super().__init__()
        self.counts: Counter = Counter()
        self.launches = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        implementation = python_implementation(func)
        if implementation is not None:
            with self:
                return implementation(*args, **kwargs)
        self.counts[str(func.overloadpacket)] += 1
        self.launches += launches_kernel(func)
        return func(*args, **kwargs)

    @property
    def total(self) -> int:
        r"""All operators counted."""
        return sum(self.counts.values())

    def summary(self, top: int = 10) -> Dict[str, int]:
        r"""The :obj:`top` most frequent operators."""
        return dict(self.counts.most_common(top))
