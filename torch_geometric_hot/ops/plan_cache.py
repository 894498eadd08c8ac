r"""Index work kept for reuse: the one cache of the library.

A *plan* is whatever a layer or an operator derives from a batch's index
tensors alone (sorted visiting orders, key groups, padded layouts, masks,
the native kernels' tables). It is kept in a :class:`PlanCache`, so that
the layers of a forward pass, and the backward pass, derive it once per
batch. A cache is found in one of two ways:

* the index bundles (:class:`~torch_geometric_hot.data.PairView`,
  :class:`~torch_geometric_hot.data.NodeView`) *are* caches: a layer asks
  its view;
* an operator, which is handed tensors and no view, asks
  :func:`plans_for` for the cache of its index tensors: one per tuple of
  tensors, kept while they are alive and unchanged (weak references and
  version counters), for the :data:`RECENT` most recent tuples, and
  dropped with the first of them that dies.

The index tensors must not change in place after the first plan (they
never do in the library; an operator's cache notices a change by the
tensors' version counters and starts afresh). Under
:func:`torch.compile` a traced layer reads the plans its view holds (a
batch planned in the loader: they enter the graph as inputs, their sizes
as constants) and builds the others afresh on every call (no side effects
while tracing); an operator runs eagerly inside the compiled graph and
keeps its cache.

A cache travels with its plans: :meth:`PlanCache.to` and
:meth:`PlanCache.pin_memory` give a copy whose tensors, its plans'
included, are moved (so that a view planned in a
:class:`~torch.utils.data.DataLoader`'s worker reaches the device whole,
with the batch).

A pass that only makes plans (:func:`plans_only`, the loader's planning
pass) skips the arithmetic where a path can tell its plans from its
products: such a path makes its plans and gives zeros.
"""
import contextlib
import contextvars
import copy
import dataclasses
import weakref
from typing import Any, Callable, Dict, Hashable, Iterator, List, \
    Optional, Sequence, Tuple, TypeVar

import torch
from torch import Tensor

T = TypeVar('T')


class PlanCache:
    r"""Plans derived from one set of index tensors, each made once per
    key: the base of the index bundles, and what :func:`plans_for` gives
    an operator.

    A cache filled ahead by :class:`~torch_geometric_hot.data.PlannedLoader`
    has the attribute :obj:`planned_for`, the device type whose layout its
    plans are (see :func:`is_planned`)."""
    def plan(self, key: Hashable, build: Callable[[], T]) -> T:
        r"""The plan :obj:`key`, made by :obj:`build` on first use.

        Args:
            key (Hashable): Everything besides the index tensors that the
                plan depends on.
            build (callable): Makes the plan.
        """
        plans: Optional[Dict[Hashable, object]] = self.__dict__.get(
            '_plans')
        if plans is not None and key in plans:
            return plans[key]  # type: ignore[return-value]
        if torch.compiler.is_compiling():  # no side effects while tracing
            return build()
        plan = build()
        self.__dict__.setdefault('_plans', {})[key] = plan
        return plan

    def apply(self, fn: Callable[[Tensor], Tensor]) -> 'PlanCache':
        r"""A copy with :obj:`fn` applied to every tensor it holds, those
        of its plans included (:func:`map_tensors`)."""
        out = copy.copy(self)
        out.__dict__ = map_tensors(self.__dict__, fn)
        return out

    def to(self, device: Any, non_blocking: bool = False) -> 'PlanCache':
        r"""A copy on :obj:`device`, plans included."""
        return self.apply(lambda t: t.to(device, non_blocking=non_blocking))

    def pin_memory(self) -> 'PlanCache':
        r"""A copy in page-locked memory, plans included (for
        :obj:`non_blocking` copies to a GPU)."""
        return self.apply(lambda t: t.pin_memory())

    def planned(self) -> List[Hashable]:
        r"""The keys of the plans made so far."""
        return list(self.__dict__.get('_plans', {}))


