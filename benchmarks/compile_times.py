r"""What :func:`torch.compile` costs and gives on batches of real molecules.

Five configurations, each a model mapping a batch to one value per graph
(the settings of ``molecule_batches.py``: NCITPSA molecules with OGB's
featurisation, width ``--width``, ``--layers`` blocks, ``--heads`` heads):

* ``hot_kernel`` / ``hot_softmax``:
  :class:`~torch_geometric_hot.models.HOTGraphModel` with
  ``attention='kernel'`` / ``'softmax'``, called with the batch's
  :class:`~torch_geometric_hot.data.PairView` built eagerly (the view is the
  per-batch index bundle; the compiled model reads it);
* ``tokengt_softmax`` / ``tokengt_performer``:
  :class:`~torch_geometric_hot.models.TokenGT` with the Laplacian node
  identifiers of the ``pre_transform``;
* ``simplicial``: ``--layers``
  :class:`~torch_geometric_hot.nn.SimplicialAttention` layers
  (``candidates='neighbours'``, :math:`N = 2`) between an atom encoder and
  a sum readout.

Every configuration is compiled with ``fullgraph=True`` and ``--dynamic``
(default ``auto``: torch's ``dynamic=None``, a second compile with
symbolic sizes after the first change of shape, then none; ``true``:
symbolic sizes from the first batch), with the two settings that capture
data-dependent sizes (``docs/compiling.md``), in an empty inductor cache
(a fresh ``TORCHINDUCTOR_CACHE_DIR`` per configuration, so the times are
those of a first run; ``--cache-dir`` reuses one, as a second run of a
training script does). With ``--regional`` the model's repeated blocks
(HOT's ``HOTLayer``, TokenGT's encoder layers, the simplicial layers) are
compiled one by one (``block.compile(fullgraph=True)``) instead of the
whole model: blocks of one kind share their compiled code, the rest of
the model runs eagerly. Per configuration:

* ``compile_s``: the compile time of the first training step (forward,
  L1 loss, backward, Adam) on the first batch, as torch's compile timers
  count it (``torch._dynamo.utils.calculate_time_spent``: the forward
  frame and the backward graph), split into ``phases_s``: ``dynamo``
  (tracing the Python code), ``aot`` (AOTAutograd: functionalisation and
  the joint forward-backward graph), ``inductor`` (lowering and code
  generation, forward and backward); ``first_step_s`` is the wall time of
  that step;
* ``graphs``: graphs compiled on the first batch (1 without graph breaks;
  with ``--regional``, one per kind of block);
* warm-up: every batch is stepped until a step compiles nothing
  (``warmup_steps`` per batch, at most ``--max-warmup``); ``recompiles``
  counts the graphs compiled after the first step (recompiles for other
  sizes, or for anything else a guard saw change) and ``recompile_s`` the
  compile time they took;
* ``eager_ms`` / ``compiled_ms``: the steady-state training step after the
  warm-up, mean over the batches, median of ``--rounds`` alternating
  rounds (eager then compiled, the same batches); ``speedup`` is their
  ratio. ``graphs_in_rounds`` counts graphs compiled during the timed
  rounds: not 0 means the compiled figure includes compiling (the run
  prints a warning).

Usage::

    python benchmarks/compile_times.py --threads 2 \
        --out benchmarks/results/compile_times.json
    python benchmarks/compile_times.py --threads 2 --regional \
        --out benchmarks/results/compile_times_regional.json
    python benchmarks/compile_times.py --device cuda --out gpu.json
    python benchmarks/compile_times.py --quick
"""
import argparse
import contextlib
import os
import statistics
import sys
import time
from typing import Dict, List, Optional, Tuple

import torch
from torch import Tensor

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import software_versions, write_json  # noqa: E402
from molecule_batches import NODE_ID_DIM, _categorical, \
    load_batches  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CONFIGS = ('hot_kernel', 'hot_softmax', 'tokengt_softmax',
           'tokengt_performer', 'simplicial')


