r"""The one rule that picks how attention runs: :func:`choose` takes the
first path of :data:`PATHS` that supports the :class:`Problem` and is its
default, unless :func:`use_path` or a ``path=`` argument forces one
(``docs/design.md``, "Paths", which gives the table and what the device
decides).
"""
import contextlib
import contextvars
from typing import Any, Callable, Iterator, NamedTuple, Optional, \
    Sequence, Tuple

import torch
from torch import Tensor

from torch_geometric_hot.ops import native
from torch_geometric_hot.ops.plan_cache import view_plan
from torch_geometric_hot.ops.size_buckets import BUCKET_RATIO

#: Kernel attention takes the packed path for a batch whose graphs have at
#: most this many rows (nodes, plus pair entries when an order is 2) on
#: average, each graph weighted by its rows: :math:`\sum_g L_g^2 \le`
#: ``PACKED_BLOCK`` :math:`\cdot \sum_g L_g`, on the pure-torch operations
#: (GPUs, or the native kernels off), where per-class gathers and scatters
#: cost more than dense blocks of that size. Where the native CPU kernels
#: take the input, kernel attention stays on its summaries: the per-batch
#: masks of all classes cost more than the kernels' index work
#: (``docs/benchmarks.md``, "Molecule batches").
PACKED_BLOCK = 384
#: The same limit for softmax attention, lower: past it the masked blocks
#: cost more than the padded per-class blocks.
PACKED_BLOCK_SOFTMAX = 96
#: The bucket ratio of the packed layout on devices other than the CPU
#: (GPUs), where each bucket's operations are kernel launches: above
#: :data:`~torch_geometric_hot.ops.size_buckets.BUCKET_RATIO` (the CPU's
#: ratio), the coarse layout of launch-bound devices: buckets within this
#: ratio, or one, whose graphs share blocks
#: (:func:`~torch_geometric_hot.ops.attention.packed.packed_layout`).
LAUNCH_BOUND_BUCKET_RATIO = 8.0


class DirectReadings(NamedTuple):
    r"""Which key groups kernel attention's summaries (the path
    ``'pooled'``) read straight from their keys,
    :math:`o = \sum_j (q^\top k_j) [v_j, 1]`, instead of through their
    summary: a group of :math:`n \le` :obj:`max_keys` keys (0: none; the
    native kernels cap it at
    :func:`~torch_geometric_hot.ops.native.direct_max_keys`) read by
    :math:`m` queries, where its :math:`m n (R + C)` products are at most
    the ratio times a summary's :math:`(n + m) R C` (:math:`R` features,
    :math:`C` value columns).

    Attributes:
        max_keys (int): The most keys of a group read so.
        cost_ratio (float): The ratio of the native kernels (a summary
            costs about twice its products: its blocks are stored, read
            back and, backward, transposed).
        torch_cost_ratio (float): The ratio of the torch operations, whose
            direct readings are gathers and an index_add per pair, slower
            per product than a summary's outer products and contractions
            (``benchmarks/torch_paths.py``: 5.5x faster than summaries
            alone on molecule batches, the same time on a sparse graph of
            :math:`10^5` edges).
    """
    max_keys: int = 32
    cost_ratio: float = 2.0
    torch_cost_ratio: float = 0.25


#: The rule's :class:`DirectReadings`.
DIRECT_READINGS = DirectReadings()
#: Every group through its summary.
SUMMARIES_ONLY = DirectReadings(max_keys=0)
#: The rule's :class:`DirectReadings` on devices other than the CPU
#: (GPUs), where every operation is a kernel launch: every group through
#: its summary. A directly read group's queries and keys are gathered and
#: scattered reading by reading, which costs more launches than its
#: arithmetic saves (HOT's kernel model on one graph of :math:`10^4`
#: edges with CUDA's layout: about 1,350 of 5,932 operators per forward
#: and backward pass; on the CPU's torch operations the summaries alone
#: even take 0.96 times the time there and 0.94 at :math:`10^5` edges).
LAUNCH_BOUND_DIRECT_READINGS = SUMMARIES_ONLY

#: The most elements (rows x terms x channels, kept for the backward pass)
#: that a ``'mean'`` equivariant linear part gathers at once
#: (:func:`gathers_terms`): the launch-bound problems; larger ones are
#: bound by arithmetic and memory, where the class by class evaluation
#: keeps less (``2**24``: a batch of 128 molecules at width 64 gathers
#: about ``2**22``).
GATHER_ELEMENTS = 1 << 24

