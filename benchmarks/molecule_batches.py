r"""Training and inference speed on batches of many small molecules, every
model side by side in one process.

The molecules are :class:`~torch_geometric_hot.datasets.NCITPSA` (RDKit's
NCI molecules featurised by :func:`ogb.utils.smiles2graph`, exactly OGB's
featurisation; the first batches of 128 hold about 15.5 atoms and 32
directed bonds per molecule, printed with the results), read offline.
The transforms the models read (``AddSecondOrderView`` for the pair view,
``AddLaplacianNodeId`` for TokenGT's node identifiers) are applied once as
``pre_transform``, as a user would, so their cost is not in the timings.

Models, all of width ``--width``, depth ``--layers`` and ``--heads`` heads
where they have heads, with OGB's categorical atom and bond features
embedded (``AtomEncoder`` / ``BondEncoder`` for PyG's models,
``CategoricalEncoder`` for ours), a sum or graph-token readout and a linear
head onto the one target:

* ``gin``: PyG ``GINEConv`` layers (2-layer MLP each), sum pooling;
* ``gps_multihead`` / ``gps_performer``: PyG ``GPSConv`` around
  ``GINEConv`` with ``attn_type='multihead'`` / ``'performer'``;
* ``invariant_mlp``: :class:`~torch_geometric_hot.models.InvariantMLP`;
* ``hot_kernel`` / ``hot_softmax``:
  :class:`~torch_geometric_hot.models.HOTGraphModel` with
  ``attention='kernel'`` / ``'softmax'`` (``hot_kernel_mean`` /
  ``hot_softmax_mean``, run only when named: with plain averages,
  ``size_scaler='none'``);
* ``tokengt_softmax`` / ``tokengt_performer``:
  :class:`~torch_geometric_hot.models.TokenGT` with Laplacian node
  identifiers and ``attention='softmax'`` / ``'performer'``.

One training step is forward, L1 loss, backward and one Adam step on one
batch; one inference step is a forward pass under
:func:`torch.inference_mode` in evaluation mode. Each round times every
model in turn (round-robin, the order rotating from round to round) on the
same ``--batches`` batches, so a drift of the machine's speed hits all
models alike; a model's time per batch is the median over the rounds of
each round's mean. Ratios are to ``gin`` and to ``gps_multihead``.

Peak memory of one training step: on CPU the peak resident-set increase of
a fresh process that loads the batch and the model and runs one step (one
process per model, so one model's freed memory does not hide another's
needs); on CUDA :func:`torch.cuda.max_memory_allocated` above what was
allocated before the step.

With ``--busy N``, after the rounds, :mod:`torch.profiler` records
:obj:`N` more training steps of each model on its first batch: the
device's kernel time over the steps' wall time (``busy``; on the CPU the
aten operators' self time, only to exercise the code), and the kernels
that took the most of it (``top_kernels``: name, calls and milliseconds
per step). A step bound by launches and host work leaves the device idle
between kernels: a low fraction. Under ``--compile`` the profiled steps
replay the graphs the rounds compiled.

With ``--host N``, after that, :obj:`N` training steps of each model,
each from an idle device: the median time until the host has queued the
step (``host_ms``) and until the device has run it (``done_ms``). Where
the two are close the host sets the step's pace; then a profiled pass
splits the host's time between the aten operators (launches included)
and everything outside them, with the events that took the most
(``top_host``).

Usage::

    python benchmarks/molecule_batches.py --threads 1 \
        --out benchmarks/results/molecule_batches.json
    python benchmarks/molecule_batches.py --device cuda --busy 10 \
        --host 10 --out gpu.json
    python benchmarks/molecule_batches.py --quick
    python benchmarks/molecule_batches.py --dropout 0.1 --models \
        gin,gps_multihead,hot_softmax,tokengt_softmax  # training with dropout
"""
import argparse
import contextlib
import json
import operator
import os
import statistics
import subprocess
import sys
import time
from typing import Callable, Dict, List, Optional, Sequence, Union

import torch
from torch import Tensor
from torch.autograd import DeviceType

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import _current_rss_kb, _reset_peak_rss, \
    software_versions, write_json  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NODE_ID_DIM = 16
MODELS = ('gin', 'gps_multihead', 'gps_performer', 'invariant_mlp',
          'hot_kernel', 'hot_softmax', 'tokengt_softmax',
          'tokengt_performer')
LABELS = {
    'gin': 'PyG GIN (GINEConv)',
    'gps_multihead': 'PyG GPSConv, multihead',
    'gps_performer': 'PyG GPSConv, performer',
    'invariant_mlp': 'InvariantMLP',
    'hot_kernel': 'HOTGraphModel, kernel',
    'hot_softmax': 'HOTGraphModel, softmax',
    'tokengt_softmax': 'TokenGT, Laplacian ids, softmax',
    'tokengt_performer': 'TokenGT, Laplacian ids, Performer',
    'hot_kernel_mean': 'HOTGraphModel, kernel, plain averages',
    'hot_softmax_mean': 'HOTGraphModel, softmax, plain averages',
}
#: Models run only when named in ``--models``: HOT with plain averages
#: (``size_scaler='none'``) beside the default's log scaling.
OPTIONAL_MODELS = ('hot_kernel_mean', 'hot_softmax_mean')
PRE_TRANSFORMS = 'AddSecondOrderView(), AddLaplacianNodeId(k=16)'


# ------------------------------------------------------------------ data --
#: OGB's categorical feature sizes (``ogb.utils.features``), for the
#: synthetic molecules and for the encoders where ``ogb`` is missing.
ATOM_FEATURE_DIMS = [119, 5, 12, 12, 10, 6, 6, 2, 2]
BOND_FEATURE_DIMS = [5, 6, 2]


def _pre_transform():
    from torch_geometric.transforms import Compose

    from torch_geometric_hot.transforms import (AddLaplacianNodeId,
                                                AddSecondOrderView)
    return Compose([AddSecondOrderView(), AddLaplacianNodeId(NODE_ID_DIM)])


def load_graphs(root: str, count: int, synthetic: bool = False) -> List:
    r"""The first :obj:`count` molecules of NCITPSA (or
    :func:`synthetic_molecules` with :obj:`synthetic`), with the pair
    view and the Laplacian node identifiers attached once by
    ``pre_transform``."""
    if synthetic:
        pre = _pre_transform()
        return [pre(data) for data in synthetic_molecules(count)]
    from torch_geometric_hot.datasets import NCITPSA
    return list(NCITPSA(root, pre_transform=_pre_transform(), limit=count))