class SimplicialModel(torch.nn.Module):
    r"""Atom encoder, :obj:`layers` N-simplicial attention layers
    (neighbour tuples, :math:`N = 2`), sum readout and a linear head."""
    def __init__(self, width: int, layers: int, heads: int):
        super().__init__()
        from torch_geometric_hot.nn import SimplicialAttention
        self.atom, _ = _categorical(width)
        self.layers = torch.nn.ModuleList([
            SimplicialAttention(width, heads=heads, candidates='neighbours')
            for _ in range(layers)
        ])
        self.head = torch.nn.Linear(width, 1)

    def forward(self, x: Tensor, edge_index: Tensor, batch: Tensor,
                num_graphs: int) -> Tensor:
        from torch_geometric_hot.ops.scatter import scatter_sum
        h = self.atom(x)
        for layer in self.layers:
            h = layer(h, edge_index, batch)
        return self.head(scatter_sum(h, batch, num_graphs))


def build(name: str, width: int, layers: int, heads: int
          ) -> torch.nn.Module:
    r"""The model of configuration :obj:`name` (see the module docstring)."""
    from torch_geometric_hot.models import HOTGraphModel, TokenGT
    if name == 'simplicial':
        return SimplicialModel(width, layers, heads)
    atom, bond = _categorical(width)
    if name.startswith('hot_'):
        return HOTGraphModel(width, 1, num_layers=layers, heads=heads,
                             node_encoder=atom, edge_encoder=bond,
                             attention=name[len('hot_'):], seed=0)
    if name.startswith('tokengt_'):
        return TokenGT(width, width, 1, layers, node_encoder=atom,
                       edge_encoder=bond, heads=heads, node_id='laplacian',
                       node_id_dim=NODE_ID_DIM,
                       attention=name[len('tokengt_'):], seed=0)
    raise ValueError(f"unknown configuration {name!r}, expected one of "
                     f"{CONFIGS}")


def regions(name: str, model: torch.nn.Module) -> List[torch.nn.Module]:
    r"""The repeated blocks of configuration :obj:`name`'s model, compiled
    one by one with ``--regional`` (the blocks of one kind share their
    compiled code)."""
    if name.startswith('tokengt_'):
        return list(model.encoder.layers)
    return list(model.layers)


def inputs(name: str, batch) -> Tuple[tuple, dict]:
    r"""The call of configuration :obj:`name` on :obj:`batch`: positional
    and keyword arguments, with the per-batch index bundle (pair view)
    built here, eagerly, as a user builds it outside the compiled model."""
    from torch_geometric_hot.data import PairView
    if name.startswith('hot_'):
        view = PairView.from_data(batch)
        return ((batch.x, batch.edge_index, batch.edge_attr, batch.batch),
                dict(num_graphs=batch.num_graphs, view=view))
    if name.startswith('tokengt_'):
        return ((batch.x, batch.edge_index, batch.edge_attr, batch.batch),
                dict(num_graphs=batch.num_graphs,
                     node_id=batch.lap_node_id))
    return (batch.x, batch.edge_index, batch.batch, batch.num_graphs), {}


class CountingBackend:
    r"""A :func:`torch.compile` backend that counts the graphs it is
    handed (one per compiled frame, more with graph breaks) and passes them
    on to :obj:`backend`."""
    def __init__(self, backend: str):
        self.inner = torch._dynamo.lookup_backend(backend)
        self.graphs = 0

    def __call__(self, gm, example_inputs):
        self.graphs += 1
        return self.inner(gm, example_inputs)


class _Regional:
    # the model whose blocks are compiled, called as the compiled model
    def __init__(self, model: torch.nn.Module):
        self.model = model

    def __call__(self, *args, **kwargs):
        return self.model(*args, **kwargs)


def capture_data_dependent_sizes() -> None:
    r"""The two settings under which data-dependent sizes (padded lengths,
    pair and tuple counts) are traced as symbols instead of breaking the
    graph (``docs/compiling.md``)."""
    torch._dynamo.config.capture_scalar_outputs = True
    torch._dynamo.config.capture_dynamic_output_shape_ops = True