OPERATIONS = ('hot', 'tokens')
ATTENTIONS = ('softmax', 'kernel')


class Problem(NamedTuple):
    r"""One attention call, as the rule sees it.

    Attributes:
        operation (str): ``'hot'`` or ``'tokens'``.
        attention (str): ``'softmax'`` or ``'kernel'``.
        tensors (tuple): The floating-point inputs (device, dtype, whether
            the native kernels take them); empty where they are not known
            yet (a layout built before the layers run).
        device_type (str): The device type the rule decides for.
        compiling (bool): Whether :func:`torch.compile` is tracing.
        weights (bool): Whether the attention weights are asked for.
        in_order (int): Input order (HOT).
        out_order (int): Output order (HOT).
        view: The batch's index bundle (HOT).
    """
    operation: str
    attention: str
    tensors: Tuple[Tensor, ...]
    device_type: str
    compiling: bool
    weights: bool = False
    in_order: int = 1
    out_order: int = 1
    view: Any = None


class Path(NamedTuple):
    r"""One way to run attention (a row of :data:`PATHS`).

    Attributes:
        name (str): The name :func:`use_path` and ``path=`` take.
        operations (tuple): The operations it runs (``'hot'``,
            ``'tokens'``).
        attentions (tuple): The attentions it computes.
        supports (callable): :obj:`None` where it runs the problem, else
            the reason it does not.
        default (callable): Whether the rule picks it where it supports
            the problem and no path before it was picked.
    """
    name: str
    operations: Tuple[str, ...]
    attentions: Tuple[str, ...]
    supports: Callable[[Problem], Optional[str]]
    default: Callable[[Problem], bool]


def native_takes(problem: Problem) -> bool:
    r"""Whether the native CPU kernels take the problem's tensors (all of
    them CPU float32 or all float64, the kernels built and switched on) on
    its device type; never in a graph that :func:`torch.compile` traces."""
    if problem.device_type != 'cpu' or torch.compiler.is_compiling():
        return False
    if not problem.tensors:
        return native.available()
    return native.applies(*problem.tensors)


def bucket_ratio(device_type: str) -> float:
    r"""Largest ratio of graph sizes within one bucket of the packed layout
    on :obj:`device_type`."""
    return BUCKET_RATIO if device_type == 'cpu' else \
        LAUNCH_BOUND_BUCKET_RATIO


def local_softmax_on_pairs(device_type: str) -> bool:
    r"""Whether the packed path keeps softmax attention's local classes on
    enumerated pairs on :obj:`device_type` (the CPU, where their few pairs
    are enumerated faster than masked blocks are filled; elsewhere every
    class attends on the blocks: each operation's launch costs more than
    the padding)."""
    return device_type == 'cpu'


def _grouped(problem: Problem) -> Optional[str]:
    if problem.weights:
        return 'returns no attention weights'
    if problem.compiling:
        return 'not under torch.compile (there: path "compiled")'
    if torch.compiler.is_compiling():
        return 'the native kernels do not run in a traced graph'
    if not native_takes(problem):
        return ('needs CPU float32/float64 tensors and the native kernels '
                f'(device type {problem.device_type!r}, native kernels '
                f'{"available" if native.available() else "off"})')
    return None


def _packed(problem: Problem) -> Optional[str]:
    if problem.weights:
        return 'returns no attention weights'
    if problem.compiling:
        return 'not under torch.compile (block sizes are read on the host)'
    if problem.in_order not in (1, 2) or problem.out_order not in (0, 1, 2):
        return (f'orders 1 or 2 to 0, 1 or 2, got {problem.in_order} -> '
                f'{problem.out_order}')
    return None


def _packed_pays(problem: Problem) -> bool:
    r"""Graphs of at most :data:`PACKED_BLOCK` rows (kernel attention, where
    the native CPU kernels do not take the input) or
    :data:`PACKED_BLOCK_SOFTMAX` rows (softmax attention) on average,
    weighted by their rows."""
    if problem.attention == 'softmax':
        limit = PACKED_BLOCK_SOFTMAX
    elif native_takes(problem):
        return False
    else:
        limit = PACKED_BLOCK
    view = problem.view
    pairs = 2 in (problem.in_order, problem.out_order)

    def pays() -> bool:
        rows = view.nodes_per_graph
        if pairs:
            rows = rows + view.edges_per_graph
        # host synchronisation: the decision (once per batch and row kind)
        total, square = torch.stack([rows.sum(), (rows * rows).sum()
                                     ]).tolist()
        return 0 < total and square <= limit * total

    # the decision is the plan (a graph traced over planned batches is
    # specialised on it, not on the sizes)
    return view_plan(view, ('packed_pays', pairs, limit), pays)


