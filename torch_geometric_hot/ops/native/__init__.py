r"""Optional native kernels for kernel and softmax attention, compiled from
the C sources next to this file at first use, one per family of kernels
(``kernel_attention.c``, ``class_combination.c``, ``feature_maps.c``,
``direct_readings.c``, ``pair_entries.c``, ``grouped_softmax.c``; each
source's header says what it computes), bound here with :mod:`ctypes`.

The sources are plain C11 without torch headers. At first use they are
compiled with the system C compiler (``$CC`` or ``cc``), one object per
source side by side, and linked into
``~/.cache/torch_geometric_hot/native`` (or ``$TORCH_GEOMETRIC_HOT_CACHE``)
under a name that hashes the sources, the flags, the compiler and the
processor (``-march=native`` code is only valid on the CPU it was built
for); the library is loaded with :mod:`ctypes`. A cold build lasts as long
as the slowest source where there are enough cores (about 10 s on two);
later processes load the cached library. When no compiler is found or the
build fails, the pure-torch path is used and a warning says why.

The choice can be forced with the environment variable
``TORCH_GEOMETRIC_HOT_NATIVE`` (``"auto"``: use the kernels when they build;
``"off"``; ``"on"``: fail when they do not build) or, at run time, with
:func:`use_native` (per thread). The kernels run on contiguous
float32/float64 CPU tensors inside the package's
:func:`torch.library.custom_op` operators (anything else takes their
torch implementation), in compiled graphs too. Every
binding splits its work across ``torch.get_num_threads()`` threads through
:func:`_split_rows`, as its docstring says.
"""
import contextlib
import contextvars
import ctypes
import hashlib
import os
import pathlib
import platform
import shutil
import subprocess
import tempfile
import threading
import warnings
from concurrent.futures import ThreadPoolExecutor
from typing import (Callable, Dict, Iterator, List, NamedTuple, Optional,
                    Sequence, Tuple)

import torch
from torch import Tensor

from torch_geometric_hot.ops.native.workspace import (  # noqa: F401
    Scratch, release_workspace, workspace)

_HERE = os.path.dirname(os.path.abspath(__file__))
_SOURCES = [os.path.join(_HERE, name)
            for name in ('kernel_attention.c', 'class_combination.c',
                         'feature_maps.c', 'direct_readings.c',
                         'pair_entries.c', 'grouped_softmax.c')]
_FLAGS = [['-O3', '-march=native'], ['-O3']]  # the second if the first fails
_COMMON = ['-std=gnu11', '-fopenmp-simd', '-fPIC']
_LIBRARIES = ['-lm']
_MODES = ('auto', 'on', 'off')
_STATUS = ctypes.c_int  # -1: out of memory for the kernel's scratch, else 0
_COMBINE = 'i' * 7 + 'p' * 12 + 'r'  # sizes; 12 tables and sources; eps
#: Every kernel: its arguments (p: pointer, i: int64, r: the real type) and
#: result type.
_FUNCTIONS = {
    'outer_sum': ('p' * 6 + 'i' * 9, _STATUS),
    'contract': ('p' * 6 + 'i' * 5, _STATUS),
    'contract_backward': ('p' * 8 + 'i' * 8, _STATUS),
    'outer_sum_backward': ('p' * 8 + 'i' * 7, _STATUS),
    'direct_read': ('p' * 12 + 'i' * 7, _STATUS),
    'direct_read_backward': ('p' * 15 + 'i' * 7, _STATUS),
    'direct_max_keys': ('', ctypes.c_int64),
    'grouped_softmax': ('p' * 12 + 'i' * 14, _STATUS),
    'grouped_softmax_backward': ('p' * 16 + 'i' * 14, _STATUS),
    'combine': (_COMBINE + 'pp', None),  # then the outputs
    'combine_backward': (_COMBINE + 'p' * 7, None),
    # FAVOR+: data, rows, d, r (, shift flag), scale of x (, log-scale)
    'favor_logits': ('p' * 4 + 'i' * 4 + 'rr', _STATUS),
    'favor_shift': ('pp' + 'ii', None),
    'favor_backward': ('p' * 5 + 'iii' + 'r', _STATUS),
    'pair_gather': ('p' * 6 + 'iii', None),  # 6 arrays, 3 sizes
    'pair_scatter': ('p' * 6 + 'iii', None),
}


def _mode(name: str) -> str:
    if name not in _MODES:
        raise ValueError(f"TORCH_GEOMETRIC_HOT_NATIVE must be one of "
                         f"{_MODES}, got {name!r}")
    return name


_state = {'mode': _mode(os.environ.get('TORCH_GEOMETRIC_HOT_NATIVE',
                                       'auto')),
          'library': None, 'error': None}
# use_native's mode, per thread and context (None: the process's mode)
_mode_override: contextvars.ContextVar[Optional[str]] = \
    contextvars.ContextVar('torch_geometric_hot_native', default=None)


def _current_mode() -> str:
    r"""The native mode in force in this thread (see :func:`use_native`)."""
    mode = _mode_override.get()
    return _state['mode'] if mode is None else mode


def _cache_dir() -> str:
    root = os.environ.get('TORCH_GEOMETRIC_HOT_CACHE') or os.path.join(
        os.path.expanduser('~'), '.cache', 'torch_geometric_hot')
    path = os.path.join(root, 'native')
    try:
        os.makedirs(path, exist_ok=True)
    except OSError:
        path = os.path.join(tempfile.gettempdir(), 'torch_geometric_hot',
                            'native')
        os.makedirs(path, exist_ok=True)
    return path