def synthetic_molecules(count: int, seed: int = 0) -> List:
    r""":obj:`count` molecule-like graphs, for machines without RDKit and
    OGB: a random tree of 4 to 40 atoms (about 15.5 on average, as
    NCITPSA's) with every fifth atom or so closing a ring, both bond
    directions stored, OGB-shaped categorical atom and bond features and a
    random target."""
    from torch_geometric.data import Data
    generator = torch.Generator().manual_seed(seed)
    graphs = []
    for _ in range(count):
        n = int(torch.randint(4, 28, (1, ), generator=generator))
        if float(torch.rand(1, generator=generator)) < 0.1:
            n += int(torch.randint(0, 13, (1, ), generator=generator))
        parent = [int(torch.randint(max(i - 3, 0), i, (1, ),
                                    generator=generator))
                  for i in range(1, n)]
        edges = list(zip(range(1, n), parent))
        for i in range(5, n, 5):  # ring closures
            j = i - int(torch.randint(3, 6, (1, ), generator=generator))
            if j >= 0 and (i, j) not in edges and (j, i) not in edges:
                edges.append((i, j))
        src, dst = torch.tensor(edges).t()
        edge_index = torch.stack([torch.cat([src, dst]),
                                  torch.cat([dst, src])])
        x = torch.stack([torch.randint(d, (n, ), generator=generator)
                         for d in ATOM_FEATURE_DIMS], 1)
        bond = torch.stack([torch.randint(d, (len(edges), ),
                                          generator=generator)
                            for d in BOND_FEATURE_DIMS], 1)
        graphs.append(Data(x=x, edge_index=edge_index,
                           edge_attr=torch.cat([bond, bond]),
                           y=100 * torch.rand(1, 1, generator=generator)))
    return graphs


def load_batches(root: str, batch_size: int, num_batches: int,
                 synthetic: bool = False, planner=None,
                 device: Optional[str] = None, transform=None) -> List:
    r"""The first :obj:`num_batches` batches of :obj:`batch_size`
    molecules (:func:`load_graphs`), in dataset order, each with its pair
    view and plans built by
    :class:`~torch_geometric_hot.data.PlannedLoader` (:obj:`planner`, for
    the layout of :obj:`device`; :obj:`transform` on each collated
    batch)."""
    from torch_geometric_hot.data import PlannedLoader
    loader = PlannedLoader(load_graphs(root, batch_size * num_batches,
                                       synthetic),
                           batch_size=batch_size, shuffle=False,
                           planner=planner, device=device,
                           transform=transform)
    return [batch for batch, _ in zip(loader, range(num_batches))]


# ---------------------------------------------------------------- models --
class _Encoders(torch.nn.Module):
    # OGB's AtomEncoder / BondEncoder, or where ogb is missing the same
    # sum of per-feature embeddings (CategoricalEncoder)
    def __init__(self, width: int):
        super().__init__()
        try:
            from ogb.graphproppred.mol_encoder import AtomEncoder, \
                BondEncoder
            self.atom, self.bond = AtomEncoder(width), BondEncoder(width)
        except ImportError:
            self.atom, self.bond = _categorical(width)


def _gine(width: int):
    from torch_geometric.nn import GINEConv
    return GINEConv(torch.nn.Sequential(torch.nn.Linear(width, width),
                                        torch.nn.ReLU(),
                                        torch.nn.Linear(width, width)))


class PyGModel(torch.nn.Module):
    r"""GINEConv layers, bare (``attn_type=None``) or inside ``GPSConv``,
    with OGB's encoders, sum pooling and a linear head."""
    def __init__(self, width: int, layers: int, heads: int,
                 attn_type: Optional[str], dropout: float = 0.0):
        super().__init__()
        from torch_geometric.nn import GPSConv
        self.encoders = _Encoders(width)
        if attn_type is None:
            self.convs = torch.nn.ModuleList(
                [_gine(width) for _ in range(layers)])
        else:
            self.convs = torch.nn.ModuleList([
                GPSConv(width, _gine(width), heads=heads,
                        attn_type=attn_type, dropout=dropout,
                        attn_kwargs=dict(dropout=dropout))
                for _ in range(layers)
            ])
        self.gps = attn_type is not None
        self.head = torch.nn.Linear(width, 1)

    def forward(self, batch) -> Tensor:
        from torch_geometric.nn import global_add_pool
        x = self.encoders.atom(batch.x)
        edge_attr = self.encoders.bond(batch.edge_attr)
        for conv in self.convs:
            if self.gps:
                x = conv(x, batch.edge_index, batch.batch,
                         edge_attr=edge_attr)
            else:
                x = conv(x, batch.edge_index, edge_attr).relu()
        return self.head(global_add_pool(x, batch.batch, batch.num_graphs))


def _categorical(width: int):
    from torch_geometric_hot.nn import CategoricalEncoder
    return (CategoricalEncoder(ATOM_FEATURE_DIMS, width),
            CategoricalEncoder(BOND_FEATURE_DIMS, width))


class PairModel(torch.nn.Module):
    r"""A model of the pair view called as a user does:
    ``model(x, edge_index, edge_attr, batch, view=view)`` with the view the
    loader built (``batch.pair_view``, :class:`~torch_geometric_hot.data.\
    PlannedLoader`), else ``PairView.from_data(batch)``."""
    def __init__(self, model: torch.nn.Module):
        super().__init__()
        self.model = model

    def forward(self, batch) -> Tensor:
        from torch_geometric_hot.data import PairView
        view = getattr(batch, 'pair_view', None)
        if view is None:
            view = PairView.from_data(batch)
        return self.model(batch.x, batch.edge_index, batch.edge_attr,
                          batch.batch, num_graphs=batch.num_graphs,
                          view=view)


class TokenModel(torch.nn.Module):
    r"""TokenGT called as a user does, with the precomputed Laplacian
    node identifiers."""
    def __init__(self, model: torch.nn.Module):
        super().__init__()
        self.model = model

    def forward(self, batch) -> Tensor:
        return self.model(batch.x, batch.edge_index, batch.edge_attr,
                          batch.batch, num_graphs=batch.num_graphs,
                          node_id=batch.lap_node_id,
                          plans=getattr(batch, 'plans', None))


