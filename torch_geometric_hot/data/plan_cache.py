r"""Index work that the layers of a forward pass share through their view."""
from typing import Callable, Dict, Hashable, TypeVar

import torch

T = TypeVar('T')


class PlanCache:
    r"""Base of the index bundles (:class:`~torch_geometric_hot.data.PairView`,
    :class:`~torch_geometric_hot.data.NodeView`): what a layer derives from
    the bundle's indices alone (sorted visiting orders, key groups, checks)
    is kept with it, so that the layers of a model that share the bundle
    derive it once per batch.

    The bundle's index tensors must not change in place after the first
    plan (they never do in the library). Under :func:`torch.compile` plans
    are built afresh on every call (no side effects while tracing).
    """
    def plan(self, key: Hashable, build: Callable[[], T]) -> T:
        r"""The plan :obj:`key`, made by :obj:`build` on first use.

        Args:
            key (Hashable): Everything besides the bundle that the plan
                depends on.
            build (callable): Makes the plan.
        """
        if torch.compiler.is_compiling():
            return build()
        plans: Dict[Hashable, object] = self.__dict__.setdefault(
            '_plans', {})
        if key not in plans:
            plans[key] = build()
        return plans[key]  # type: ignore[return-value]