def _compiler() -> Optional[str]:
    return shutil.which(os.environ.get('CC', 'cc')) or shutil.which('gcc')


def _cpu_signature() -> str:
    r"""The processor the kernels are built for: ``-march=native`` code
    built on one CPU may use instructions another lacks (a home directory
    shared across machines must not hand it over)."""
    try:
        with open('/proc/cpuinfo') as f:
            lines = [line for line in f
                     if line.startswith(('model name', 'flags'))]
        return ''.join(sorted(set(lines)))
    except OSError:
        return platform.processor()


def _run(command: List[str]) -> subprocess.CompletedProcess:
    return subprocess.run(command, capture_output=True, text=True)


def _compile(compiler: str, flags: List[str], sources: Sequence[str],
             target: str) -> Optional[str]:
    # one object per source, compiled side by side (a cold build is as long
    # as its slowest source on enough cores), then linked into `target`;
    # returns the compiler's error, or None
    with tempfile.TemporaryDirectory(dir=os.path.dirname(target)) as folder:
        objects = [os.path.join(folder, f'{i}.o') for i in range(len(sources))]
        with ThreadPoolExecutor(min(len(sources), os.cpu_count() or 1)) \
                as pool:
            results = list(pool.map(_run, [
                [compiler, *flags, *_COMMON, '-c', source, '-o', obj]
                for source, obj in zip(sources, objects)]))
        partial = os.path.join(folder, 'kernels.so')
        for result in results:
            if result.returncode != 0:
                return result.stderr
        result = _run([compiler, *flags, '-shared', '-o', partial, *objects,
                       *_LIBRARIES])
        if result.returncode != 0:
            return result.stderr
        os.replace(partial, target)  # atomic: concurrent builds agree
    return None


def _build() -> ctypes.CDLL:
    compiler = _compiler()
    if compiler is None:
        raise RuntimeError('no C compiler found ($CC, cc or gcc)')
    source = b''.join(pathlib.Path(path).read_bytes() for path in _SOURCES)
    version = _run([compiler, '--version']).stdout
    target_cpu = (platform.machine(), _cpu_signature())
    errors = []
    for flags in _FLAGS:
        key = hashlib.sha256(source + repr((flags, version, *target_cpu))
                             .encode()).hexdigest()[:16]
        target = os.path.join(_cache_dir(), f'kernels_{key}.so')
        if not os.path.exists(target):
            error = _compile(compiler, flags, _SOURCES, target)
            if error is not None:
                errors.append(error.strip()[-500:])
                continue
        return ctypes.CDLL(target)
    raise RuntimeError('compiling the native kernels failed:\n' +
                       '\n'.join(errors))


def _declare(library: ctypes.CDLL) -> ctypes.CDLL:
    for suffix, real in (('f32', ctypes.c_float), ('f64', ctypes.c_double)):
        types = {'p': ctypes.c_void_p, 'i': ctypes.c_int64, 'r': real}
        for name, (arguments, result) in _FUNCTIONS.items():
            function = getattr(library, f'{name}_{suffix}')
            function.argtypes = [types[a] for a in arguments]
            function.restype = result
    return library


def library() -> Optional[ctypes.CDLL]:
    r"""The compiled kernels (built at the first call), or :obj:`None` when
    they are switched off or cannot be built."""
    mode = _current_mode()
    if mode == 'off':
        return None
    if _state['library'] is None and _state['error'] is None:
        try:
            _state['library'] = _declare(_build())
        except (OSError, RuntimeError) as error:
            _state['error'] = error
            if mode == 'auto':
                warnings.warn(f'torch_geometric_hot: native kernels '
                              f'unavailable, using torch ({error})')
    if _state['library'] is None and mode == 'on':
        raise RuntimeError(f"TORCH_GEOMETRIC_HOT_NATIVE='on' but the native "
                           f"kernels are unavailable: {_state['error']}")
    return _state['library']


def available() -> bool:
    r"""Whether the native kernels are switched on and built."""
    return library() is not None


@contextlib.contextmanager
def use_native(mode: str) -> Iterator[bool]:
    r"""Temporarily set the native mode (``"auto"``, ``"on"`` or ``"off"``)
    in this thread (a :mod:`contextvars` variable: other threads keep
    theirs); yields whether the kernels are in use."""
    token = _mode_override.set(_mode(mode))
    try:
        yield available()
    finally:
        _mode_override.reset(token)


def applies(*tensors: Tensor) -> bool:
    r"""Whether the native kernels take these tensors (CPU float32/float64,
    kernels available)."""
    dtype = tensors[0].dtype
    if dtype not in (torch.float32, torch.float64) or any(
            t.device.type != 'cpu' or t.dtype != dtype for t in tensors):
        return False
    return available()


class Runs(NamedTuple):
    r"""The order in which a summary kernel visits rows: :obj:`rows[t]` is
    the data row of visit :obj:`t` and :obj:`groups[t]` its group (sorted,
    so the visits of a group form a run). The same rows with a pointer per
    group instead of a group per visit are :class:`Groups`
    (:meth:`Groups.of`), what the kernels that index by group read."""
    rows: Tensor
    groups: Tensor

    def through(self, position: Tensor) -> 'Runs':
        r"""The same visits reading data row :obj:`position[e]` for row
        :obj:`e` (positions checked by the caller)."""
        # the kernels read int64
        return Runs(position.long().index_select(0, self.rows), self.groups)