def _no_weights(problem: Problem) -> Optional[str]:
    return 'returns no attention weights' if problem.weights else None


def _eager_no_weights(problem: Problem) -> Optional[str]:
    if problem.compiling:
        return ('not under torch.compile (block sizes are read on the '
                'host; there: path "compiled")')
    return _no_weights(problem)


def _any(problem: Problem) -> Optional[str]:
    return None


def _always(problem: Problem) -> bool:
    return True


#: The paths, in the order the rule tries them (``docs/design.md``,
#: "Paths", says what each runs; each is the module of
#: :mod:`~torch_geometric_hot.ops.attention` of its name).
PATHS: Tuple[Path, ...] = (
    Path('grouped', ('hot', 'tokens'), ('softmax', ), _grouped, _always),
    Path('packed', ('hot', ), ('softmax', 'kernel'), _packed, _packed_pays),
    Path('compiled', ('hot', 'tokens'), ('softmax', ), _no_weights,
         lambda problem: problem.compiling),
    Path('padded', ('hot', 'tokens'), ('softmax', ), _eager_no_weights,
         _always),
    Path('pairs', ('hot', 'tokens'), ('softmax', ), _any, _always),
    Path('pooled', ('hot', 'tokens'), ('kernel', ), _any, _always),
)
NAMES = tuple(path.name for path in PATHS)

_NOTHING_FORCED = ((), None, OPERATIONS)
_forced: contextvars.ContextVar = contextvars.ContextVar(
    'torch_geometric_hot_path', default=_NOTHING_FORCED)
_direct: contextvars.ContextVar = contextvars.ContextVar(
    'torch_geometric_hot_direct_readings', default=None)


def _forcing(compiling: bool) -> Tuple[Tuple[str, ...], Optional[str],
                                       Tuple[str, ...]]:
    # a graph traced without plans runs the rule's choice; one traced over
    # planned batches reads what is forced once, when it is traced
    # (torch.compile cannot trace a context variable)
    if compiling:
        return _NOTHING_FORCED
    if torch.compiler.is_compiling():
        return _forced_when_traced()
    return _forced.get()


@torch.compiler.assume_constant_result
def _forced_when_traced() -> Tuple[Tuple[str, ...], Optional[str],
                                   Tuple[str, ...]]:
    return _forced.get()


def direct_readings(device_type: str = 'cpu') -> DirectReadings:
    r"""The :class:`DirectReadings` in force in this thread: the one of
    :func:`use_path`, else (and under :func:`torch.compile`) the rule's
    for :obj:`device_type`, :data:`DIRECT_READINGS` on the CPU and
    :data:`LAUNCH_BOUND_DIRECT_READINGS` elsewhere."""
    forced = None if torch.compiler.is_compiling() else _direct.get()
    if forced is not None:
        return forced
    return DIRECT_READINGS if device_type == 'cpu' else \
        LAUNCH_BOUND_DIRECT_READINGS


def gathers_terms(device_type: str, elements: int) -> bool:
    r"""Whether a ``'mean'`` equivariant linear part on a layout for
    :obj:`device_type` runs as one product of its gathered terms
    (:func:`~torch_geometric_hot.ops.mean_linear.mean_linear`, gathering
    :obj:`elements`) rather than class by class (its reference,
    :func:`~torch_geometric_hot.ops.equivariant.equivariant_linear`):
    off the CPU, where every operation is a kernel launch, up to
    :data:`GATHER_ELEMENTS`."""
    return device_type != 'cpu' and elements <= GATHER_ELEMENTS