def _sync(device: torch.device) -> None:
    if device.type == 'cuda':
        torch.cuda.synchronize(device)


def _compile_seconds() -> Dict[str, float]:
    # torch's compile timers, accumulated over the process since the last
    # torch._dynamo.utils.reset_frame_count()
    from torch._dynamo.utils import calculate_time_spent
    spent = calculate_time_spent()
    frame = spent.get('entire_frame_compile', 0.0)
    backward = spent.get('entire_backward_compile', 0.0)
    backend = spent.get('backend_compile', 0.0)
    inductor = spent.get('inductor_compile', 0.0)
    return dict(total=frame + backward, dynamo=frame - backend,
                aot=backend + backward - inductor, inductor=inductor)


def _inductor_cache(cache_dir: Optional[str]):
    # compiled kernels and graphs are cached on disk and in memory: an
    # empty temporary cache gives the times of a first run
    from torch._inductor.utils import fresh_cache
    if cache_dir is None:
        return fresh_cache()
    os.environ['TORCHINDUCTOR_CACHE_DIR'] = cache_dir
    return contextlib.nullcontext()


def measure(name: str, batches: List, args: argparse.Namespace,
            device: torch.device) -> Dict:
    r"""Compile time, graphs, recompiles and steady-state step times of
    configuration :obj:`name` (see the module docstring)."""
    from torch._dynamo.utils import reset_frame_count
    torch._dynamo.reset()
    reset_frame_count()
    torch.manual_seed(0)
    model = build(name, args.width, args.layers, args.heads).to(device)
    model.train()
    backend = CountingBackend(args.backend)
    options = dict(backend=backend, fullgraph=True, dynamic=args.dynamic)
    if args.regional:
        for block in regions(name, model):
            block.compile(**options)
        compiled = _Regional(model)
    else:
        compiled = torch.compile(model, **options)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-4)
    calls = [inputs(name, b) for b in batches]

    def step(fn, i: int) -> float:
        # the eager model runs its compiled blocks eagerly (--regional)
        stance = 'force_eager' if fn is model else 'default'
        with torch.compiler.set_stance(stance):
            _sync(device)
            start = time.perf_counter()
            optimizer.zero_grad()
            args_, kwargs = calls[i]
            loss = (fn(*args_, **kwargs) - batches[i].y).abs().mean()
            loss.backward()
            optimizer.step()
            _sync(device)
            return time.perf_counter() - start

    step(model, 0)  # eager warm-up (lazy initialisation, caches)
    first = step(compiled, 0)
    graphs = backend.graphs
    spent = _compile_seconds()
    warmup_steps = []
    for i in range(len(batches)):
        for steps in range(1, args.max_warmup + 1):
            before = backend.graphs
            step(compiled, i)
            if backend.graphs == before:
                break
        warmup_steps.append(steps)
    recompiles = backend.graphs - graphs
    recompile_s = _compile_seconds()['total'] - spent['total']
    eager, fast = [], []
    for _ in range(args.rounds):
        eager.append(statistics.mean(step(model, i)
                                     for i in range(len(batches))))
        fast.append(statistics.mean(step(compiled, i)
                                    for i in range(len(batches))))
    in_rounds = backend.graphs - graphs - recompiles
    eager_ms = 1e3 * statistics.median(eager)
    compiled_ms = 1e3 * statistics.median(fast)
    row = dict(compile_s=spent['total'],
               phases_s={k: v for k, v in spent.items() if k != 'total'},
               first_step_s=first, graphs=graphs, recompiles=recompiles,
               recompile_s=recompile_s, warmup_steps=warmup_steps,
               graphs_in_rounds=in_rounds, eager_ms=eager_ms,
               compiled_ms=compiled_ms, speedup=eager_ms / compiled_ms)
    phases = ', '.join(f'{k} {v:.1f}' for k, v in row['phases_s'].items())
    print(f'{name:18s} compile {row["compile_s"]:7.1f} s ({phases})  '
          f'graphs {graphs}  recompiles {recompiles} ({recompile_s:.1f} s)'
          f'  eager {eager_ms:8.1f} ms  compiled {compiled_ms:8.1f} ms  '
          f'x{row["speedup"]:.2f}', flush=True)
    if in_rounds:
        print(f'warning: {name} compiled {in_rounds} graph(s) during the '
              f'timed rounds: its compiled step is not steady state',
              flush=True)
    return row


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--device', default='cpu')
    parser.add_argument('--backend', default='inductor',
                        help="torch.compile backend (e.g. 'aot_eager')")
    parser.add_argument('--batch-size', type=int, default=128)
    parser.add_argument('--width', type=int, default=64)
    parser.add_argument('--layers', type=int, default=4)
    parser.add_argument('--heads', type=int, default=4)
    parser.add_argument('--batches', type=int, default=4,
                        help='batches of different sizes (recompiles are '
                        'counted over all but the first)')
    parser.add_argument('--rounds', type=int, default=3)
    parser.add_argument('--dynamic', default='auto',
                        choices=('auto', 'true', 'false'),
                        help="torch.compile's dynamic: auto (None), true "
                        "or false")
    parser.add_argument('--max-warmup', type=int, default=4,
                        help='compiled steps per batch at most until one '
                        'compiles nothing')
    parser.add_argument('--regional', action='store_true',
                        help='compile the repeated blocks one by one '
                        '(regional compilation) instead of the whole model')
    parser.add_argument('--cache-dir', default=None,
                        help='inductor cache directory (default: a fresh '
                        'one per configuration)')
    parser.add_argument('--threads', type=int, default=None,
                        help='torch threads (default: torch\'s)')
    parser.add_argument('--configs', default=','.join(CONFIGS))
    parser.add_argument('--root', default=os.path.join(ROOT, 'data_cache',
                                                       'nci_tpsa'))
    parser.add_argument('--out', default=None, help='JSON output path')
    parser.add_argument('--quick', action='store_true',
                        help="batches of 8, width 16, 1 layer, 2 batches, "
                        "1 round, backend 'aot_eager' (the same code path)")
    args = parser.parse_args(argv)
    if args.quick:
        args.batch_size, args.width, args.layers = 8, 16, 1
        args.heads, args.batches, args.rounds = 2, 2, 1
        args.backend = 'aot_eager'
    args.configs = args.configs.split(',')
    args.dynamic = dict(auto=None, true=True, false=False)[args.dynamic]
    for name in args.configs:
        if name not in CONFIGS:
            parser.error(f"unknown configuration {name!r}, expected some "
                         f"of {','.join(CONFIGS)}")
    return args