def build_model(name: str, width: int, layers: int, heads: int,
                dropout: float = 0.0) -> torch.nn.Module:
    r"""The model :obj:`name` of :data:`MODELS`, mapping a batch to
    :obj:`[num_graphs, 1]`, with :obj:`dropout` where the model has it
    (``GINEConv`` has none; ``GPSConv`` on its outputs and attention
    weights, TokenGT on its tokens and attention weights, HOT on its
    blocks' outputs and attention weights)."""
    from torch_geometric_hot.models import (HOTGraphModel, InvariantMLP,
                                            TokenGT)
    if name == 'gin':
        return PyGModel(width, layers, heads, None)
    if name.startswith('gps_'):
        return PyGModel(width, layers, heads, name[len('gps_'):], dropout)
    atom, bond = _categorical(width)
    if name == 'invariant_mlp':
        return PairModel(InvariantMLP(width, 1, num_layers=layers,
                                      node_encoder=atom, edge_encoder=bond,
                                      dropout=dropout))
    if name.startswith('hot_'):
        attention, *mean = name[len('hot_'):].split('_')
        options = dict(size_scaler='none') if mean else {}
        return PairModel(HOTGraphModel(
            width, 1, num_layers=layers, heads=heads, node_encoder=atom,
            edge_encoder=bond, attention=attention, seed=0,
            dropout=dropout, **options))
    if name.startswith('tokengt_'):
        return TokenModel(TokenGT(
            width, width, 1, layers, node_encoder=atom, edge_encoder=bond,
            heads=heads, node_id='laplacian', node_id_dim=NODE_ID_DIM,
            attention=name[len('tokengt_'):], seed=0, dropout=dropout,
            attention_dropout=dropout))
    raise ValueError(f"unknown model {name!r}, expected one of "
                     f"{MODELS + OPTIONAL_MODELS}")


# ---------------------------------------------------------------- timing --
class Runner:
    r"""One model with its optimiser: :meth:`train_step` (forward, L1 loss,
    backward, Adam) and :meth:`infer_step` (forward in evaluation mode
    under :func:`torch.inference_mode`)."""
    def __init__(self, model: torch.nn.Module, device: torch.device,
                 compile: bool = False):
        self.model = model.to(device)
        self.device = device
        self.optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
        self.layout = contextlib.nullcontext
        if compile:  # the model under torch.compile, run on its layout
            from torch_geometric_hot.ops.layout_device import (planned_for,
                                                               traced_layout)
            from torch_geometric_hot.train.compiled import \
                raise_recompile_limit
            raise_recompile_limit()
            layout = traced_layout(device)
            if layout.type != device.type:
                self.layout = lambda: planned_for(layout)
            self.model = torch.compile(
                self.model, dynamic=False, mode='reduce-overhead'
                if device.type == 'cuda' else None)

    def forward_backward(self, batch) -> None:
        r"""Forward, L1 loss and backward in training mode (the value
        checks off: the batch's planning pass ran them, see
        :class:`~torch_geometric_hot.data.PlannedLoader`)."""
        from torch_geometric_hot.data import real_graphs
        from torch_geometric_hot.validation import validation
        self.model.train()
        with validation(False), self.layout():
            out = real_graphs(self.model(batch), batch)
            loss = (out - real_graphs(batch.y, batch)).abs().mean()
            loss.backward()

    def train_step(self, batch) -> None:
        self.optimizer.zero_grad()
        self.forward_backward(batch)
        self.optimizer.step()

    def infer_step(self, batch) -> None:
        from torch_geometric_hot.validation import validation
        self.model.eval()
        with torch.inference_mode(), validation(False), self.layout():
            self.model(batch)

    def sync(self) -> None:
        if self.device.type == 'cuda':
            torch.cuda.synchronize(self.device)


def _timed_mean(runner: Runner, step: Callable, batches: Sequence) -> float:
    runner.sync()
    start = time.perf_counter()
    for batch in batches:
        step(batch)
    runner.sync()
    return (time.perf_counter() - start) / len(batches)


def device_events(events) -> List:
    r"""The device's own events (kernels, copies, fills) among
    :mod:`torch.profiler`'s averaged :obj:`events`. An operator's event
    also carries the device time of the kernels it launched, and a range
    the code annotates (``Optimizer.step#Adam.step``) also has an event on
    the device's timeline that spans the kernels inside it: only the
    device's events that are neither are summed."""
    host = {e.key for e in events if e.device_type == DeviceType.CPU}
    return [e for e in events if e.device_type != DeviceType.CPU and
            not getattr(e, 'is_user_annotation', False) and
            e.key not in host]


def longest_events(events, spent: Callable, steps: int,
                   top: int) -> List[List]:
    r"""The :obj:`top` of :obj:`events` that took the most time by
    :obj:`spent` (microseconds), each as its name, calls and milliseconds
    per step of :obj:`steps`."""
    longest = sorted(events, key=spent, reverse=True)[:top]
    return [[e.key[:100], e.count / steps, 1e-3 * spent(e) / steps]
            for e in longest]


def busy_fraction(runner: Runner, batch, steps: int,
                  top: int = 8) -> Dict[str, object]:
    r"""The device's kernel time over the wall time of :obj:`steps`
    training steps on :obj:`batch`, from :mod:`torch.profiler` (on the
    CPU: the aten operators' self time), and the :obj:`top` kernels
    (operators) that took the most of it: name, calls and milliseconds
    per step."""
    from torch.profiler import ProfilerActivity, profile
    cuda = runner.device.type == 'cuda'
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA]
                                           if cuda else [])
    runner.sync()
    with profile(activities=activities) as prof:
        start = time.perf_counter()
        for _ in range(steps):
            runner.train_step(batch)
        runner.sync()
        wall = time.perf_counter() - start
    events = prof.key_averages()
    work = device_events(events) if cuda else [
        e for e in events if e.key.startswith('aten::')]
    spent = operator.attrgetter('self_device_time_total' if cuda else
                                'self_cpu_time_total')
    kernel_us = sum(map(spent, work))
    return dict(busy=1e-6 * kernel_us / wall,
                busy_step_ms=1e3 * wall / steps,
                kernel_ms=1e-3 * kernel_us / steps,
                kernels_per_step=sum(e.count for e in work) / steps,
                top_kernels=longest_events(work, spent, steps, top))