def runs(index: Tensor, num_groups: int) -> Runs:
    r"""The visits of the rows grouped by :obj:`index`. Checks the groups,
    which the kernels use as memory offsets."""
    index = index.contiguous()
    if index.numel() and (int(index.min()) < 0
                          or int(index.max()) >= num_groups):
        raise IndexError(f'group index out of range [0, {num_groups})')
    if num_groups == 1:
        order = torch.arange(index.numel(), device=index.device)
        groups = index
    else:
        order = torch.argsort(index, stable=True)
        groups = index.index_select(0, order)
    return Runs(order, groups)


class Groups(NamedTuple):
    r"""Rows listed group by group: group :obj:`g` holds
    :obj:`rows[ptr[g]:ptr[g + 1]]`."""
    rows: Tensor
    ptr: Tensor

    @staticmethod
    def of(runs: Runs, num_groups: int) -> 'Groups':
        r"""The visits of :obj:`runs` as groups."""
        counts = torch.bincount(runs.groups, minlength=num_groups)
        return Groups(runs.rows, torch.cat([counts.new_zeros(1),
                                            counts.cumsum(0)]))


def _function(name: str, dtype: torch.dtype):
    # The built library whatever the current mode: a backward pass runs
    # the kernels its forward pass ran, even after use_native('off').
    if _state['library'] is None:
        library()
    suffix = 'f32' if dtype == torch.float32 else 'f64'
    return getattr(_state['library'], f'{name}_{suffix}')


def _ptr(t: Optional[Tensor]) -> Optional[int]:
    return None if t is None else t.data_ptr()


def _pointers(tensors: Sequence[Optional[Tensor]]) -> ctypes.Array:
    return (ctypes.c_void_p * max(len(tensors), 1))(
        *[None if t is None else t.data_ptr() for t in tensors])


def _row(t: Tensor, row: int, width: int) -> int:
    # the address of row `row` of a contiguous tensor of rows `width` long
    return t.data_ptr() + row * width * t.element_size()


#: Rows below which a kernel call is not split across threads.
MIN_ROWS_PER_THREAD = 4096
#: ... or, for calls that weigh their rows (the direct readings' groups,
#: see :data:`QUERY_COST`), total cost: a group of ten keys and twenty
#: queries costs 840, so that 1,000 such groups (10^4 edges) are split,
#: which 4,096 rows would not be.
MIN_COST_PER_THREAD = 1 << 16
_executors: Dict[Tuple[int, int], ThreadPoolExecutor] = {}


#: Segments per thread of the calls that may split finely (their parts
#: need no gradient blocks of their own): the threads take them in turn
#: as they finish, so a thread that runs slower (a busy virtual CPU) does
#: fewer.
SEGMENTS_PER_THREAD = 4


