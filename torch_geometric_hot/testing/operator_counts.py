r"""Counts the operators a piece of code dispatches: on a GPU each is (at
least) one kernel launch, so their number is what a step of many small
operations costs there, counted on any device."""
from collections import Counter
from typing import Dict

from torch.utils._python_dispatch import TorchDispatchMode


class OperatorCounter(TorchDispatchMode):
    r"""Counts, while active, every aten operator dispatched (views and
    metadata operators included: the count is deterministic for a given
    code path and input).

    Attributes:
        counts (collections.Counter): Operator names (overload packets)
            and their calls.
    """
    def __init__(self) -> None:
        super().__init__()
        self.counts: Counter = Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.counts[str(func.overloadpacket)] += 1
        return func(*args, **(kwargs or {}))

    @property
    def total(self) -> int:
        r"""All operators counted."""
        return sum(self.counts.values())

    def summary(self, top: int = 10) -> Dict[str, int]:
        r"""The :obj:`top` most frequent operators."""
        return dict(self.counts.most_common(top))
