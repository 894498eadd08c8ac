r"""Batches that arrive with their index work done: PyG's
:class:`~torch_geometric.loader.DataLoader` whose workers also build each
batch's pair view and the plans the layers derive from it.

A layer's index work on a batch (the pair view's positions and groups,
packed layouts, masks, key rows, enumerated pairs, the bucket shapes read
on the host) depends on the batch's indices alone. Done inside the
training step it runs many small operations and reads sizes back to the
host; done in the loader's worker processes it overlaps the previous
step, and the step is left with the arithmetic. The plans a model needs
are the ones its forward pass makes: :class:`ModelPlanner` runs a copy of
the model once per batch in the worker (no gradients, on the CPU, with the
layout of the training device, :func:`~torch_geometric_hot.ops.\
layout_device.planned_for`), which leaves them on the view. The view
travels with the batch as its attribute :obj:`pair_view`: pinned with the
batch (``pin_memory=True``) and moved with it
(``batch.to(device, non_blocking=True)``), plans included
(:meth:`~torch_geometric_hot.data.PlanCache.to`).
"""
import copy
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, \
    Union

import torch
from torch_geometric.data import Batch
from torch_geometric.loader import DataLoader

from torch_geometric_hot.data.collate import GraphCollater
from torch_geometric_hot.data.pair_view import PairView
from torch_geometric_hot.ops.layout_device import planned_for
from torch_geometric_hot.ops.plan_cache import PlanCache, map_tensors, \
    plans_only


class ModelPlanner:
    r"""Makes a model's plans for a batch: a CPU copy of :obj:`model`
    (taken now; plans depend on the indices, not on the weights) runs
    :obj:`call(model, batch)` once without gradients, in evaluation mode,
    making plans only where a path can skip its arithmetic
    (:func:`~torch_geometric_hot.ops.plan_cache.plans_only`).

    Args:
        model (torch.nn.Module): The model.
        call (callable, optional): How the model is called on a batch
            (default: :obj:`model(batch)`).
    """
    def __init__(self, model: torch.nn.Module,
                 call: Optional[Callable[[torch.nn.Module, Batch],
                                         Any]] = None) -> None:
        self.model = copy.deepcopy(model).cpu().eval()
        self.call = call

    def __call__(self, batch: Batch) -> None:
        with torch.no_grad(), plans_only():
            if self.call is None:
                self.model(batch)
            else:
                self.call(self.model, batch)


class PlannedCollate:
    r"""The collate function of :class:`PlannedLoader`: :obj:`pad` of
    the list of graphs (:class:`~torch_geometric_hot.data.PadToBuckets`;
    the batch's :obj:`num_real_graphs` then counts the graphs before the
    padding ones), PyG's collation, :obj:`transform` of the batch, then
    the pair view
    (where the batch has one, or :obj:`pairs` asks for it) as
    :obj:`batch.pair_view` and an empty plan cache as :obj:`batch.plans`
    (for models without a view, e.g. TokenGT's ``plans=``), then
    :obj:`planner`, all with the layout of :obj:`device`."""
    def __init__(self, collate: Callable[[List[Any]], Batch],
                 planner: Optional[Callable[[Batch], None]] = None,
                 device: Union[str, torch.device, None] = None,
                 transform: Optional[Callable[[Batch], Batch]] = None,
                 pairs: Optional[bool] = None,
                 pad: Optional[Callable[[Sequence[Any]], List[Any]]] = None
                 ) -> None:
        self.collate, self.planner, self.transform = collate, planner, \
            transform
        self.device = None if device is None else torch.device(device)
        self.pairs, self.pad = pairs, pad

    def __call__(self, data_list: Sequence[Any]) -> Batch:
        if self.pad is not None:
            real = len(data_list)
            batch = self.collate(self.pad(data_list))
            batch.num_real_graphs = real
        else:
            batch = self.collate(data_list)
        if self.transform is not None:
            batch = self.transform(batch)
        with planned_for(self.device):
            pairs = self.pairs if self.pairs is not None else \
                'pair_index' in batch
            if pairs:
                batch.pair_view = PairView.from_data(batch)
            batch.plans = PlanCache()
            if self.planner is not None:
                self.planner(batch)
                kind = 'cpu' if self.device is None else self.device.type
                for cache in (batch.plans, getattr(batch, 'pair_view',
                                                   None)):
                    if cache is not None:  # read by a compiled graph
                        cache.planned_for = kind
        if torch.utils.data.get_worker_info() is not None:
            batch = one_storage(batch, shared=True)
        return batch


#: The elements [lo, hi) of its storage that a tensor reads, and the tensor.
_Span = Tuple[int, int, torch.Tensor]
#: Where each dtype's part of the one buffer starts (bytes).
ALIGNMENT = 64