def _split_rows(run, rows: int, name: Optional[str] = None,
                split: bool = True, costs: Optional[Tensor] = None,
                fine: bool = False,
                bounds: Optional[Callable[[int], List[int]]] = None) -> None:
    # The one thread splitter of the kernels: run(start, stop) over rows,
    # split across threads (unless split is False) into equal numbers of
    # rows, or, with costs [rows], equal total costs, or at the split
    # points bounds(threads) gives; fine: SEGMENTS_PER_THREAD segments per
    # thread; with a name, run returns the kernel's status
    threads = min(torch.get_num_threads(), rows // MIN_ROWS_PER_THREAD) \
        if costs is None else min(torch.get_num_threads(), rows,
                                  int(costs.sum()) // MIN_COST_PER_THREAD)
    if threads <= 1 or not split:
        statuses = [run(0, rows)]
    else:
        parts = min(rows, threads * SEGMENTS_PER_THREAD) if fine else threads
        statuses = _in_threads(run, bounds(parts) if bounds is not None else
                               [rows * t // parts for t in range(parts + 1)]
                               if costs is None else
                               _balanced_bounds(costs, parts), threads)
    # the kernels return a negative status when their scratch is not had
    if name is not None and any(status < 0 for status in statuses):
        raise MemoryError(f'native {name}: out of memory for its scratch')


def _balanced_bounds(costs: Tensor, threads: int) -> List[int]:
    # split points of rows with these costs into `threads` consecutive
    # parts of about equal total cost (no part empty)
    total = costs.double().cumsum(0)
    targets = total[-1] * torch.arange(1, threads, dtype=torch.double) / \
        threads
    inner = torch.searchsorted(total, targets, right=True).tolist()
    return sorted({0, costs.numel(), *(min(max(b, 1), costs.numel() - 1)
                                       for b in inner)})


def _in_threads(run, bounds: List[int],
                threads: Optional[int] = None) -> list:
    # run(start, stop) for consecutive bounds on a shared pool of `threads`
    # (default: one per segment; ctypes releases the GIL: the segments run
    # in parallel), each thread taking the next segment when it is done
    threads = threads or len(bounds) - 1
    key = (os.getpid(), threads)  # a forked child starts its own pool
    if key not in _executors:
        _executors[key] = ThreadPoolExecutor(threads)
    return list(_executors[key].map(run, bounds[:-1], bounds[1:]))


def _segments(groups: Tensor, threads: int) -> List[int]:
    # Split points of the visits, each at the start of a group, so that no
    # two threads write the same summary block.
    targets = torch.arange(1, threads, device=groups.device) * \
        groups.numel() // threads
    starts = torch.searchsorted(groups, groups.index_select(0, targets))
    return sorted({0, groups.numel(), *starts.tolist()})


def _may_split_adds(rows: Tensor) -> bool:
    # whether a kernel that adds to data rows may split its work across
    # threads: more than one thread, and no row listed twice (two threads
    # would add to it at once)
    return torch.get_num_threads() > 1 and bool(
        (torch.bincount(rows) <= 1).all())


class Partials:
    r"""Tensors that the parts of a split would all add to: the first part
    adds to them, each other part to zeroed blocks of its own (made by
    :obj:`zeros`, under a lock: a workspace is not thread-safe), added to
    them after the split (:meth:`add`). With :obj:`per_thread`, the parts
    that one thread runs share its blocks: for kernels that add to them
    (not write), and then several splits may share one set (parts that
    run at once run on different threads)."""
    def __init__(self, targets: Sequence[Tensor],
                 zeros: Callable[[Tensor], Tensor] = torch.zeros_like,
                 per_thread: bool = False) -> None:
        self.targets, self.zeros = list(targets), zeros
        self.per_thread = per_thread
        self.blocks: Dict[object, List[Tensor]] = {}
        self.lock = threading.Lock()

    def take(self, start: int) -> List[Tensor]:
        r"""What the part starting at row :obj:`start` adds to."""
        if start == 0:
            return self.targets
        with self.lock:
            owner = threading.get_ident() if self.per_thread else \
                len(self.blocks)
            if owner not in self.blocks:
                self.blocks[owner] = [self.zeros(t) for t in self.targets]
            return self.blocks[owner]

    def add(self) -> None:
        r"""Adds the other parts' blocks to the targets."""
        for blocks in self.blocks.values():
            for target, block in zip(self.targets, blocks):
                target.add_(block)


def _call(name: str, dtype: torch.dtype, runs: Runs,
          before: Sequence[Tensor], after: Sequence[Optional[Tensor]],
          integers: Sequence[int], num_groups: Optional[int] = None,
          split: bool = True, written: Optional[int] = None) -> None:
    # The kernel's arguments: the tensors before the runs, the runs, the
    # tensors after them (None: NULL), the number of visits, the integers.
    # With num_groups, the kernel writes summary blocks, is told the groups
    # it owns (g_lo, g_hi) and splits at group starts (one writer per
    # block), or, one group with its blocks after[written], anywhere, each
    # part past the first writing blocks of its own (Partials); the others
    # split anywhere. split=False: one thread (the kernel adds to rows
    # that several runs may share).
    function = _function(name, dtype)
    visits = runs.rows.numel()
    partial = Partials([after[written]]) if num_groups == 1 and \
        written is not None and after[written] is not None else None
    before, after = [t.data_ptr() for t in before], [_ptr(t) for t in after]

    def run(start: int, stop: int) -> int:
        owned = [] if num_groups is None else [
            0 if start == 0 else int(runs.groups[start]),
            num_groups if stop == visits else int(runs.groups[stop])]
        pointers = list(after)
        if partial is not None:
            pointers[written] = partial.take(start)[0].data_ptr()
        return function(*before, runs.rows[start:].data_ptr(),
                        runs.groups[start:].data_ptr(), *pointers,
                        stop - start, *integers, *owned)

    split_anywhere = num_groups is None or partial is not None
    _split_rows(run, visits, name, split, bounds=None if split_anywhere else
                lambda threads: _segments(runs.groups, threads))
    if partial is not None:
        partial.add()


def outer_sum(k: Tensor, v: Tensor, runs: Runs, num_groups: int,
              head_stride: int, columns: Tensor, ones: bool,
              out: Optional[Tensor] = None) -> Tensor:
    r"""Summaries :obj:`[G, H, R, C]` of the visited rows:
    :obj:`S[g, h] = sum k[row, h] b^T` with :obj:`b = v[row, h * head_stride
    + columns]` (then 1 when :obj:`ones`), :obj:`k [rows, H, R]`,
    :obj:`v [rows, L]` (both contiguous), :obj:`columns` long; written to
    :obj:`out` (contiguous) when given."""
    (_, H, R), C = k.shape, columns.numel() + ones
    if out is None:
        out = k.new_empty(num_groups, H, R, C)  # written by the kernel
    _call('outer_sum', k.dtype, runs, [k, v], [columns, out],
          [H, R, C, v.size(1), head_stride, int(ones)], num_groups, written=1)
    return out


def outer_sum_backward(k: Tensor, v: Tensor, grad: Tensor, runs: Runs,
                       head_stride: int, columns: Tensor, ones: bool,
                       grad_k: Optional[Tensor], grad_v: Optional[Tensor]
                       ) -> None:
    r"""Adds the gradients of :func:`outer_sum` with respect to :obj:`k` and
    :obj:`v` to :obj:`grad_k` and :obj:`grad_v` (laid out as :obj:`k`,
    :obj:`v`; each skipped when :obj:`None`), in one pass over the rows
    (split across threads only when no data row is visited twice: two
    threads would add to it at once)."""
    (_, H, R), C = k.shape, grad.size(-1)
    grad = grad.contiguous()
    split = _may_split_adds(runs.rows)
    _call('outer_sum_backward', k.dtype, runs, [k, v, grad],
          [columns, grad_k, grad_v],
          [H, R, C, v.size(1), head_stride, int(ones)], split=split)


def reads_every_column(columns: Tensor, num_columns: int) -> bool:
    r"""Whether a reading of :obj:`columns` covers all :obj:`num_columns`
    columns of its summary (then its gradient can be written, not added)."""
    return columns.unique().numel() == num_columns


def contract(q: Tensor, summary: Tensor, runs: Runs, columns: Tensor,
             out: Optional[Tensor] = None) -> Tensor:
    r""":obj:`[E, H, C']` readings :math:`q_e^\top S_{g(e)}[:, \text{columns}]`
    (the runs visit every row of :obj:`q` once; :obj:`columns` long, in
    range), written to :obj:`out` (contiguous) when given."""
    q, summary = q.contiguous(), summary.contiguous()
    (E, H, R), C = q.shape, summary.size(-1)
    if out is None:
        out = q.new_empty(E, H, columns.numel())
    _call('contract', q.dtype, runs, [q, summary], [columns, out],
          [H, R, C, columns.numel()])
    return out


def contract_backward(q: Tensor, summary: Tensor, grad: Tensor, runs: Runs,
                      columns: Tensor, grad_q: Optional[Tensor],
                      grad_summary: Optional[Tensor], add_q: bool = False,
                      add_summary: bool = False) -> None:
    r"""Gradients of :func:`contract` with respect to :obj:`q` and
    :obj:`summary` (contiguous buffers shaped as them, each skipped when
    :obj:`None`), written or, with :obj:`add_q` / :obj:`add_summary`, added
    to, in one pass over the rows. Only the read :obj:`columns` of
    :obj:`grad_summary` are written: leaving some out needs
    :obj:`add_summary`."""
    q, summary, grad = q.contiguous(), summary.contiguous(), grad.contiguous()
    (_, H, R), C = q.shape, summary.size(-1)
    if grad_summary is not None and not add_summary and \
            not reads_every_column(columns, C):
        raise ValueError('a reading of some columns adds to the summary '
                         'gradient (add_summary=True)')
    _call('contract_backward', q.dtype, runs, [q, summary, grad],
          [columns, grad_q, grad_summary],
          [H, R, C, columns.numel(), int(add_q) + 2 * int(add_summary)],
          summary.size(0), written=2)


class CombinationTable(NamedTuple):
    r"""The terms of a part's classes as flat :obj:`long` tables (class
    :obj:`c` owns terms :obj:`start[c]:start[c + 1]`; see
    :mod:`torch_geometric_hot.ops.class_combination`)."""
    start: Tensor
    kind: Tensor
    sign: Tensor
    src: Tensor
    offset: Tensor


def _combine_args(table: CombinationTable, readings, widths: Tensor,
                  q: Tensor, k: Tensor, positions, values: Tensor,
                  slots: Sequence[int], nonempty: Tensor, eps: float,
                  start: int, stop: int) -> list:
    # the leading arguments of the combination kernels for rows
    # start..stop: every per-row input from there on (keys and values are
    # gathered by position: whole)
    return [stop - start, *values.shape[2:], q.size(-1), nonempty.size(1),
            values.stride(0), len(positions), *(t.data_ptr() for t in table),
            _pointers([None if r is None else r[start:] for r in readings]),
            widths.data_ptr(), q[start:].data_ptr(), k.data_ptr(),
            _pointers([p[start:] for p in positions]),
            _pointers([values[:, s] for s in slots]),
            nonempty[start:].data_ptr(), eps]


def combine(table: CombinationTable, readings: Sequence[Tensor], q: Tensor,
            k: Tensor, positions: Sequence[Tensor], values: Tensor,
            slots: Sequence[int], nonempty: Tensor,
            eps: float) -> Tuple[Tensor, Tensor]:
    r"""The combined classes :obj:`[rows, classes, H, D]` and their
    denominators :obj:`[rows, classes, H]` (all inputs contiguous; class
    :obj:`c` reads :obj:`values[:, slots[c]]`; single-key source :obj:`s`
    dots :obj:`q` with :obj:`k[positions[s]]`, nothing where negative)."""
    rows, (H, D) = nonempty.size(0), values.shape[2:]
    out = values.new_empty(rows, nonempty.size(1), H, D)
    den = values.new_empty(rows, nonempty.size(1), H)
    widths = torch.tensor([r.size(-1) for r in readings] or [0])
    function = _function('combine', out.dtype)

    def run(start: int, stop: int) -> None:
        function(*_combine_args(table, readings, widths, q, k, positions,
                                values, slots, nonempty, eps, start, stop),
                 out[start:].data_ptr(), den[start:].data_ptr())

    _split_rows(run, rows, fine=True)  # rows are independent
    return out, den


def combine_backward(table: CombinationTable,
                     reading_shapes: Sequence[torch.Size], q: Tensor,
                     k: Tensor, positions: Sequence[Tensor], values: Tensor,
                     slots: Sequence[int], nonempty: Tensor, eps: float,
                     out: Tensor, den: Tensor, grad: Tensor,
                     needs: Sequence[bool],
                     into: Sequence[Optional[Tensor]], scratch: Scratch,
                     partials: Partials) -> List[Optional[Tensor]]:
    r"""Gradients of :func:`combine`: returns those of the readings (given
    by their shapes: the backward pass does not read them), temporaries
    taken from :obj:`scratch`, :obj:`None` where :obj:`needs` is false;
    those of :obj:`q`, :obj:`k` and the values go to the buffers
    :obj:`into` (contiguous, shaped as the inputs, :obj:`None` where not
    needed): written to the first, added to the others (which the caller
    zero-fills or has filled with other terms of the same gradient). Rows
    past the first thread's add to key and value gradient blocks taken
    from :obj:`partials` (made for the key and value gradients of
    :obj:`into` that are not :obj:`None`, in that order,
    :obj:`per_thread`), which the caller adds (:meth:`Partials.add`):
    calls for several row sets share one set of blocks."""
    widths = torch.tensor([shape[-1] for shape in reading_shapes] or [0])
    grad = grad.contiguous()  # (kept alive through the call)
    grads = [scratch.zeros(shape, out.dtype) if need else None
             for shape, need in zip(reading_shapes, needs)]
    grad_q = into[0]
    function = _function('combine_backward', out.dtype)

    def run(start: int, stop: int) -> None:
        # rows start..stop (see _combine_args)
        shared = iter(partials.take(start))
        grad_k, grad_v = [None if g is None else next(shared)
                          for g in into[1:]]
        function(
            *_combine_args(table, [None] * len(grads), widths, q, k,
                           positions, values, slots, nonempty, eps, start,
                           stop), out[start:].data_ptr(),
            den[start:].data_ptr(), grad[start:].data_ptr(),
            _pointers([None if g is None else g[start:] for g in grads]),
            _ptr(None if grad_q is None else grad_q[start:]),
            _ptr(grad_k), _pointers([None if grad_v is None else
                                     grad_v[:, s] for s in slots]))

    _split_rows(run, nonempty.size(0))
    return grads


def favor_logits(x: Tensor, projection: Tensor, shift_rows: bool,
                 log_scale: float) -> Tuple[Tensor, Tensor]:
    r"""FAVOR+ logits :obj:`[*, r]` of the rows of :obj:`x [*, d]`
    (contiguous) against :obj:`projection [r, d]`,
    :math:`l = W (s x) - \|s x\|^2 / 2` with :math:`s = d^{-1/4}`, and
    their maxima per row :obj:`[*]`; with :obj:`shift_rows`, the logits are
    shifted by :obj:`log_scale` minus their row's maximum."""
    d, r = x.size(-1), projection.size(0)
    transposed = projection.to(x.dtype).t().contiguous()
    out = x.new_empty(x.shape[:-1] + (r, ))
    row_max = x.new_empty(x.shape[:-1])
    function = _function('favor_logits', x.dtype)

    def run(start: int, stop: int) -> int:
        return function(_row(x, start, d), transposed.data_ptr(),
                        _row(out, start, r), _row(row_max, start, 1),
                        stop - start, d, r, int(shift_rows), d**-0.25,
                        log_scale)

    _split_rows(run, row_max.numel(), 'favor_logits')
    return out, row_max


def favor_shift(out: Tensor, shift: Tensor) -> None:
    r"""Adds :obj:`shift [*]` to every row of the logits :obj:`out [*, r]`
    (both contiguous), in place."""
    r = out.size(-1)
    function = _function('favor_shift', out.dtype)

    def run(start: int, stop: int) -> None:
        function(_row(out, start, r), _row(shift, start, 1), stop - start,
                 r)

    _split_rows(run, shift.numel())


def favor_backward(x: Tensor, projection: Tensor, phi: Tensor,
                   grad: Tensor) -> Tensor:
    r"""The gradient with respect to :obj:`x [*, d]` of the FAVOR+ features
    :obj:`phi [*, r]` of its rows (:func:`favor_logits`, shifted, then
    exponentiated) for their gradient :obj:`grad` (all contiguous)."""
    d, r = x.size(-1), phi.size(-1)
    projection = projection.to(x.dtype).contiguous()
    grad_x = torch.empty_like(x)
    function = _function('favor_backward', x.dtype)

    def run(start: int, stop: int) -> int:
        return function(_row(x, start, d), projection.data_ptr(),
                        _row(phi, start, r), _row(grad, start, r),
                        _row(grad_x, start, d), stop - start, d, r,
                        d**-0.25)

    _split_rows(run, x.numel() // d, 'favor_backward')
    return grad_x


def direct_max_keys(dtype: torch.dtype) -> int:
    r"""The most keys a group may have for :func:`direct_read`."""
    return _function('direct_max_keys', dtype)()


#: What a query costs the direct readings on its own, in (query, key)
#: pairs: reading its row and writing its output (or, backward, its
#: gradients) outweigh the arithmetic of a few keys. Their groups are split
#: across threads at equal total :obj:`queries * (keys + QUERY_COST)`.
QUERY_COST = 32


class DirectReading(NamedTuple):
    r"""One reading of :func:`direct_read`: its query rows by group (rows
    of :obj:`q[start:]`), the columns it reads (indices into the pool's
    value columns, long), its output (or, backward, its gradient)
    :obj:`[rows, H, len(sel) + 1]` and the first of the queries' rows."""
    queries: Groups
    sel: Tensor
    data: Optional[Tensor]
    start: int = 0


def _direct_call(name: str, dtype: torch.dtype, keys: Groups,
                 groups: Tensor, readings: Sequence[DirectReading],
                 k: Tensor, v: Tensor, q: Tensor, head_stride: int,
                 columns: Tensor, after: Sequence = (),
                 split: bool = True) -> None:
    # the direct kernels' call (after: the pointers past the readings');
    # the group list is split across threads (groups write disjoint rows)
    # unless split is False, at equal costs (QUERY_COST)
    function = _function(name, dtype)
    counts = torch.tensor([r.sel.numel() for r in readings] or [0])
    before = [k.data_ptr(), v.data_ptr(), _pointers([q[r.start:]
                                                     for r in readings]),
              keys.rows.data_ptr(), keys.ptr.data_ptr()]
    after = [columns.data_ptr(), _pointers([r.queries.rows for r in readings]),
             _pointers([r.queries.ptr for r in readings]),
             _pointers([r.sel for r in readings]), counts.data_ptr(),
             _pointers([r.data for r in readings]), *after]
    sizes = [len(readings), *k.shape[1:], columns.numel(), v.size(1),
             head_stride]

    def run(start: int, stop: int) -> int:
        return function(*before, groups[start:].data_ptr(), *after,
                        stop - start, *sizes)

    queries = sum(r.queries.ptr.diff().index_select(0, groups)
                  for r in readings)
    costs = queries * (keys.ptr.diff().index_select(0, groups) + QUERY_COST)
    _split_rows(run, groups.numel(), name, split, costs, fine=True)


def direct_read(k: Tensor, v: Tensor, q: Tensor, keys: Groups,
                groups: Tensor, head_stride: int, columns: Tensor,
                readings: Sequence[DirectReading]) -> None:
    r"""Writes the readings :obj:`data[row] = q[start + row]^T S_g[:, sel]`
    (then the denominator) of the query rows of :obj:`groups` (long; each
    with at most :func:`direct_max_keys` keys), where :obj:`S_g = sum k[x]
    [v[x, h * head_stride + columns], 1]^T` over the keys :obj:`x` of group
    :obj:`g`, computed from the keys without the summary. :obj:`k [P, H,
    R]`, :obj:`v [P, L]`, :obj:`q [rows, H, R]` and the outputs
    contiguous."""
    _direct_call('direct_read', k.dtype, keys, groups, readings, k, v, q,
                 head_stride, columns)


def _query_gradient_targets(readings: Sequence[DirectReading],
                            grad_q: Optional[Tensor], split: bool
                            ) -> Tuple[List[Optional[Tensor]], List[int]]:
    # where each reading adds its query gradients (None: nowhere): the rows
    # of grad_q from its start or, split across threads, zeroed rows of its
    # own when its rows overlap an earlier in-place reading's (the two may
    # list one query row in groups that two threads run at once); and the
    # readings given rows of their own
    targets = [None if grad_q is None else grad_q[r.start:]
               for r in readings]
    own: List[int] = []
    in_place: List[Tuple[int, int]] = []  # the other readings' row ranges
    for i, r in enumerate(readings):
        if grad_q is None or r.data is None:
            continue
        lo, hi = r.start, r.start + r.data.size(0)
        if split and any(lo < b and a < hi for a, b in in_place):
            targets[i] = grad_q.new_zeros((hi - lo, ) + grad_q.shape[1:])
            own.append(i)
        else:
            in_place.append((lo, hi))
    return targets, own


def direct_read_backward(k: Tensor, v: Tensor, q: Tensor, keys: Groups,
                         groups: Tensor, head_stride: int, columns: Tensor,
                         readings: Sequence[DirectReading],
                         grad_q: Optional[Tensor], grad_k: Optional[Tensor],
                         grad_v: Optional[Tensor]) -> None:
    r"""Adds the gradients of :func:`direct_read` for the readings'
    gradients (their :obj:`data`, contiguous; :obj:`None`: zero) to
    :obj:`grad_q`, :obj:`grad_k` and :obj:`grad_v` (laid out as :obj:`q`,
    :obj:`k`, :obj:`v`, a reading's rows at its start; each skipped when
    :obj:`None`), split across threads only when no key row is listed twice
    (two threads would add to it at once). Split, a reading whose query
    rows overlap an earlier one's adds its query gradients to zeroed rows
    of its own, added after the call: the two may list one query row in
    groups that two threads run at once."""
    split = _may_split_adds(keys.rows)
    targets, own = _query_gradient_targets(readings, grad_q, split)
    _direct_call('direct_read_backward', k.dtype, keys, groups, readings, k,
                 v, q, head_stride, columns, [_pointers(targets),
                                              _ptr(grad_k), _ptr(grad_v)],
                 split)
    for i in own:
        start = readings[i].start
        grad_q[start:start + targets[i].size(0)].add_(targets[i])


def pair_gather(y: Tensor, nodes: Tensor, row: Tensor, col: Tensor,
                transpose: Tensor) -> Tensor:
    r"""The light 2→2 layer's entries :obj:`[P, C]` from the entry-wise
    products :obj:`y [P, 2C]` and the node-wise ones :obj:`nodes [n, 3C]`
    (see ``pair_entries.c``; all contiguous, the indices long and in
    range: a :class:`~torch_geometric_hot.data.PairView`'s)."""
    C = nodes.size(1) // 3
    out = y.new_empty(y.size(0), C)
    function = _function('pair_gather', y.dtype)

    def run(start: int, stop: int) -> None:
        function(y.data_ptr(), nodes.data_ptr(), row.data_ptr(),
                 col.data_ptr(), transpose.data_ptr(), out.data_ptr(), start,
                 stop, C)

    _split_rows(run, out.size(0))  # entries are independent
    return out


def pair_scatter(grad: Tensor, row: Tensor, col: Tensor, transpose: Tensor,
                 num_nodes: int) -> Tuple[Tensor, Tensor]:
    r"""The adjoint of :func:`pair_gather` for the gradient :obj:`grad
    [P, C]`: the entry-wise :obj:`[P, 2C]` and node-wise :obj:`[n, 3C]`
    gradients (the entries split across threads, each part past the
    first adding to node sums of its own, added after the call)."""
    P, C = grad.shape
    entries = grad.new_empty(P, 2 * C)
    nodes = grad.new_zeros(num_nodes, 3 * C)
    partials = Partials([nodes])
    function = _function('pair_scatter', grad.dtype)

    def run(start: int, stop: int) -> None:
        function(grad.data_ptr(), row.data_ptr(), col.data_ptr(),
                 transpose.data_ptr(), entries.data_ptr(),
                 partials.take(start)[0].data_ptr(), start, stop, C)

    _split_rows(run, P)
    partials.add()
    return entries, nodes


class SoftmaxGroups(NamedTuple):
    r"""The key groups of :func:`grouped_softmax_attention`: the query rows
    (:obj:`queries`) and key data rows (:obj:`keys`) of every group, the
    exclusions as int32 ids (:obj:`query_ids [E, rows]` by query row,
    :obj:`key_ids [E, K]` in the order of :obj:`keys.rows`; a key is
    excluded for a query when an id pair is equal), the most keys of a
    group, the cost of every group (its queries times its keys plus
    one), by which calls split the groups across threads, and the row
    dropout hashes for every key, in the order of :obj:`keys.rows`."""
    queries: Groups
    keys: Groups
    query_ids: Tensor
    key_ids: Tensor
    max_keys: int
    costs: Tensor
    key_hash: Tensor


def _grouped_call(name: str, groups: SoftmaxGroups, q: Tensor, k: Tensor,
                  v: Tensor, pointers: Sequence[Optional[Tensor]],
                  targets: Sequence[Tensor], seed: int,
                  threshold: int) -> None:
    # the groups split across threads at equal pair counts (a group writes
    # rows of its own; dropout's draws depend on the rows, not the split)
    function = _function(name, q.dtype)
    H, D, DV = q.size(1), q.size(2), v.size(2)
    indices = [groups.queries.rows, groups.queries.ptr, groups.keys.rows,
               groups.keys.ptr, groups.query_ids, groups.key_ids,
               groups.key_hash]

    def run(start: int, stop: int) -> int:
        return function(*(_ptr(t) for t in pointers),
                        *(t.data_ptr() for t in indices),
                        *(t.data_ptr() for t in targets), start, stop, H, D,
                        DV, q.stride(0), k.stride(0), v.stride(0),
                        groups.query_ids.size(0), q.size(0),
                        groups.keys.rows.numel(), groups.max_keys, seed,
                        threshold)

    _split_rows(run, groups.costs.numel(), name, costs=groups.costs,
                fine=True)


def _rows_of_heads(t: Tensor) -> Tensor:
    # [rows, H, d] with heads and features contiguous within a row
    return t if t.stride(2) == 1 and t.stride(1) == t.size(2) else \
        t.contiguous()


def grouped_softmax_attention(q: Tensor, k: Tensor, v: Tensor,
                              groups: SoftmaxGroups, seed: int = 0,
                              threshold: int = 0) -> Tuple[Tensor, Tensor]:
    r"""Softmax attention of every query row over the keys of its group
    that no exclusion removes (``grouped_softmax.c``): the output
    :obj:`[rows, H, DV]` (0 for a query without keys) and the log-sum-exp
    of the logits :obj:`[rows, H]` (:obj:`-inf` there). :obj:`q [rows, H,
    D]`, :obj:`k [N, H, D]`, :obj:`v [N, H, DV]` (rows may be strided);
    the indices long and in range. With :obj:`threshold` :math:`> 0`,
    dropout on the weights, drawn by :obj:`seed` (the weight of query row
    :math:`i`, key :math:`j`, head :math:`h` is dropped where the
    kernel's 32-bit hash of the four, the key as its hashed row, is below
    :obj:`threshold`)."""
    q, k, v = _rows_of_heads(q), _rows_of_heads(k), _rows_of_heads(v)
    # every query row is some group's: the kernel writes all of out, lse
    out = q.new_empty(q.size(0), q.size(1), v.size(2))
    lse = q.new_empty(q.size(0), q.size(1))
    _grouped_call('grouped_softmax', groups, q, k, v, [q, k, v], [out, lse],
                  seed, threshold)
    return out, lse


def grouped_softmax_attention_backward(
        grad: Tensor, q: Tensor, k: Tensor, v: Tensor, out: Tensor,
        lse: Tensor, groups: SoftmaxGroups, seed: int = 0,
        threshold: int = 0) -> Tuple[Tensor, Tensor, Tensor]:
    r"""The gradients of :func:`grouped_softmax_attention` with respect to
    :obj:`q`, :obj:`k` and :obj:`v` (contiguous; zero for rows that are no
    key) from the gradient of its output and its results, dropout drawn as
    with the same :obj:`seed` and :obj:`threshold`."""
    q, k, v = _rows_of_heads(q), _rows_of_heads(k), _rows_of_heads(v)
    grad, out, lse = grad.contiguous(), out.contiguous(), lse.contiguous()
    grad_q = torch.empty_like(q, memory_format=torch.contiguous_format)
    grad_k = torch.zeros_like(k, memory_format=torch.contiguous_format)
    grad_v = torch.zeros_like(v, memory_format=torch.contiguous_format)
    _grouped_call('grouped_softmax_backward', groups, q, k, v,
                  [q, k, v, out, lse, grad], [grad_q, grad_k, grad_v], seed,
                  threshold)
    return grad_q, grad_k, grad_v