def map_tensors(obj: Any, fn: Callable[[Tensor], Tensor]) -> Any:
    r""":obj:`obj` with :obj:`fn` applied to every tensor in it: tensors,
    and the tensors held by tuples (named ones included), lists, dicts,
    dataclasses, :class:`PlanCache` objects and other objects' attributes;
    everything else is kept as it is."""
    if isinstance(obj, Tensor):
        return fn(obj)
    if obj is None or isinstance(obj, (bool, int, float, str, torch.dtype,
                                       torch.device)):
        return obj
    if isinstance(obj, PlanCache):
        return obj.apply(fn)
    if isinstance(obj, tuple):
        items = [map_tensors(item, fn) for item in obj]
        return type(obj)(*items) if hasattr(obj, '_fields') else tuple(items)
    if isinstance(obj, list):
        return [map_tensors(item, fn) for item in obj]
    if isinstance(obj, dict):
        return {key: map_tensors(value, fn) for key, value in obj.items()}
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        changes = {f.name: map_tensors(getattr(obj, f.name), fn)
                   for f in dataclasses.fields(obj)}
        return dataclasses.replace(obj, **changes) if any(
            value is not getattr(obj, name)
            for name, value in changes.items()) else obj
    if hasattr(obj, '__dict__') and not callable(obj):
        out = copy.copy(obj)
        out.__dict__.update(map_tensors(dict(vars(obj)), fn))
        return out
    return obj


#: Tuples of index tensors whose caches :func:`plans_for` keeps.
RECENT = 16


class _Entry:
    # the cache of one tuple of tensors, with what identifies them
    def __init__(self, key: Tuple[int, ...], index: Sequence[Tensor]) -> None:
        self.refs = [weakref.ref(t, self._drop) for t in index]
        self.versions = _versions(index)
        self.cache = PlanCache()
        self.key = key

    def _drop(self, _) -> None:
        # a tensor died: the plans derived from it go with it
        if _caches.get(self.key) is self:
            del _caches[self.key]

    def holds(self, index: Sequence[Tensor]) -> bool:
        return all(r() is t for r, t in zip(self.refs, index)) and \
            self.versions == _versions(index)


_caches: Dict[Tuple[int, ...], _Entry] = {}


def _versions(index: Sequence[Tensor]) -> List[Optional[int]]:
    # tensors made under inference mode have no version counter: they are
    # matched by identity alone
    return [None if t.is_inference() else t._version for t in index]


def plans_for(index: Sequence[Tensor]) -> PlanCache:
    r"""The plan cache of an operator's index tensors :obj:`index`: the
    same cache while these very tensors are alive and unchanged, a new one
    otherwise. The cache is dropped when one of the tensors dies."""
    key = tuple(id(t) for t in index)
    entry = _caches.pop(key, None)
    if entry is None or not entry.holds(index):
        entry = _Entry(key, index)
    _caches[key] = entry  # the most recent last
    while len(_caches) > RECENT:
        del _caches[next(iter(_caches))]
    return entry.cache


def is_planned(view) -> bool:
    r"""Whether :obj:`view` holds the plans of a launch-bound layout made
    ahead (:class:`~torch_geometric_hot.data.PlannedLoader` for a device
    other than the CPU sets :attr:`PlanCache.planned_for`), which a graph
    traced by :func:`torch.compile` reads instead of building them. Plans
    an eager pass left on a view do not count: they may be the CPU's, which
    a traced graph cannot use."""
    return isinstance(view, PlanCache) and \
        view.__dict__.get('planned_for') not in (None, 'cpu')


def view_plan(view, key: Hashable, build: Callable[[], T],
              keep: bool = True) -> T:
    r"""The plan :obj:`key` of :obj:`view` (:meth:`PlanCache.plan`) when
    the view keeps plans and :obj:`keep` holds (false for a plan of
    hyperedge rows, which come with the call, not the view); otherwise
    :obj:`build()`, made afresh."""
    if not keep or not hasattr(view, 'plan'):
        return build()
    return view.plan(key, build)


_plans_only = contextvars.ContextVar('plans_only', default=False)


@contextlib.contextmanager
def plans_only() -> Iterator[None]:
    r"""A pass that makes plans only, in this thread for the duration:
    the paths that can skip their arithmetic
    (:func:`making_plans_only`) make their plans and give zeros, so that
    a planning pass (:class:`~torch_geometric_hot.data.ModelPlanner`)
    costs the index work alone. Its outputs are not the model's."""
    token = _plans_only.set(True)
    try:
        yield
    finally:
        _plans_only.reset(token)


def making_plans_only() -> bool:
    r"""Whether this is a pass of :func:`plans_only` (never in a graph
    traced by :func:`torch.compile`)."""
    return not torch.compiler.is_compiling() and _plans_only.get()