def host_time(runner: Runner, batch, steps: int,
              top: int = 12) -> Dict[str, object]:
    r"""How much of a training step the host takes, over :obj:`steps`
    steps on :obj:`batch`, each starting on an idle device: the median
    time until :meth:`Runner.train_step` returns (``host_ms``: every
    kernel queued, nothing synchronised) and until the device has run them
    all (``done_ms``; on the CPU the two are one). Then one profiled pass
    of as many steps (:mod:`torch.profiler`, host side only, so slower)
    splits the host's time: inside aten operators (``aten_ms``: their self
    time, kernel launches included) and the rest (``outside_aten_ms``:
    Python, modules, autograd's bookkeeping and the profiler's own cost),
    and names the :obj:`top` events with the most self time per step:
    name, calls and milliseconds."""
    from torch.profiler import ProfilerActivity, profile
    queued, done = [], []
    for _ in range(steps):
        runner.sync()
        start = time.perf_counter()
        runner.train_step(batch)
        queued.append(time.perf_counter() - start)
        runner.sync()
        done.append(time.perf_counter() - start)
    runner.sync()
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        start = time.perf_counter()
        for _ in range(steps):
            runner.train_step(batch)
        wall = time.perf_counter() - start
    runner.sync()
    events = [e for e in prof.key_averages()
              if e.device_type == DeviceType.CPU]
    aten_us = sum(e.self_cpu_time_total for e in events
                  if e.key.startswith('aten::'))
    return dict(host_ms=1e3 * statistics.median(queued),
                done_ms=1e3 * statistics.median(done),
                profiled_host_ms=1e3 * wall / steps,
                aten_ms=1e-3 * aten_us / steps,
                outside_aten_ms=1e3 * wall / steps - 1e-3 * aten_us / steps,
                top_host=longest_events(events, operator.attrgetter(
                    'self_cpu_time_total'), steps, top))


def round_robin(runners: Dict[str, Runner],
                batches: Union[Sequence, Dict[str, Sequence]],
                rounds: int, log: Callable[[str], None] = print,
                rates: Optional[List[float]] = None, warmup: int = 1
                ) -> Dict[str, Dict[str, List[float]]]:
    r"""Per model its per-round mean seconds per batch of a training and of
    an inference step, the models taken in turn within every round (the
    first model of round :math:`r` is the :math:`r`-th, so none always
    runs first). :obj:`batches` are those of every model, or per model
    (the same molecules, each model's plans). With :obj:`rates`, the
    machine's matrix-product rate (:func:`peak_matmul_rate`) is appended
    after every round. :obj:`warmup` untimed steps of each kind on every
    batch come first."""
    names = list(runners)
    if not isinstance(batches, dict):
        batches = {name: batches for name in names}
    times = {n: {'train_s': [], 'infer_s': []} for n in names}
    for name in names:  # warm-up: steps of each kind on every batch
        for _ in range(warmup):
            for batch in batches[name]:
                runners[name].train_step(batch)
                runners[name].infer_step(batch)
    for r in range(rounds):
        order = names[r % len(names):] + names[:r % len(names)]
        for name in order:
            runner = runners[name]
            times[name]['train_s'].append(
                _timed_mean(runner, runner.train_step, batches[name]))
            times[name]['infer_s'].append(
                _timed_mean(runner, runner.infer_step, batches[name]))
        if rates is not None:
            rates.append(peak_matmul_rate(next(iter(runners.values()))))
        log(f'round {r + 1}/{rounds}: ' + ', '.join(
            f'{n} {1e3 * times[n]["train_s"][-1]:.0f}' for n in names) +
            ' ms')
    return times


# ------------------------------------------------------------ arithmetic --
def matmul_flops(runner: Runner, batch) -> int:
    r"""Floating-point operations of the matrix products of one training
    step (:class:`torch.utils.flop_counter.FlopCounterMode`, forward and
    backward; the products inside the library's custom operators, such as
    kernel attention's summaries and readings, by their registered counts,
    :mod:`torch_geometric_hot.ops.flop_counts`)."""
    from torch.utils.flop_counter import FlopCounterMode
    with FlopCounterMode(display=False) as counter:
        runner.train_step(batch)
    return counter.get_total_flops()


def peak_matmul_rate(runner: Runner, size: int = 2048,
                     repeats: int = 3) -> float:
    r"""The machine's single-precision matrix-product rate in FLOP/s: the
    best of :obj:`repeats` products of two :obj:`size` x :obj:`size`
    matrices on the runner's device."""
    a = torch.randn(size, size, device=runner.device)
    b = torch.randn(size, size, device=runner.device)
    best = float('inf')
    for _ in range(repeats):
        runner.sync()
        start = time.perf_counter()
        a @ b
        runner.sync()
        best = min(best, time.perf_counter() - start)
    return 2 * size**3 / best


def _flop_op(name: str) -> str:
    # FlopCounterMode's 'ns.op' as the profiler's 'ns::op'
    return name.replace('.', '::', 1)


def step_breakdown(runner: Runner, batches: Sequence) -> Dict[str, object]:
    r"""Where the time of a CPU training step goes: for every operator
    that does arithmetic (those :class:`~torch.utils.flop_counter.\
    FlopCounterMode` counts: the matrix products and the library's custom
    operators, whose inner products are theirs), its time per step
    (inclusive, :mod:`torch.profiler`, calls inside another such operator
    left to that one), FLOPs per step and rate; and the rest of the step.
    One step per batch of :obj:`batches`, after one untimed step."""
    from torch.profiler import ProfilerActivity, profile
    from torch.utils.flop_counter import FlopCounterMode
    flops: Dict[str, float] = {}
    for batch in batches:
        with FlopCounterMode(display=False) as counter:
            runner.forward_backward(batch)
        for op, count in counter.get_flop_counts()['Global'].items():
            key = _flop_op(str(op))
            flops[key] = flops.get(key, 0.0) + count / len(batches)
    runner.train_step(batches[0])
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        start = time.perf_counter()
        for batch in batches:
            runner.train_step(batch)
        wall = (time.perf_counter() - start) / len(batches)
    spent: Dict[str, float] = {}
    for event in prof.events():
        if event.name not in flops:
            continue
        parent = event.cpu_parent
        while parent is not None and parent.name not in flops:
            parent = parent.cpu_parent
        if parent is None:  # not inside another counted operator
            spent[event.name] = spent.get(event.name, 0.0) + \
                1e-6 * event.cpu_time_total / len(batches)
    rows = [dict(op=op, ms=1e3 * spent.get(op, 0.0), gflop=1e-9 * n,
                 gflop_per_s=1e-9 * n / spent[op] if spent.get(op) else None)
            for op, n in sorted(flops.items(), key=lambda kv: -kv[1])]
    counted = sum(spent.values())
    return dict(step_ms=1e3 * wall, ops=rows,
                rest_ms=1e3 * (wall - counted),
                gflop=1e-9 * sum(flops.values()),
                gflop_per_s=1e-9 * sum(flops.values()) / wall)


