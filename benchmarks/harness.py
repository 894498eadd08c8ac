r"""The shared benchmark harness (``docs/design.md``, "Cost
promises"). Every script in
``benchmarks/`` uses it, so that all numbers are measured the same way.

API
---
``ba_edge_index(num_edges, m=5, seed=0) -> LongTensor [2, E]``
    Barabási–Albert graph (each new node links to ``m`` earlier nodes by
    preferential attachment), undirected with both directions stored, no
    self-loops or duplicates; ``E`` is about ``num_edges``. Vectorised
    numpy: 10^7 edges in seconds.
``bandwidth_floor(num_rows, channels=32, num_groups=None, seed=0,
device='cpu') -> step``
    The reference op ("the floor" of ``docs/design.md``): one gather of
    ``num_rows`` rows and one ``index_add_`` of them into ``num_groups``
    (default ``num_rows``) rows, on ``device``.
    Its forward+backward time is the "floor" every variant is divided by.
``time_fwd_bwd(step_fwd, repeats=3, warmup=1, min_time=0.0,
device=None) -> (fwd_s, fwd_bwd_s)``
    Medians over at least ``repeats`` repetitions, and more (up to 200)
    until the timed repetitions add up to ``min_time`` seconds, so that
    small sizes are not at the mercy of one preemption on a busy machine.
    Each repetition calls ``out = step_fwd()`` with autograd
    enabled (that is ``fwd_s``), then ``out.sum().backward()``; ``fwd_bwd_s``
    is the time of both. Gradients are not zeroed between repetitions. An
    output that does not require grad (an index builder) is not
    differentiated, so its ``fwd_bwd_s`` is its ``fwd_s``. On a CUDA
    ``device`` every clock reading waits for the device first.
``alternation_times(times, first, second, prefixes=()) -> dict``
    The fields of a side-by-side comparison of two settings timed
    alternately in one process: per setting its passes, minimum and
    median, and the ratios second / first of the minima and medians.
``format_alternation(record, prefixes, labels) -> str``
    Those fields as one line: each setting's minimum / median, then the
    ratios.
``alternate_with_references(step, references, rounds) -> dict``
    A point's step timed alternately with reference steps on the same
    input, in one process: per round one forward+backward pass of the step,
    then each reference's median over a few passes. The fields
    ``alt_self_s`` and, per reference ``name``, ``alt_<name>_s`` (the
    rounds' times) and ``alt_to_<name>`` (the median of the rounds'
    ratios step / reference).
``run_benchmark(name, sizes, variants, argv=None, size_key='n_edges',
floor=None, quick_sizes=None) -> list[dict]``
    The command line of every script. ``variants`` maps a variant name to
    ``build(size, device) -> (step_fwd, fields)``, which builds its inputs
    and modules on ``device``; ``fields`` holds the size columns of the
    record (``n_nodes``, ``n_edges`` or ``n_tokens`` / ``n_tuples``). A
    ``'floor'`` variant is added (``floor(size, device)``, default
    ``bandwidth_floor(size)``), so the floor is measured in the same run at
    every size. Options: ``--device cpu|cuda`` (default ``cpu``),
    ``--out PATH`` (JSON, rewritten after every point, so that a run
    stopped from outside keeps the points it measured), ``--plot PATH``
    (PNG),
    ``--quick`` (``quick_sizes``), ``--sizes``, ``--variants``,
    ``--repeats``, ``--min-time``, ``--warmup``, ``--threads``,
    ``--max-seconds`` and ``--max-mem-gb`` (a variant's sweep stops at the
    first point whose forward+backward or peak memory is over the limit, or
    that fails or times out), ``--thp`` (every point twice: without and
    with ``THP_MEM_ALLOC_ENABLE=1``), ``--keep-freed-memory`` (children
    run with glibc malloc keeping freed memory for reuse:
    ``MALLOC_MMAP_MAX_=0``, ``MALLOC_TRIM_THRESHOLD_`` and
    ``MALLOC_TOP_PAD_`` large, so that a large tensor does not get fresh,
    page-faulting pages every time; recorded as ``allocator='keep'``),
    ``--alternate ROUNDS`` with ``--alternate-with NAMES`` (default
    ``floor``): after its measurement, each point's process (but the
    floor's) times the point against those variants, built at the same
    size, for ``ROUNDS`` alternating rounds
    (:func:`alternate_with_references`), so that a drift of the machine's
    speed between processes does not enter the ratio. ``--rounds R``
    runs each size's points R times over, in turn (each record keeps its
    ``round``): the summary reads per size the median of the rounds, and
    a point's ``time_to_floor`` divides by its own round's floor. The
    points run size by size (:func:`schedule`). ``--count-ops`` times
    nothing: each point's process counts the aten operators of one
    forward and backward pass with the layout a GPU uses, on the CPU
    (:func:`count_point`), a proxy for a GPU's kernel launches.
    ``--compile [BACKEND]`` times every step (the floor's too) under
    :func:`torch.compile` (:func:`compiled_step`); the records then hold
    ``compile_s`` (the eager planning pass and the first compiled pass,
    compilation included) and ``graphs`` (graphs compiled for the point).
``compiled_step(step, device, backend='inductor') -> step``
    A step under :func:`torch.compile` as the training command's
    ``--compile`` runs a model (``dynamic=False``; on CUDA CUDA graphs,
    ``mode='reduce-overhead'``), on the layout a traced graph is planned
    for (a GPU's, on the CPU too), the value checks off, after one eager
    pass on that layout that makes the plans.
``schedule(sizes, variants, thps, rounds=1) -> list[tuple]``
    The order of the points: size by size, each size's variants (the
    floor first) one after another, ``rounds`` times over, so that ratios
    at one size compare points measured minutes apart.
``write_json(path, obj)``
    Writes :obj:`obj` as indented JSON, creating the folder.
``software_versions() -> dict``
    The versions of Python, torch, PyG and this package and the source
    checkout's commit, which every result file records (``versions``).
``summarize(records, size_key='n_edges') -> list[dict]``
    Per (variant, thp): the log–log slope of peak memory and of time against
    ``size_key`` (least squares), and the min/max/spread (max/min) of the
    time-to-floor ratio across sizes (``ratio_*``; and ``alt_ratio_*`` of
    the alternating ``alt_to_floor`` where the records have it); each over
    all sizes and, with suffix ``_top``, over the top two decades (sizes
    ``>= max/100``). A size measured in several rounds counts with the
    medians of its rounds (:func:`round_medians`).
``format_table(records, size_key)``, ``format_summary(summary)``,
``plot(records, path, size_key)``
    Print and draw them (the table has one line per point with its
    ``time_to_floor`` ratio and the load average it was measured at).

What is measured
----------------
Every point runs in a fresh process (the script re-invokes itself with
``--point JSON``). The child builds the inputs (graph, module, features),
runs the garbage collector, resets the kernel's peak-RSS mark
(``/proc/self/clear_refs``), reads the current RSS, then runs
``time_fwd_bwd``. ``peak_mem_mb`` is the peak RSS after that
(``resource.getrusage(RUSAGE_SELF).ru_maxrss``, KB on Linux) minus the RSS
before it: the memory of the forward and backward passes (activations,
outputs, gradients, allocator growth), not of the inputs or of the Python
and torch runtime. Where the peak mark cannot be reset the peak includes
set-up (``peak_reset`` is false in the record). On CUDA it is the device
memory instead: the peak that torch's caching allocator reports
(``torch.cuda.max_memory_allocated``, reset before the passes) minus what
was allocated before them. With ``--alternate``, the
references are built and timed after the peak is read.

Why alternate: this machine's speed swings by up to 3x from one phase to
the next, at times within a minute, and the floor, which takes
milliseconds at 10^4 edges, is timed in a process of its own. A
time-to-floor ratio read across two processes then holds the swing; one
read round by round in one process does not.
"""
import argparse
import gc
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np
import torch
from torch import Tensor