def one_storage(batch: Batch, shared: bool = False) -> Batch:
    r"""The batch with every tensor it holds (those of its pair view and
    plans, and its slices and increments, included) copied into one
    buffer, each a view of it: a worker process hands a batch over in
    shared memory storage by storage, at a cost per storage (a file
    descriptor passed between the processes), and a planned batch holds
    dozens of small tensors of several dtypes. The tensors of each dtype
    lie in one aligned part of the buffer; tensors that read the same
    memory (views of one tensor, such as a view's rows and columns of its
    :obj:`pair_index`) stay views of one copy of it.

    Args:
        batch (Batch): The batch (changed in place and returned).
        shared (bool, optional): Allocate the buffer in shared memory, as a
            worker hands it over (then not copied again on the way).
            (default: :obj:`False`)
    """
    found: Dict[int, torch.Tensor] = {}

    def collect(t: torch.Tensor) -> torch.Tensor:
        if t.layout == torch.strided and not t.requires_grad:
            found.setdefault(id(t), t)
        return t

    stores = [(store, key, value) for store in batch.stores
              for key, value in store.items()
              if isinstance(value, (torch.Tensor, PlanCache))]
    # PyG's slices and increments of the batch (Batch.get_example)
    extras = {name: getattr(batch, name, None)
              for name in ('_slice_dict', '_inc_dict')}
    extras = {name: value for name, value in extras.items()
              if isinstance(value, dict)}
    for _, _, value in stores:
        map_tensors(value, collect)
    for value in extras.values():
        map_tensors(value, collect)
    # per dtype and storage, the elements [lo, hi) every tensor reads
    spans: Dict[torch.dtype, Dict[int, List[_Span]]] = {}
    for t in found.values():
        lo = t.storage_offset()
        hi = lo + 1 + sum((size - 1) * stride
                          for size, stride in zip(t.shape, t.stride())) \
            if t.numel() else lo
        spans.setdefault(t.dtype, {}).setdefault(
            t.untyped_storage().data_ptr(), []).append((lo, hi, t))
    parts = []  # dtype, start (bytes), numel, sources, placed tensors
    nbytes = 0
    for dtype, by_storage in spans.items():
        # each run of overlapping spans of a storage is copied once
        sources: List[torch.Tensor] = []
        placed: List[Tuple[torch.Tensor, int]] = []  # tensor, its offset
        total = 0
        for members in by_storage.values():
            members.sort(key=lambda m: m[0])
            runs: List[List] = []  # lo, hi, its tensors with their lo
            for lo, hi, t in members:
                if runs and lo < runs[-1][1]:
                    runs[-1][1] = max(runs[-1][1], hi)
                    runs[-1][2].append((lo, t))
                else:
                    runs.append([lo, hi, [(lo, t)]])
            for lo, hi, run in runs:
                if hi > lo:
                    sources.append(run[0][1].as_strided((hi - lo, ), (1, ),
                                                        lo))
                placed += [(t, total + t_lo - lo) for t_lo, t in run]
                total += hi - lo
        start = -(-nbytes // ALIGNMENT) * ALIGNMENT
        parts.append((dtype, start, total, sources, placed))
        nbytes = start + total * dtype.itemsize
    buffer = _buffer(nbytes, shared)
    moved: Dict[int, torch.Tensor] = {}
    for dtype, start, total, sources, placed in parts:
        part = buffer.narrow(0, start, total * dtype.itemsize).view(dtype)
        if sources:
            torch.cat(sources, out=part)
        base = part.storage_offset()
        for t, offset in placed:
            moved[id(t)] = part.as_strided(t.shape, t.stride(),
                                           base + offset)

    def move(t: torch.Tensor) -> torch.Tensor:
        return moved.get(id(t), t)

    for store, key, value in stores:
        store[key] = map_tensors(value, move)
    for name, value in extras.items():
        setattr(batch, name, map_tensors(value, move))
    return batch


def _buffer(nbytes: int, shared: bool) -> torch.Tensor:
    r"""An uninitialised flat byte tensor, in shared memory if
    :obj:`shared`."""
    if not shared or nbytes == 0:
        return torch.empty(nbytes, dtype=torch.uint8)
    storage = torch.UntypedStorage._new_shared(nbytes)
    return torch.empty(0, dtype=torch.uint8).set_(storage, 0, (nbytes, ),
                                                  (1, ))


class PlannedLoader(DataLoader):
    r"""PyG's :class:`~torch_geometric.loader.DataLoader` whose batches
    carry their pair view, with the plans of :obj:`planner` made, built in
    the worker processes (:class:`PlannedCollate`).

    Args:
        dataset: The dataset.
        batch_size (int, optional): Graphs per batch. (default: :obj:`1`)
        shuffle (bool, optional): Reshuffle every epoch.
        planner (callable, optional): Makes the plans of a batch (with its
            view as :obj:`batch.pair_view`), e.g. :class:`ModelPlanner`.
        device (str or torch.device, optional): The device the batches
            are for: their layout is chosen for it (default: each
            tensor's own, the CPU).
        transform (callable, optional): Applied to every collated batch
            before its view is built.
        pairs (bool, optional): Build the pair view (default: where the
            batch has :obj:`pair_index`).
        pad (callable, optional): Pads every list of graphs before it is
            collated (:class:`~torch_geometric_hot.data.PadToBuckets`, for
            a compiled model).
        **kwargs: Further arguments of the
            :class:`~torch_geometric.loader.DataLoader` (``num_workers``,
            ``pin_memory``, ``follow_batch``, ...).
    """
    def __init__(self, dataset, batch_size: int = 1, shuffle: bool = False,
                 planner: Optional[Callable[[Batch], None]] = None,
                 device: Union[str, torch.device, None] = None,
                 transform: Optional[Callable[[Batch], Batch]] = None,
                 pairs: Optional[bool] = None,
                 pad: Optional[Callable[[Sequence[Any]], List[Any]]] = None,
                 **kwargs) -> None:
        super().__init__(dataset, batch_size, shuffle, **kwargs)
        self.collate_fn = PlannedCollate(GraphCollater(self.collate_fn),
                                         planner, device, transform, pairs,
                                         pad)