def breakdown(args: argparse.Namespace) -> Dict:
    r"""``--breakdown``: :func:`step_breakdown` of every model on the
    first :obj:`args.batches` batches, with the machine's peak
    matrix-product rate beside it."""
    from torch_geometric_hot.data import ModelPlanner, PlannedLoader
    device = torch.device(args.device)
    graphs = load_graphs(args.root, args.batch_size * args.batches,
                         args.synthetic)
    models: Dict[str, Dict] = {}
    peak = 0.0
    for name in args.models:
        torch.manual_seed(0)
        runner = Runner(build_model(name, args.width, args.layers,
                                    args.heads, args.dropout), device)
        batches = list(PlannedLoader(graphs, args.batch_size,
                                     planner=ModelPlanner(runner.model)))
        models[name] = step_breakdown(runner, batches)
        peak = max(peak, peak_matmul_rate(runner))
        row = models[name]
        print(f"{LABELS[name]}: {row['step_ms']:.1f} ms per step, "
              f"{row['gflop']:.2f} GFLOP, {row['gflop_per_s']:.1f} GFLOP/s")
        for op in row['ops']:
            rate = op['gflop_per_s']
            print(f"    {op['op']:<52} {op['ms']:8.1f} ms "
                  f"{op['gflop']:7.2f} GFLOP "
                  f"{'' if rate is None else f'{rate:6.1f} GFLOP/s'}")
        print(f"    {'everything else':<52} {row['rest_ms']:8.1f} ms")
    print(f'peak matrix-product rate: {1e-9 * peak:.1f} GFLOP/s')
    result = dict(settings=dict(device=str(device),
                                batch_size=args.batch_size,
                                batches=args.batches, width=args.width,
                                layers=args.layers, heads=args.heads,
                                threads=args.threads,
                                synthetic=args.synthetic,
                                peak_gflop_per_s=1e-9 * peak,
                                versions=software_versions()), models=models)
    if args.out:
        write_json(args.out, result)
    return result


# ---------------------------------------------------------------- memory --
def cuda_peak_bytes(runner: Runner, batch) -> int:
    r"""Bytes allocated at the peak of one training step above those
    allocated before it (CUDA)."""
    torch.cuda.synchronize(runner.device)
    before = torch.cuda.memory_allocated(runner.device)
    torch.cuda.reset_peak_memory_stats(runner.device)
    runner.train_step(batch)
    torch.cuda.synchronize(runner.device)
    return torch.cuda.max_memory_allocated(runner.device) - before


def cpu_peak_bytes_here(args: argparse.Namespace, name: str) -> int:
    r"""The peak resident-set increase of this process over one training
    step of :obj:`name` on the first batch (call in a fresh process)."""
    from torch_geometric_hot.data import ModelPlanner
    torch.manual_seed(0)
    runner = Runner(build_model(name, args.width, args.layers, args.heads,
                                args.dropout), torch.device('cpu'))
    batch = load_batches(args.root, args.batch_size, 1, args.synthetic,
                         ModelPlanner(runner.model))[0]
    before = _current_rss_kb()
    if not _reset_peak_rss():
        raise RuntimeError('cannot reset the peak resident set '
                           '(/proc/self/clear_refs)')
    runner.train_step(batch)
    with open('/proc/self/status') as f:
        peak = next(int(line.split()[1]) for line in f
                    if line.startswith('VmHWM:'))
    return max(peak - before, 0) * 1024


def cpu_peak_bytes(args: argparse.Namespace, name: str) -> int:
    r""":func:`cpu_peak_bytes_here` of :obj:`name` in a fresh process."""
    command = [sys.executable, os.path.abspath(__file__), '--memory-of',
               name, '--root', args.root, '--batch-size',
               str(args.batch_size), '--width', str(args.width), '--layers',
               str(args.layers), '--heads', str(args.heads), '--threads',
               str(args.threads), '--packed', args.packed, '--native',
               args.native, '--dropout', str(args.dropout)] + (
                   ['--device-type', args.device_type]
                   if args.device_type else []) + (
                   ['--synthetic'] if args.synthetic else [])
    out = subprocess.run(command, check=True, capture_output=True,
                         text=True).stdout
    return int(json.loads(out.strip().splitlines()[-1])['peak_bytes'])