@contextlib.contextmanager
def use_path(*paths: str, device_type: Optional[str] = None,
             operations: Sequence[str] = OPERATIONS,
             direct: Optional[DirectReadings] = None) -> Iterator[None]:
    r"""Runs the attention calls of the block on the paths :obj:`paths`
    (names of :data:`PATHS`; none: the rule's choice), decides as on
    :obj:`device_type` (:obj:`None`: the tensors' device type) and reads
    key groups directly by :obj:`direct`, in this
    thread (a :mod:`contextvars` variable; not in a graph traced by
    :func:`torch.compile`, which takes the rule's choice). A call takes
    the first of :obj:`paths` that supports it among those that run its
    operation and attention (the rule's choice where none does:
    ``use_path('packed')`` leaves kernel attention of tokens alone); where
    none of those supports it, :func:`choose` raises a
    :class:`ValueError` with every path's reason.

    Args:
        *paths (str): The paths.
        device_type (str, optional): The device type the rule decides for
            (``'cuda'`` runs on the CPU what a GPU runs).
        operations (sequence of str, optional): The operations the paths
            are forced on (``'hot'``, ``'tokens'``). (default: both)
        direct (DirectReadings, optional): The key groups the path
            ``'pooled'`` reads straight from their keys
            (:data:`SUMMARIES_ONLY`: none; :obj:`None`: the one in force,
            at first the rule's, :func:`direct_readings`).
            (default: :obj:`None`)

    Example:
        >>> from torch_geometric_hot.ops import use_path
        >>> with use_path('packed', device_type='cuda'):  # doctest: +SKIP
        ...     out = conv(x, view)  # per-graph blocks, as a GPU runs them
    """
    for name in paths:
        if name not in NAMES:
            raise ValueError(f"'paths' must be names of {NAMES}, got "
                             f"{name!r}")
    for operation in operations:
        if operation not in OPERATIONS:
            raise ValueError(f"'operations' must be of {OPERATIONS}, got "
                             f"{operation!r}")
    if direct is not None and not isinstance(direct, DirectReadings):
        raise ValueError(f"'direct' must be a DirectReadings, got "
                         f"{type(direct).__name__}")
    token = _forced.set((paths, device_type, tuple(operations)))
    direct_token = _direct.set(_direct.get() if direct is None else direct)
    try:
        yield
    finally:
        _direct.reset(direct_token)
        _forced.reset(token)


def problem(operation: str, attention: str, tensors: Tuple[Tensor, ...],
            device: torch.device, planned: bool = False,
            **kwargs) -> Problem:
    r"""The :class:`Problem` of a call on :obj:`device` (the device type of
    :func:`use_path` where it sets one). With :obj:`planned` (the call's
    layout was planned ahead, in the loader: the plans of
    :func:`~torch_geometric_hot.ops.plan_cache.view_plan` or a token
    layout), a graph that :func:`torch.compile` traces reads the plans
    and is decided as in eager mode (:obj:`compiling` false); its block
    sizes are then constants of the graph."""
    compiling = torch.compiler.is_compiling() and not planned
    device_type = _forcing(compiling)[1] or device.type
    return Problem(operation, attention, tuple(tensors), device_type,
                   compiling, **kwargs)


def reasons(problem: Problem) -> str:
    r"""Every path's answer to :obj:`problem`, a line each."""
    lines = []
    for path in PATHS:
        if problem.operation not in path.operations:
            why = f'does not run {problem.operation!r} attention'
        elif problem.attention not in path.attentions:
            why = f'computes {" and ".join(path.attentions)} attention only'
        else:
            why = path.supports(problem) or (
                'supported' + ('' if path.default(problem) else
                               ', not the default here'))
        lines.append(f'  {path.name}: {why}')
    return '\n'.join(lines)


def _runs(path: Path, problem: Problem) -> bool:
    return problem.operation in path.operations and \
        problem.attention in path.attentions


def choose(problem: Problem, path: Optional[str] = None) -> str:
    r"""The path that runs :obj:`problem`: :obj:`path`, else the paths of
    :func:`use_path` that run it, else the first path of :data:`PATHS`
    that supports it and is its default.

    Raises:
        ValueError: :obj:`path` is not a name of :data:`PATHS`, or no
            forced path supports the problem.
    """
    if path is not None:
        if path not in NAMES:
            raise ValueError(f"'path' must be one of {NAMES}, got {path!r}")
        wanted: Tuple[str, ...] = (path, )
    else:
        paths, _, operations = _forcing(problem.compiling)
        wanted = tuple(name for name in paths
                       if problem.operation in operations
                       and _runs(PATHS[NAMES.index(name)], problem))
    if wanted:
        for name in wanted:
            candidate = PATHS[NAMES.index(name)]
            if _runs(candidate, problem) and \
                    candidate.supports(problem) is None:
                return name
    else:
        for candidate in PATHS:
            if _runs(candidate, problem) and \
                    candidate.supports(problem) is None and \
                    candidate.default(problem):
                return candidate.name
    raise ValueError(
        f'no path of {wanted} runs this {problem.attention} attention '
        f'({problem.operation}, device type {problem.device_type!r}); the '
        f'paths:\n{reasons(problem)}')
