r"""The training command's ``--compile``: the model under
:func:`torch.compile` (``dynamic=False``; on CUDA ``mode='reduce-overhead'``,
which replays CUDA graphs), fed batches of a few shapes.

A compiled graph is specialised on its input's shapes and on the block
sizes of its planned layouts, so the loader pads every batch to size
buckets (:class:`~torch_geometric_hot.data.PadToBuckets`) and plans it for
the layout the graph runs (:func:`~torch_geometric_hot.ops.layout_device.\
traced_layout`); a graph is compiled once per bucket (and per training and
evaluation mode). The padding graphs are cut from the outputs before the
loss, the metrics and the evaluator
(:func:`~torch_geometric_hot.data.real_graphs`).
"""
import contextlib
from typing import Any, Callable, Dict, Optional

import torch

from torch_geometric_hot.data import PadToBuckets
from torch_geometric_hot.ops.layout_device import planned_for, traced_layout

#: Graphs :func:`torch.compile` may compile per function before it falls
#: back to eager mode (each bucket and mode is one).
RECOMPILE_LIMIT = 256


def compiled_graphs() -> int:
    r"""Graphs compiled in this process so far (:mod:`torch._dynamo`'s
    count of unique graphs)."""
    from torch._dynamo.utils import counters
    return int(counters['stats']['unique_graphs'])


def raise_recompile_limit(limit: int = RECOMPILE_LIMIT) -> None:
    r"""Lets :func:`torch.compile` compile :obj:`limit` graphs per
    function (one per size bucket and mode) before it falls back to eager
    mode."""
    import torch._dynamo.config as config
    for name in ('recompile_limit', 'cache_size_limit'):
        if hasattr(config, name) and getattr(config, name) < limit:
            setattr(config, name, limit)


class Compiled:
    r"""A network under :func:`torch.compile` with the loader options its
    batches need.

    Args:
        net (torch.nn.Module): The network (DDP-wrapped or not).
        device (torch.device): The training device.
        pre_transform (callable, optional): The dataset's, for the padding
            graphs.
        ratio (float, optional): Growth of the size buckets.
            (default: :obj:`1.25`)
        backend (str, optional): :func:`torch.compile`'s backend.
            (default: :obj:`'inductor'`)
    """
    def __init__(self, net: torch.nn.Module, device: torch.device,
                 pre_transform: Optional[Callable] = None,
                 ratio: float = 1.25, backend: str = 'inductor') -> None:
        raise_recompile_limit()
        self.device = torch.device(device)
        self.layout = traced_layout(self.device)
        self.pad = PadToBuckets(pre_transform, ratio)
        mode = 'reduce-overhead' if self.device.type == 'cuda' and \
            backend == 'inductor' else None
        self.net = torch.compile(net, dynamic=False, mode=mode,
                                 backend=backend)
        self._start = compiled_graphs()

    def loader_options(self) -> Dict[str, Any]:
        r"""Options of :class:`~torch_geometric_hot.data.PlannedLoader`:
        the padding and the layout to plan for."""
        return dict(pad=self.pad, device=self.layout)

    def __call__(self, spec, batch) -> torch.Tensor:
        from torch_geometric_hot.train.zoo import predict
        context = planned_for(self.layout) if \
            self.layout.type != self.device.type else \
            contextlib.nullcontext()
        with context:
            return predict(self.net, spec, batch)

    @property
    def graphs(self) -> int:
        r"""Graphs compiled since this network was wrapped."""
        return compiled_graphs() - self._start

    def __repr__(self) -> str:
        return f'{self.__class__.__name__}(layout={self.layout.type})'