# ------------------------------------------------------------------ main --
def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--device', default='cpu')
    parser.add_argument('--batch-size', type=int, default=128)
    parser.add_argument('--width', type=int, default=64)
    parser.add_argument('--layers', type=int, default=4)
    parser.add_argument('--heads', type=int, default=4)
    parser.add_argument('--dropout', type=float, default=0.0,
                        help='dropout of every model that has it (see '
                        'build_model; GIN has none)')
    parser.add_argument('--batches', type=int, default=4,
                        help='distinct batches timed per model and round')
    parser.add_argument('--rounds', type=int, default=5)
    parser.add_argument('--threads', type=int, default=1)
    parser.add_argument('--models', default=','.join(MODELS),
                        help='comma-separated subset of ' + ', '.join(
                            MODELS + OPTIONAL_MODELS))
    parser.add_argument('--no-memory', action='store_true',
                        help='skip the peak-memory measurement')
    parser.add_argument('--root', default=os.path.join(ROOT, 'data_cache',
                                                       'nci_tpsa'))
    parser.add_argument('--out', default=None, help='JSON output path')
    parser.add_argument('--packed', default='auto',
                        choices=('auto', 'on', 'off'),
                        help="HOT's packed per-graph attention: chosen per "
                        "batch by its rule (auto; softmax attention takes "
                        "the native grouped kernel where it applies), "
                        "always where it serves (on) or never (off)")
    parser.add_argument('--device-type', default=None,
                        help="decide HOT's paths as on this device type "
                        "(cuda: the packed layout and classes a GPU runs, "
                        "on any device; default: the device's own)")
    parser.add_argument('--native', default='auto',
                        choices=('auto', 'on', 'off'),
                        help='the native CPU kernels (off: the pure-torch '
                        'operations, the path a GPU takes)')
    parser.add_argument('--floor', action='store_true',
                        help="each model's arithmetic floor: its matrix "
                        "products' FLOPs per training step over the "
                        "machine's peak matrix-product rate, measured after "
                        "every round")
    parser.add_argument('--quick', action='store_true',
                        help='batches of 8, width 16, 2 layers, 2 rounds of '
                        '1 batch (seconds; the same code path)')
    parser.add_argument('--synthetic', action='store_true',
                        help='synthetic molecule-like graphs instead of '
                        'NCITPSA (no RDKit or OGB needed; the default where '
                        'they are missing)')
    parser.add_argument('--count-ops', action='store_true',
                        help="instead of timings: the aten operators one "
                        "training step (forward, loss, backward; the "
                        "optimizer apart) dispatches per model, with the "
                        "layout CUDA uses, counted on --device, and the "
                        "host-synchronising operators among them (JSON)")
    parser.add_argument('--graphs-per-bin', type=int, default=None,
                        help='with --count-ops: the most graphs that share a '
                        'block of the packed layout (default: the '
                        "library's, 8; 1: a block per graph)")
    parser.add_argument('--compile', action='store_true',
                        help='every model under torch.compile '
                        '(dynamic=False; on CUDA mode reduce-overhead, CUDA '
                        'graphs) on the batches padded to one size '
                        '(PadToBuckets, the largest bucket of the batches) '
                        'and planned for the launch-bound layout')
    parser.add_argument('--busy', type=int, default=0, metavar='N',
                        help='after the rounds, profile N training steps '
                        "of each model: the device's kernel time over the "
                        'wall time (torch.profiler; 0: not measured)')
    parser.add_argument('--host', type=int, default=0, metavar='N',
                        help='after the rounds (and --busy), N training '
                        'steps of each model from an idle device: the time '
                        'until the host has queued the step against the '
                        'time until the device has run it, and where the '
                        "host's time goes (torch.profiler; 0: not "
                        'measured)')
    parser.add_argument('--breakdown', action='store_true',
                        help='instead of timings: where the time of each '
                        "model's CPU training step goes, per operator that "
                        'does arithmetic (time, FLOPs, rate; torch.profiler '
                        'and FlopCounterMode), and the rest (JSON)')
    parser.add_argument('--memory-of', default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.quick:
        args.batch_size, args.width, args.layers = 8, 16, 2
        args.batches, args.rounds = 1, 2
    if not args.synthetic and not _has_rdkit_and_ogb():
        print('RDKit or OGB missing: synthetic molecules (--synthetic)')
        args.synthetic = True
    args.models = [m for m in args.models.split(',') if m]
    for name in args.models:
        if name not in MODELS + OPTIONAL_MODELS:
            parser.error(f"--models: unknown model {name!r}, expected a "
                         f"subset of {', '.join(MODELS + OPTIONAL_MODELS)}")
    if 'gin' not in args.models or 'gps_multihead' not in args.models:
        parser.error("--models must include 'gin' and 'gps_multihead' "
                     "(the ratios are to them)")
    if args.breakdown and (args.count_ops or args.device != 'cpu'):
        parser.error('--breakdown measures the CPU step: no --count-ops, '
                     '--device cpu')
    if args.graphs_per_bin is None:
        from torch_geometric_hot.ops.attention.packed import GRAPHS_PER_BIN
        args.graphs_per_bin = GRAPHS_PER_BIN
    elif not args.count_ops or args.graphs_per_bin < 1:
        parser.error("--graphs-per-bin needs --count-ops and must be >= 1")
    return args


def common_padding(graphs: Sequence, batch_size: int):
    r"""A :class:`~torch_geometric_hot.data.PadToBuckets` that pads every
    batch of :obj:`graphs` to one size: the largest bucket of each size
    over the batches (for one compiled graph per model)."""
    from torch_geometric_hot.data import PadToBuckets
    from torch_geometric_hot.data.padding import Buckets
    pre = _pre_transform()
    chunks = [graphs[i:i + batch_size]
              for i in range(0, len(graphs), batch_size)]
    least = None
    for _ in range(4):  # raising one size can raise another
        pad = PadToBuckets(pre, at_least=least)
        sizes = [pad.buckets(chunk)[0] for chunk in chunks]
        least = Buckets(*map(max, zip(*sizes)))
        if all(size == least for size in sizes):
            return pad
    return PadToBuckets(pre, at_least=least)


def _has_rdkit_and_ogb() -> bool:
    try:
        import ogb  # noqa: F401
        import rdkit  # noqa: F401
    except ImportError:
        return False
    return True


def summarize(times: Dict[str, Dict[str, List[float]]],
              memory: Dict[str, Optional[int]],
              flops: Optional[Dict[str, int]] = None,
              rates: Optional[List[float]] = None) -> Dict[str, Dict]:
    r"""Per model the median training and inference milliseconds per batch,
    the training ratios to ``gin`` and ``gps_multihead`` (of the medians,
    and ``*_rounds``: the median of the rounds' own ratios, which a drift
    of the machine's speed between rounds does not enter), the peak
    memory in MiB, and with :obj:`flops` and :obj:`rates` the arithmetic
    floor: the matrix products' GFLOP per training step, their time at the
    median peak rate (``floor_ms``) and the median of the rounds' ratios of
    the training time to that round's floor (``to_floor_rounds``)."""
    rows = {}
    for name, t in times.items():
        rows[name] = dict(train_ms=1e3 * statistics.median(t['train_s']),
                          infer_ms=1e3 * statistics.median(t['infer_s']))
        for ref in ('gin', 'gps_multihead'):
            rows[name][f'to_{ref}_rounds'] = statistics.median(
                a / b for a, b in zip(t['train_s'], times[ref]['train_s']))
        rows[name]['infer_to_gps_multihead_rounds'] = statistics.median(
            a / b for a, b in zip(t['infer_s'],
                                  times['gps_multihead']['infer_s']))
    for name, row in rows.items():
        row['to_gin'] = row['train_ms'] / rows['gin']['train_ms']
        row['to_gps_multihead'] = row['train_ms'] / rows['gps_multihead'][
            'train_ms']
        row['infer_to_gps_multihead'] = row['infer_ms'] / rows[
            'gps_multihead']['infer_ms']
        peak = memory.get(name)
        row['peak_mib'] = None if peak is None else peak / 2**20
        if flops and rates:
            t = times[name]['train_s']
            row['matmul_gflop'] = flops[name] / 1e9
            row['floor_ms'] = 1e3 * flops[name] / statistics.median(rates)
            row['to_floor_rounds'] = statistics.median(
                s * rate / flops[name] for s, rate in zip(t, rates))
    return rows


def format_table(rows: Dict[str, Dict]) -> str:
    r"""The summary as a table; a ratio is printed as "of the medians /
    median of the rounds' ratios"; with the arithmetic floor, its
    milliseconds and the rounds' median ratio to it; with ``--busy``, the
    busy percentage and the kernels per step; with ``--host``, the
    milliseconds until the host has queued a step and until the device has
    run it."""
    floor = all('floor_ms' in row for row in rows.values())
    busy = all('busy' in row for row in rows.values())
    host = all('host_ms' in row for row in rows.values())
    lines = [f'{"model":<34} {"train ms":>9} {"x GIN":>11} {"x GPS":>11} '
             f'{"infer ms":>9} {"x GPS":>11} {"peak MiB":>9}' +
             (f' {"floor ms":>9} {"x floor":>8}' if floor else '') +
             (f' {"busy %":>7} {"kernels":>8}' if busy else '') +
             (f' {"host ms":>8} {"done ms":>8}' if host else '')]
    for name, row in rows.items():
        peak = '-' if row['peak_mib'] is None else f'{row["peak_mib"]:.1f}'
        ratios = [f'{row[key]:.2f}/{row[key + "_rounds"]:.2f}' for key in (
            'to_gin', 'to_gps_multihead', 'infer_to_gps_multihead')]
        lines.append(f'{LABELS[name]:<34} {row["train_ms"]:>9.1f} '
                     f'{ratios[0]:>11} {ratios[1]:>11} '
                     f'{row["infer_ms"]:>9.1f} {ratios[2]:>11} {peak:>9}' +
                     (f' {row["floor_ms"]:>9.1f} '
                      f'{row["to_floor_rounds"]:>8.2f}' if floor else '') +
                     (f' {100 * row["busy"]:>7.1f} '
                      f'{row["kernels_per_step"]:>8.0f}' if busy else '') +
                     (f' {row["host_ms"]:>8.1f} {row["done_ms"]:>8.1f}'
                      if host else ''))
    return '\n'.join(lines)


#: The paths ``--packed`` forces on HOT's attention
#: (:mod:`~torch_geometric_hot.ops.attention.dispatch`): per call the first
#: that runs it ('auto': the rule's choice, softmax attention on the native
#: grouped operator where it applies, else packed by the graphs' size).
PACKED_PATHS = {'auto': (), 'on': ('packed', 'padded', 'pairs', 'pooled'),
                'off': ('padded', 'pairs', 'pooled')}


def dispatch_ratio() -> float:
    r"""The size ratio of the packed layout's buckets off the CPU in
    force."""
    from torch_geometric_hot.ops.attention import dispatch
    return dispatch.LAUNCH_BOUND_BUCKET_RATIO


def forced_paths(args: argparse.Namespace):
    r"""The :func:`~torch_geometric_hot.ops.use_path` of ``--packed`` and
    ``--device-type``."""
    from torch_geometric_hot.ops import use_path
    return use_path(*PACKED_PATHS[args.packed],
                    device_type=args.device_type, operations=('hot', ))


@contextlib.contextmanager
def graphs_per_bin(count: int):
    r"""The packed layout's bins hold at most :obj:`count` graphs inside
    the context (``--graphs-per-bin``; the library's
    :data:`~torch_geometric_hot.ops.attention.packed.GRAPHS_PER_BIN`
    again after it)."""
    from torch_geometric_hot.ops.attention import packed
    kept = packed.GRAPHS_PER_BIN
    packed.GRAPHS_PER_BIN = count
    try:
        yield
    finally:
        packed.GRAPHS_PER_BIN = kept


def count_ops(args: argparse.Namespace) -> Dict:
    r"""Per model the aten operators of one training step (forward, L1
    loss, backward; the optimizer apart) on the first batch, with the
    layout CUDA uses (:func:`~torch_geometric_hot.testing.cuda_layout`;
    the batch planned for it as the loader's workers plan it), counted on
    :obj:`args.device`; the most frequent ones, the host-synchronising
    ones (:class:`~torch_geometric_hot.testing.SyncRecorder`), the ratio
    to ``gps_multihead``'s count, the operators among them that launch a
    kernel on a GPU (``launches``: views and allocations apart, see
    :class:`~torch_geometric_hot.testing.OperatorCounter`) and their ratio,
    the step's floating-point operations
    (``gflop``, :class:`torch.utils.flop_counter.FlopCounterMode`) and,
    for the HOT models, the blocks of the packed layout of their pair
    entries (``blocks``; ``--graphs-per-bin 1``: a block per graph)."""
    from torch.utils.flop_counter import FlopCounterMode

    from torch_geometric_hot.data import ModelPlanner, PlannedLoader
    from torch_geometric_hot.ops.attention import packed
    from torch_geometric_hot.testing import OperatorCounter, SyncRecorder, \
        cuda_layout
    device = torch.device(args.device)
    graphs = load_graphs(args.root, args.batch_size, args.synthetic)
    rows: Dict[str, Dict] = {}
    for name in args.models:
        torch.manual_seed(0)
        runner = Runner(build_model(name, args.width, args.layers,
                                    args.heads, args.dropout), device)
        with graphs_per_bin(args.graphs_per_bin):
            loader = PlannedLoader(graphs, args.batch_size,
                                   planner=ModelPlanner(runner.model),
                                   device='cuda')
            batch = next(iter(loader)).to(device)
            with cuda_layout(), OperatorCounter() as counter, \
                    SyncRecorder() as syncs:
                runner.forward_backward(batch)
            with cuda_layout(), FlopCounterMode(display=False) as flops:
                runner.forward_backward(batch)
            rows[name] = dict(ops=counter.total, launches=counter.launches,
                              top=counter.summary(12),
                              sync_ops=syncs.summary(),
                              gflop=flops.get_total_flops() / 1e9)
            view = getattr(batch, 'pair_view', None)
            if name.startswith('hot') and view is not None:
                rows[name]['blocks'] = sum(packed.packed_layout(
                    view, True, dispatch_ratio()).counts)
    for row in rows.values():
        row['to_gps_multihead'] = row['ops'] / rows['gps_multihead']['ops']
        row['launches_to_gps_multihead'] = \
            row['launches'] / rows['gps_multihead']['launches']
    print(f'aten operators (all, then those that launch a kernel) and '
          f'GFLOP of one training step (forward + L1 loss + backward), '
          f'CUDA layout, {args.batch_size} molecules, width {args.width}, '
          f'{args.layers} layers, {args.heads} heads, counted on {device}')
    for name, row in rows.items():
        blocks = f'  blocks: {row["blocks"]}' if 'blocks' in row else ''
        print(f'{LABELS[name]:<34} {row["ops"]:>6} '
              f'{row["to_gps_multihead"]:>6.2f}x GPS {row["launches"]:>6} '
              f'{row["launches_to_gps_multihead"]:>6.2f}x GPS '
              f'{row["gflop"]:>7.1f} GFLOP  sync: '
              f'{sum(row["sync_ops"].values())}{blocks}')
    result = dict(settings=dict(device=str(device), layout='cuda',
                                bucket_ratio=dispatch_ratio(),
                                graphs_per_bin=args.graphs_per_bin,
                                batch_size=args.batch_size,
                                width=args.width, layers=args.layers,
                                heads=args.heads, dropout=args.dropout,
                                synthetic=args.synthetic,
                                versions=software_versions()), models=rows)
    if args.out:
        write_json(args.out, result)
    return result


def main(argv=None) -> Dict:
    args = parse_args(argv)
    from torch_geometric_hot.ops.native import use_native
    with forced_paths(args), use_native(args.native):
        return run(args)


def run(args: argparse.Namespace) -> Dict:
    torch.set_num_threads(args.threads)
    if args.memory_of is not None:
        print(json.dumps({'peak_bytes': cpu_peak_bytes_here(
            args, args.memory_of)}))
        return {}
    if args.count_ops:
        return count_ops(args)
    if args.breakdown:
        return breakdown(args)
    from torch_geometric_hot.data import ModelPlanner, PlannedLoader
    device = torch.device(args.device)
    graphs = load_graphs(args.root, args.batch_size * args.batches,
                         args.synthetic)
    runners, per_model = {}, {}
    pad, layout = None, args.device_type or device
    if args.compile:
        from torch_geometric_hot.ops.layout_device import traced_layout
        pad, layout = common_padding(graphs, args.batch_size), \
            traced_layout(device)
    for name in args.models:
        torch.manual_seed(0)
        model = build_model(name, args.width, args.layers, args.heads,
                            args.dropout)
        # each model's batches: the same molecules, its own plans, made
        # for the device's layout (as the loader's workers make them)
        loader = PlannedLoader(graphs, args.batch_size,
                               planner=ModelPlanner(model), device=layout,
                               pin_memory=device.type == 'cuda', pad=pad)
        per_model[name] = [b.to(device, non_blocking=True) for b in loader]
        runners[name] = Runner(model, device, compile=args.compile)
    batches = per_model[args.models[0]]
    nodes = sum(b.num_nodes for b in batches) / sum(b.num_graphs
                                                    for b in batches)
    edges = sum(b.num_edges for b in batches) / sum(b.num_graphs
                                                    for b in batches)
    source = 'synthetic molecule-like graphs' if args.synthetic else \
        'NCITPSA molecules (OGB featurisation)'
    print(f'{len(batches)} batches of {args.batch_size} {source} '
          f'({nodes:.1f} atoms, {edges:.1f} directed '
          f'bonds per molecule); pre_transform {PRE_TRANSFORMS} applied once '
          f'when the dataset was processed; pair views and plans built by '
          f'the loader; width {args.width}, '
          f'{args.layers} layers, {args.heads} heads, dropout '
          f'{args.dropout}; {args.threads} thread(s), {device}')
    memory: Dict[str, Optional[int]] = {}
    if not args.no_memory:
        for name in args.models:
            memory[name] = cuda_peak_bytes(runners[name], batches[0]) \
                if device.type == 'cuda' else cpu_peak_bytes(args, name)
    flops: Dict[str, int] = {}
    rates: Optional[List[float]] = [] if args.floor else None
    if args.floor:
        flops = {name: matmul_flops(runner, batches[0])
                 for name, runner in runners.items()}
    # compiled: the second pass records the CUDA graphs
    times = round_robin(runners, per_model, args.rounds, rates=rates,
                        warmup=3 if args.compile else 1)
    rows = summarize(times, memory, flops, rates)
    result = dict(
        settings=dict(device=str(device), batch_size=args.batch_size,
                      width=args.width, layers=args.layers, heads=args.heads,
                      dropout=args.dropout,
                      batches=args.batches, rounds=args.rounds,
                      threads=args.threads, quick=args.quick,
                      synthetic=args.synthetic,
                      packed=args.packed, native=args.native,
                      device_type=args.device_type,
                      compile=args.compile, busy_steps=args.busy,
                      host_steps=args.host,
                      bucket_ratio=dispatch_ratio(),
                      peak_gflops=[r / 1e9 for r in rates or []],
                      pre_transform=PRE_TRANSFORMS,
                      atoms_per_molecule=nodes, bonds_per_molecule=edges,
                      versions=software_versions()),
        models=rows, rounds={n: t for n, t in times.items()})
    # written now and after every busy fraction: a run stopped by a time
    # limit keeps what it measured
    if args.out:
        write_json(args.out, result)
    for name, runner in runners.items() if args.busy > 0 else ():
        rows[name].update(busy_fraction(runner, per_model[name][0],
                                        args.busy))
        if args.out:
            write_json(args.out, result)
    for name, runner in runners.items() if args.host > 0 else ():
        rows[name].update(host_time(runner, per_model[name][0], args.host))
        if args.out:
            write_json(args.out, result)
    print(f'median over {args.rounds} round-robin rounds of the mean over '
          f'{len(batches)} batches; training step = forward + L1 loss + '
          f'backward + Adam; inference = forward under inference_mode; '
          f'ratios: of the medians / median of the rounds\' ratios')
    print(format_table(rows))
    return result


if __name__ == '__main__':
    main()