def main(argv=None) -> Dict:
    args = parse_args(argv)
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    capture_data_dependent_sizes()
    device = torch.device(args.device)
    batches = [b.to(device) for b in load_batches(args.root, args.batch_size,
                                                  args.batches)]
    print(f'{len(batches)} batches of {args.batch_size} NCITPSA molecules '
          f'({", ".join(str(b.num_nodes) for b in batches)} atoms); width '
          f'{args.width}, {args.layers} layers, {args.heads} heads; '
          f'backend {args.backend!r}, fullgraph=True, dynamic='
          f'{args.dynamic}{", regional" if args.regional else ""}; '
          f'{torch.get_num_threads()} thread(s), {device}')
    rows = {}
    for name in args.configs:
        with _inductor_cache(args.cache_dir):
            rows[name] = measure(name, batches, args, device)
    result = dict(
        settings=dict(device=str(device), backend=args.backend,
                      batch_size=args.batch_size, width=args.width,
                      layers=args.layers, heads=args.heads,
                      batches=args.batches, rounds=args.rounds,
                      dynamic=args.dynamic, regional=args.regional,
                      max_warmup=args.max_warmup,
                      cache_dir=args.cache_dir,
                      threads=torch.get_num_threads(), quick=args.quick,
                      atoms=[b.num_nodes for b in batches],
                      versions=software_versions()),
        configs=rows)
    if args.out:
        write_json(args.out, result)
    return result


if __name__ == '__main__':
    main()