from torch_geometric_hot.train.versions import software_versions

Step = Callable[[], Tensor]
Builder = Callable[[int, torch.device], Tuple[Step, Dict]]
FLOOR = 'floor'
MAX_REPEATS = 200
#: A reference's passes per alternating round: at least this many, and
#: more until they add up to REFERENCE_MIN_TIME seconds (the floor takes
#: milliseconds at small sizes).
REFERENCE_REPEATS, REFERENCE_MIN_TIME = 3, 0.1


# ---------------------------------------------------------------- graphs --
def ba_edge_index(num_edges: int, m: int = 5, seed: int = 0) -> Tensor:
    r"""A Barabási–Albert graph with about :obj:`num_edges` directed edges.

    Nodes ``0..m`` form a clique; every later node ``v`` draws ``m`` targets
    among the earlier nodes with probability proportional to their degree
    (Batagelj–Brandes: a uniform pick in the list of endpoints of the edges
    so far, resolved by vectorised pointer jumping). Repeated picks of one
    target are merged, so a node may get fewer than ``m`` edges.

    Returns:
        :obj:`LongTensor [2, E]`, both directions, sorted by (row, col).
    """
    if m < 1:
        raise ValueError(f"'m' must be >= 1, got {m}")
    num_nodes = max(num_edges // (2 * m), m + 1)
    rng = np.random.default_rng(seed)
    clique = np.array([(i, j) for j in range(m + 1) for i in range(j)],
                      dtype=np.int64).reshape(-1, 2)
    new = np.repeat(np.arange(m + 1, num_nodes, dtype=np.int64), m)
    # Endpoint list: endpoints[2k] = src of edge k, endpoints[2k+1] = dst.
    num_all = clique.shape[0] + new.size
    endpoints = np.empty(2 * num_all, dtype=np.int64)
    endpoints[0:2 * clique.shape[0]] = clique.reshape(-1)
    first = 2 * clique.shape[0]
    endpoints[first::2] = new
    # The targets (odd slots of the new edges) are filled in below.
    # Edge of node v may pick any endpoint of the edges before v's block.
    block_start = 2 * (clique.shape[0] + (new - (m + 1)) * m)
    pick = (rng.random(new.size) * block_start).astype(np.int64)
    # An odd pick is the (unknown yet) target of an earlier new edge: jump
    # to that edge's own pick until every pick lands on a known endpoint.
    own_pick = np.full(2 * num_all, -1, dtype=np.int64)
    own_pick[first + 1::2] = pick
    todo = np.flatnonzero((pick >= first) & (pick % 2 == 1))
    while todo.size:
        pick[todo] = own_pick[pick[todo]]
        todo = todo[(pick[todo] >= first) & (pick[todo] % 2 == 1)]
    targets = np.sort(endpoints[pick].reshape(-1, m), axis=1)  # [v, m]
    # Merge repeated targets of one node (the only duplicates there are).
    keep = np.ones_like(targets, dtype=bool)
    keep[:, 1:] = targets[:, 1:] != targets[:, :-1]
    src = np.concatenate([clique[:, 0], new[keep.reshape(-1)]])
    dst = np.concatenate([clique[:, 1], targets[keep]])
    keys = np.concatenate([src * num_nodes + dst, dst * num_nodes + src])
    keys.sort()
    return torch.from_numpy(np.stack([keys // num_nodes, keys % num_nodes]))


# ------------------------------------------------------------- the floor --
def bandwidth_floor(num_rows: int, channels: int = 32,
                    num_groups: Optional[int] = None, seed: int = 0,
                    device: torch.device = torch.device('cpu')) -> Step:
    r"""The reference op: ``out = zeros(G, C).index_add_(0, dst, x[src])``
    with :obj:`num_rows` random ``src``/``dst`` indices and a leaf ``x`` of
    :obj:`[G, C]` (``G = num_groups or num_rows``), on :obj:`device` (drawn
    on the CPU: the same on every device); backward is one ``index_add_``
    for the gather and one gather for the sum."""
    num_groups = num_groups or num_rows
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(num_groups, channels, generator=gen).to(device)
    x.requires_grad_()
    src = torch.randint(num_groups, (num_rows, ), generator=gen).to(device)
    dst = torch.randint(num_groups, (num_rows, ), generator=gen).to(device)

    def step() -> Tensor:
        return x.new_zeros(num_groups, channels).index_add_(0, dst, x[src])

    return step


# ---------------------------------------------------------------- timing --
def _clock(device: Optional[torch.device]) -> float:
    # the time once the device has finished what it was given
    if device is not None and device.type == 'cuda':
        torch.cuda.synchronize(device)
    return time.perf_counter()


def time_fwd_bwd(step_fwd: Step, repeats: int = 3, warmup: int = 1,
                 min_time: float = 0.0,
                 device: Optional[torch.device] = None
                 ) -> Tuple[float, float]:
    r"""Median forward and forward+backward seconds of :obj:`step_fwd`
    (forward with autograd enabled; backward of ``out.sum()`` when
    :obj:`out` requires grad), over at least :obj:`repeats` timed
    repetitions and at least :obj:`min_time` seconds (at most 200
    repetitions); on a CUDA :obj:`device`, each reading of the clock waits
    for the device."""
    if repeats < 1:
        raise ValueError(f"'repeats' must be >= 1, got {repeats}")
    fwd, fwd_bwd = [], []
    i = 0
    while i < warmup + repeats or (sum(fwd_bwd) < min_time
                                   and len(fwd_bwd) < MAX_REPEATS):
        start = _clock(device)
        out = step_fwd()
        mid = _clock(device)
        if out.requires_grad:
            out.sum().backward()
        end = _clock(device)
        del out
        if i >= warmup:
            fwd.append(mid - start)
            fwd_bwd.append(end - start)
        i += 1
    return statistics.median(fwd), statistics.median(fwd_bwd)


def alternation_times(times: Dict[str, List[float]], first: str,
                      second: str, prefixes: Sequence[str] = ()) -> Dict:
    r"""The fields of a side-by-side comparison from the timed passes of
    each setting (:obj:`times`, alternating in one process): per setting
    (named by :obj:`prefixes` when given) its passes, minimum and median,
    then the ratios :obj:`second` / :obj:`first` of the minima and of the
    medians (below 1: the second is faster)."""
    names = list(prefixes) or [first, second]
    record: Dict = {}
    for name, key in zip(names, (first, second)):
        record[f'{name}_min_s'] = min(times[key])
        record[f'{name}_median_s'] = statistics.median(times[key])
        record[f'{name}_s'] = times[key]
    record['ratio_min'] = record[f'{names[1]}_min_s'] / \
        record[f'{names[0]}_min_s']
    record['ratio_median'] = record[f'{names[1]}_median_s'] / \
        record[f'{names[0]}_median_s']
    return record


def format_alternation(record: Dict, prefixes: Sequence[str],
                       labels: Sequence[str]) -> str:
    r"""The fields of :func:`alternation_times` (settings named by
    :obj:`prefixes`, printed as :obj:`labels`) as one line."""
    sides = [f"{label} {record[f'{name}_min_s']:.3f} / "
             f"{record[f'{name}_median_s']:.3f} s"
             for name, label in zip(prefixes, labels)]
    return '  '.join(sides) + (f"  ratio {record['ratio_min']:.3f} / "
                               f"{record['ratio_median']:.3f}")


def alternate_with_references(step: Step, references: Dict[str, Step],
                              rounds: int,
                              device: Optional[torch.device] = None) -> Dict:
    r"""Times :obj:`step` alternately with the :obj:`references` (steps on
    the same input) for :obj:`rounds` rounds in this process: per round one
    forward+backward pass of :obj:`step`, then per reference the median of
    at least :data:`REFERENCE_REPEATS` passes adding up to
    :data:`REFERENCE_MIN_TIME` seconds (after one warm-up pass each). A
    slow phase of the machine then slows both sides of a round's ratio."""
    for reference in references.values():
        time_fwd_bwd(reference, repeats=1, warmup=0, device=device)
    times: Dict[str, List[float]] = {'self': []}
    for _ in range(rounds):
        times['self'].append(time_fwd_bwd(step, repeats=1, warmup=0,
                                          device=device)[1])
        for name, reference in references.items():
            times.setdefault(name, []).append(time_fwd_bwd(
                reference, REFERENCE_REPEATS, 0, REFERENCE_MIN_TIME,
                device)[1])
    record = {f'alt_{name}_s': t for name, t in times.items()}
    for name in references:
        record[f'alt_to_{name}'] = statistics.median(
            a / b for a, b in zip(times['self'], times[name]))
    return record


# ---------------------------------------------------------------- memory --
def _current_rss_kb() -> int:
    with open('/proc/self/statm') as f:
        return int(f.read().split()[1]) * os.sysconf('SC_PAGE_SIZE') // 1024


def _reset_peak_rss() -> bool:
    try:
        with open('/proc/self/clear_refs', 'w') as f:
            f.write('5')
        return True
    except OSError:
        return False


def measure_point(build: Builder, size: int, repeats: int, warmup: int,
                  min_time: float = 0.0,
                  references: Optional[Dict[str, Builder]] = None,
                  rounds: int = 0,
                  device: torch.device = torch.device('cpu'),
                  compile: Optional[str] = None) -> Dict:
    r"""Builds a point on :obj:`device` and measures it in this process
    (the child side); then, with :obj:`rounds`, times it alternately with
    the :obj:`references` built at the same size (after its peak memory is
    read: they do not enter it). With :obj:`compile` (a
    :func:`torch.compile` backend), every step runs as
    :func:`compiled_step`: its planning pass and first compiled pass
    (``compile_s``, with the compilation) and two more passes are not
    timed, and ``graphs`` counts the graphs compiled for the point (its
    references' included)."""
    torch.manual_seed(0)
    step, fields = build(size, device)
    extra: Dict = {}
    if compile:
        from torch_geometric_hot.train.compiled import compiled_graphs
        graphs = compiled_graphs()
        start = _clock(device)
        step = compiled_step(step, device, compile)
        time_fwd_bwd(step, repeats=1, warmup=0, device=device)
        extra['compile_s'] = _clock(device) - start
        warmup = max(warmup, 2)  # CUDA graphs: recorded, then replayed
    gc.collect()
    cuda = device.type == 'cuda'
    if cuda:
        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
        base_device = torch.cuda.memory_allocated(device)
    peak_reset = _reset_peak_rss()
    base_kb = _current_rss_kb()
    fwd_s, fwd_bwd_s = time_fwd_bwd(step, repeats, warmup, min_time, device)
    if cuda:
        peak_mb = (torch.cuda.max_memory_allocated(device) -
                   base_device) / 2**20
    else:
        peak_mb = max(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss -
                      base_kb, 0) / 1024
    record = dict(fields, fwd_s=fwd_s, fwd_bwd_s=fwd_bwd_s,
                  peak_mem_mb=peak_mb, base_rss_mb=base_kb / 1024,
                  peak_reset=peak_reset, load_avg=os.getloadavg()[0],
                  **extra)
    if rounds and references:
        torch.manual_seed(0)
        steps = {name: builder(size, device)[0]
                 for name, builder in references.items()}
        if compile:
            steps = {name: compiled_step(ref, device, compile)
                     for name, ref in steps.items()}
        record.update(alternate_with_references(step, steps, rounds, device))
    if compile:
        record['graphs'] = compiled_graphs() - graphs
    return record


def count_point(build: Builder, size: int) -> Dict:
    r"""Builds a point on the CPU and counts the aten operators of one
    forward and backward pass with the layout CUDA uses
    (:func:`~torch_geometric_hot.testing.cuda_layout`), the value checks
    off (as in a planned training step), after one such pass that makes
    the plans kept for the next: ``ops`` and the most frequent ``top``."""
    from torch_geometric_hot.testing import OperatorCounter, cuda_layout
    from torch_geometric_hot.validation import validation
    torch.manual_seed(0)
    step, fields = build(size, torch.device('cpu'))

    def passes() -> None:
        out = step()
        if out.requires_grad:
            out.sum().backward()

    with cuda_layout(), validation(False):
        passes()
        with OperatorCounter() as counter:
            passes()
    return dict(fields, ops=counter.total, top=counter.summary(8))


def compiled_step(step: Step, device: torch.device,
                  backend: str = 'inductor') -> Step:
    r""":obj:`step` under :func:`torch.compile` as the training command's
    ``--compile`` runs a model (``dynamic=False``; on CUDA with
    ``mode='reduce-overhead'``, which replays CUDA graphs), on the layout a
    traced graph is planned for
    (:func:`~torch_geometric_hot.ops.layout_device.traced_layout`: the
    device's, a GPU's for the CPU) with the value checks off. One eager
    forward and backward pass on that layout first makes the plans that
    the traced graph reads."""
    from torch_geometric_hot.ops.layout_device import (planned_for,
                                                       traced_layout)
    from torch_geometric_hot.train.compiled import raise_recompile_limit
    from torch_geometric_hot.validation import validation
    layout = traced_layout(device)
    with planned_for(layout):
        out = step()
        if out.requires_grad:
            out.sum().backward()
    raise_recompile_limit()
    mode = 'reduce-overhead' if device.type == 'cuda' and \
        backend == 'inductor' else None
    compiled = torch.compile(step, dynamic=False, mode=mode,
                             backend=backend)

    def run() -> Tensor:
        with planned_for(layout), validation(False):
            return compiled()

    return run


# ----------------------------------------------------------------- sweep --
def _parse(argv: Optional[Sequence[str]], name: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=f'Benchmark {name!r}: forward+backward time and peak '
        'memory of each variant, size by size, against the gather/scatter '
        'floor measured in the same run.')
    parser.add_argument('--device', default='cpu', choices=('cpu', 'cuda'),
                        help='where every point runs (default: cpu); on '
                        'cuda, peak memory is device memory')
    parser.add_argument('--out', help='write the JSON records here')
    parser.add_argument('--plot', help='write a log-log PNG here')
    parser.add_argument('--quick', action='store_true',
                        help='reduced sweep (under a minute)')
    parser.add_argument('--sizes', type=lambda s: [int(float(v))
                                                   for v in s.split(',')],
                        help='comma-separated sizes, e.g. 1e3,1e4')
    parser.add_argument('--variants', type=lambda s: s.split(','),
                        help='comma-separated variant names (floor is '
                        'always added)')
    parser.add_argument('--repeats', type=int, default=3,
                        help='timed repetitions per point, at least '
                        '(default: 3)')
    parser.add_argument('--min-time', type=float, default=None,
                        help='repeat until the timed repetitions add up to '
                        'this many seconds, at most 200 times (default 1.0, '
                        '0.25 with --quick)')
    parser.add_argument('--warmup', type=int, default=1,
                        help='untimed repetitions first (default: 1)')
    parser.add_argument('--threads', type=int, default=None,
                        help="torch intra-op threads in every point's "
                        "process (default: torch's choice)")
    parser.add_argument('--max-seconds', type=float, default=60.0,
                        help='stop a variant after a point whose '
                        'forward+backward takes longer')
    parser.add_argument('--max-mem-gb', type=float, default=12.0,
                        help='stop a variant after a point whose peak '
                        'memory exceeds this')
    parser.add_argument('--thp', action='store_true',
                        help='run every point without and with '
                        'THP_MEM_ALLOC_ENABLE=1')
    parser.add_argument('--keep-freed-memory', action='store_true',
                        help='run the points with glibc malloc keeping '
                        'freed memory (no mmap, no trimming)')
    parser.add_argument('--alternate', type=int, default=0,
                        metavar='ROUNDS',
                        help='after its measurement, time each point '
                        'alternately with the --alternate-with variants '
                        'in its process for this many rounds')
    parser.add_argument('--alternate-with', type=lambda s: s.split(','),
                        default=[FLOOR], metavar='NAMES',
                        help='comma-separated variants to alternate with '
                        '(default: floor)')
    parser.add_argument('--rounds', type=int, default=1,
                        help="run each size's points this many times over, "
                        'in turn')
    parser.add_argument('--count-ops', action='store_true',
                        help='instead of timing: count the aten operators '
                        'of one forward and backward pass with the layout '
                        'a GPU uses (on the CPU)')
    parser.add_argument('--compile', nargs='?', const='inductor',
                        default=None, metavar='BACKEND',
                        help='every step under torch.compile (BACKEND, '
                        'default inductor; on cuda with CUDA graphs) on '
                        'the layout a traced graph is planned for')
    parser.add_argument('--point', help=argparse.SUPPRESS)
    return parser.parse_args(argv)


#: glibc malloc settings of --keep-freed-memory.
KEEP_FREED_MEMORY = {'MALLOC_MMAP_MAX_': '0',
                     'MALLOC_TRIM_THRESHOLD_': str(2**31 - 1),
                     'MALLOC_TOP_PAD_': str(256 << 20)}


def child_env(thp: bool, keep_freed_memory: bool) -> Dict[str, str]:
    r"""The environment of a point's process: this one's, with exactly the
    allocator settings asked for."""
    env = dict(os.environ)
    for key in ['THP_MEM_ALLOC_ENABLE', *KEEP_FREED_MEMORY]:
        env.pop(key, None)
    if thp:
        env['THP_MEM_ALLOC_ENABLE'] = '1'
    if keep_freed_memory:
        env.update(KEEP_FREED_MEMORY)
    return env


def _run_child(point: Dict, thp: bool, timeout: float,
               keep_freed_memory: bool = False) -> Dict:
    env = child_env(thp, keep_freed_memory)
    cmd = [sys.executable, os.path.abspath(sys.argv[0]), '--point',
           json.dumps(point)]
    start = time.perf_counter()
    try:
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True,
                              timeout=timeout)
    except subprocess.TimeoutExpired:
        return dict(status='timeout', wall_s=time.perf_counter() - start)
    wall_s = time.perf_counter() - start
    lines = [line for line in proc.stdout.splitlines()
             if line.startswith('{')]
    if proc.returncode != 0 or not lines:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        return dict(status=f'failed (exit {proc.returncode})',
                    error=' | '.join(tail), wall_s=wall_s)
    return dict(json.loads(lines[-1]), status='ok', wall_s=wall_s)


def run_benchmark(name: str, sizes: Sequence[int],
                  variants: Dict[str, Builder],
                  argv: Optional[Sequence[str]] = None,
                  size_key: str = 'n_edges', floor: Optional[Builder] = None,
                  quick_sizes: Optional[Sequence[int]] = None) -> List[Dict]:
    r"""Runs the sweep (see the module docstring) and returns the records.

    In the child (``--point``), measures one point, prints its JSON record
    and exits.
    """
    args = _parse(argv, name)
    builders = dict(variants)
    builders[FLOOR] = floor or (lambda size, device: (
        bandwidth_floor(size, device=device), {size_key: size}))
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.point:
        point = json.loads(args.point)
        torch.set_num_threads(point['threads'])
        if point.get('count_ops'):
            print(json.dumps(count_point(builders[point['variant']],
                                         point['size'])))
            sys.exit(0)
        references = {name: builders[name]
                      for name in point.get('alternate_with', [])
                      if name != point['variant']}
        record = measure_point(builders[point['variant']], point['size'],
                               point['repeats'], point['warmup'],
                               point['min_time'], references,
                               point.get('alternate', 0),
                               torch.device(point.get('device', 'cpu')),
                               point.get('compile'))
        print(json.dumps(dict(record, threads=torch.get_num_threads())))
        sys.exit(0)

    sizes = args.sizes or (quick_sizes if args.quick and quick_sizes else
                           sizes)
    if args.min_time is None:
        args.min_time = 0.25 if args.quick else 1.0
    names = [v for v in builders if v != FLOOR]
    if args.variants:
        unknown = set(args.variants) - set(builders)
        if unknown:
            raise SystemExit(f'unknown variants {sorted(unknown)}; '
                             f'choose from {sorted(builders)}')
        names = [v for v in names if v in args.variants]
    unknown = set(args.alternate_with) - set(builders)
    if unknown:
        raise SystemExit(f'unknown variants to alternate with '
                         f'{sorted(unknown)}; choose from {sorted(builders)}')
    if args.device == 'cuda' and not torch.cuda.is_available():
        raise SystemExit("'--device cuda' was asked for but torch sees no "
                         "CUDA device")
    common = dict(benchmark=name, device=args.device,
                  versions=software_versions(),
                  threads=args.threads or torch.get_num_threads(),
                  machine=platform.machine(),
                  allocator='keep' if args.keep_freed_memory else 'default',
                  compile=args.compile)
    if args.rounds < 1:
        raise SystemExit(f"'--rounds' must be >= 1, got {args.rounds}")
    if args.count_ops:
        if args.compile:
            raise SystemExit("'--count-ops' counts eager passes; it does "
                             "not take '--compile'")
        return _count_sweep(args, sizes, names, common)
    records, floor_times, stopped = [], {}, set()
    done: Dict[Tuple[str, int, bool], int] = {}  # rounds run per point
    for size, thp, variant in schedule(
            sizes, [FLOOR] + names, [False, True] if args.thp else [False],
            args.rounds):
        if (variant, thp) in stopped:
            continue
        point = dict(variant=variant, size=size, repeats=args.repeats,
                     warmup=args.warmup, min_time=args.min_time,
                     threads=common['threads'], device=args.device,
                     alternate=0 if variant == FLOOR else args.alternate,
                     alternate_with=args.alternate_with,
                     compile=args.compile)
        record = dict(common, variant=variant, size=size, thp=thp,
                      round=done.get((variant, size, thp), 0))
        done[(variant, size, thp)] = record['round'] + 1
        timeout = (args.repeats + args.warmup + 2 + 2 * args.alternate) * \
            args.max_seconds + 300  # + start-up and set-up
        record.update(_run_child(point, thp, timeout,
                                 args.keep_freed_memory))
        floor_s = floor_times.get((size, thp))
        if variant == FLOOR:  # this round's floor (none when it failed)
            floor_times.pop((size, thp), None)
            if record['status'] == 'ok':
                floor_times[(size, thp)] = record['fwd_bwd_s']
        elif record['status'] == 'ok' and floor_s:
            record['time_to_floor'] = record['fwd_bwd_s'] / floor_s
        records.append(record)
        if args.out:  # so far: a run stopped from outside keeps its points
            write_json(args.out, records)
        print(format_table([record], size_key, header=len(records) == 1),
              flush=True)
        if (record['status'] != 'ok'
                or record['fwd_bwd_s'] > args.max_seconds
                or record['peak_mem_mb'] > 1024 * args.max_mem_gb):
            print(f'  -> stopping {variant} (thp={thp}) after {size}: '
                  f'{record["status"]}, limits {args.max_seconds}s / '
                  f'{args.max_mem_gb} GB {record.get("error", "")}')
            stopped.add((variant, thp))
    summary = summarize(records, size_key)
    print()
    print(format_summary(summary))
    if args.out:
        write_json(args.out, records)
        write_json(os.path.splitext(args.out)[0] + '_summary.json', summary)
        print(f'wrote {args.out}')
    if args.plot or args.out:
        path = args.plot or os.path.splitext(args.out)[0] + '.png'
        plot(records, path, size_key)
        print(f'wrote {path}')
    return records


def _count_sweep(args: argparse.Namespace, sizes: Sequence[int],
                 names: Sequence[str], common: Dict) -> List[Dict]:
    # --count-ops: every point counted in a process of its own
    records = []
    print(f'aten operators of one forward and backward pass, CUDA layout, '
          f'counted on the CPU (second pass)\n{"variant":<18} {"size":>9} '
          f'{"operators":>10}')
    for size in sizes:
        for variant in names:
            point = dict(variant=variant, size=size, count_ops=True,
                         threads=common['threads'])
            record = dict(common, variant=variant, size=size,
                          layout='cuda', **_run_child(
                              point, False, 60 * args.max_seconds + 300))
            if record['status'] == 'ok':  # counts, no timing to summarise
                record['status'] = 'counted'
            records.append(record)
            if args.out:
                write_json(args.out, records)
            print(f'{variant:<18} {size:>9} '
                  f'{record.get("ops", record["status"])!s:>10}',
                  flush=True)
    if args.out:
        write_json(args.out, records)
        print(f'wrote {args.out}')
    return records


def schedule(sizes: Sequence[float], variants: Sequence[str],
             thps: Sequence[bool],
             rounds: int = 1) -> List[Tuple[int, bool, str]]:
    r"""The order of a run's points, as (size, thp, variant): size by size
    from the smallest, :obj:`rounds` times over, each size's huge-page
    settings in turn, each setting's variants in the given order (the
    floor first). The variants of one size then run minutes apart, not a
    whole sweep apart: this machine's speed drifts by up to 1.6x within
    minutes, and ratios between variants are read at one size."""
    return [(int(size), thp, variant) for size in sorted(sizes)
            for _ in range(rounds) for thp in thps for variant in variants]


def write_json(path: str, obj) -> None:
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, 'w') as f:
        json.dump(obj, f, indent=1)


# --------------------------------------------------------------- summary --
def loglog_slope(x: Sequence[float], y: Sequence[float]) -> float:
    r"""Least-squares slope of ``log y`` against ``log x`` (NaN with fewer
    than two usable points; non-positive values are dropped)."""
    pairs = [(a, b) for a, b in zip(x, y) if a > 0 and b > 0]
    if len({a for a, _ in pairs}) < 2:
        return float('nan')
    lx, ly = np.log([a for a, _ in pairs]), np.log([b for _, b in pairs])
    return float(np.polyfit(lx, ly, 1)[0])


def _ok(records: List[Dict]) -> List[Dict]:
    return [r for r in records if r.get('status', 'ok') == 'ok']


def round_medians(records: List[Dict]) -> List[Dict]:
    r"""One record per (variant, thp, size): a point measured in several
    rounds becomes its first round's record with the medians over its
    rounds of ``fwd_s``, ``fwd_bwd_s``, ``peak_mem_mb``, ``time_to_floor``
    and ``alt_*`` ratios, and ``rounds`` (their number); a point of one
    round is kept as it is."""
    groups: Dict[Tuple, List[Dict]] = {}
    for r in records:
        groups.setdefault((r['variant'], r.get('thp', False), r['size']),
                          []).append(r)
    merged = []
    for rows in groups.values():
        if len(rows) == 1:
            merged.append(rows[0])
            continue
        record = dict(rows[0], rounds=len(rows))
        for key in rows[0]:
            if key in ('fwd_s', 'fwd_bwd_s', 'peak_mem_mb',
                       'time_to_floor') or key.startswith('alt_to_'):
                values = [r[key] for r in rows if key in r]
                record[key] = statistics.median(values)
        merged.append(record)
    return merged


def summarize(records: List[Dict], size_key: str = 'n_edges') -> List[Dict]:
    r"""Per (variant, thp): memory and time log–log slopes against
    :obj:`size_key`, and the time-to-floor ratio (``fwd_bwd_s`` divided by
    the floor's at the same requested ``size``; with rounds, the median of
    each round's ``time_to_floor``) min/max/spread, and that of
    ``alt_to_floor`` where recorded (``alt_ratio_*``), over all sizes and
    (suffix ``_top``) over the top two decades (``>= max/100``)."""
    ok = round_medians(_ok(records))
    floor = {(r['size'], r.get('thp', False)): r['fwd_bwd_s'] for r in ok
             if r['variant'] == FLOOR}
    groups: Dict[Tuple[str, bool], List[Dict]] = {}
    for r in ok:
        groups.setdefault((r['variant'], r.get('thp', False)), []).append(r)
    summary = []
    for (variant, thp), rows in groups.items():
        rows = sorted(rows, key=lambda r: r[size_key])
        top = [r for r in rows if r[size_key] >= rows[-1][size_key] / 100]
        entry = dict(variant=variant, thp=thp, points=len(rows),
                     size_min=rows[0][size_key], size_max=rows[-1][size_key])
        for key, subset in (('', rows), ('_top', top)):
            xs = [r[size_key] for r in subset]
            entry['mem_slope' + key] = loglog_slope(
                xs, [r['peak_mem_mb'] for r in subset])
            entry['time_slope' + key] = loglog_slope(
                xs, [r['fwd_bwd_s'] for r in subset])
            ratios = [r.get('time_to_floor',
                            r['fwd_bwd_s'] / floor[(r['size'], thp)])
                      for r in subset if (r['size'], thp) in floor]
            alternating = [r['alt_to_floor'] for r in subset
                           if 'alt_to_floor' in r]
            for name, values in (('ratio', ratios),
                                 ('alt_ratio', alternating)):
                if values:
                    entry[f'{name}_min{key}'] = min(values)
                    entry[f'{name}_max{key}'] = max(values)
                    entry[f'{name}_spread{key}'] = max(values) / min(values)
        summary.append(entry)
    return summary


def _fmt(value) -> str:
    if isinstance(value, float):
        if value != value:  # NaN
            return 'nan'
        return f'{value:.4g}'
    return str(value)


def format_table(records: List[Dict], size_key: str = 'n_edges',
                 header: bool = True) -> str:
    r"""A fixed-width table of records (one line each)."""
    cols = ['variant', 'thp', 'size', 'n_nodes', size_key, 'fwd_s',
            'fwd_bwd_s', 'time_to_floor', 'alt_to_floor', 'peak_mem_mb',
            'load_avg', 'status']
    cols = list(dict.fromkeys(cols))
    widths = [max(len(c), 12) for c in cols]
    widths[0] = 24
    lines = []
    if header:
        lines.append(' '.join(c.rjust(w) for c, w in zip(cols, widths)))
    for r in records:
        lines.append(' '.join(
            _fmt(r.get(c, '-')).rjust(w) for c, w in zip(cols, widths)))
    return '\n'.join(lines)


def format_summary(summary: List[Dict]) -> str:
    r"""The summary as a table (slopes and time-to-floor ratios)."""
    cols = ['variant', 'thp', 'points', 'mem_slope', 'mem_slope_top',
            'time_slope', 'time_slope_top', 'ratio_min', 'ratio_max',
            'ratio_spread', 'ratio_spread_top', 'alt_ratio_spread',
            'alt_ratio_spread_top']
    lines = [' '.join(c.rjust(24 if i == 0 else 14)
                      for i, c in enumerate(cols))]
    for s in summary:
        lines.append(' '.join(
            _fmt(s.get(c, '-')).rjust(24 if i == 0 else 14)
            for i, c in enumerate(cols)))
    return '\n'.join(lines)


def plot(records: List[Dict], path: str, size_key: str = 'n_edges') -> None:
    r"""Log–log plot of ``fwd_bwd_s`` and ``peak_mem_mb`` per variant."""
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    groups: Dict[str, List[Dict]] = {}
    for r in round_medians(_ok(records)):
        label = r['variant'] + (' +THP' if r.get('thp') else '')
        groups.setdefault(label, []).append(r)
    for label, rows in groups.items():
        rows = sorted(rows, key=lambda r: r[size_key])
        xs = [r[size_key] for r in rows]
        style = '--' if label.startswith(FLOOR) else '-'
        axes[0].loglog(xs, [r['fwd_bwd_s'] for r in rows], style + 'o',
                       label=label)
        axes[1].loglog(xs, [max(r['peak_mem_mb'], 1e-2) for r in rows],
                       style + 'o', label=label)
    bench = records[0]['benchmark'] if records else ''
    for ax, ylabel in zip(axes, ['forward+backward [s]', 'peak memory [MB]']):
        ax.set_xlabel(size_key)
        ax.set_ylabel(ylabel)
        ax.grid(True, which='both', alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(bench)
    fig.tight_layout()
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
