r"""What a user's first PCQM4Mv2 run costs before its first training step,
at a fraction of the real size and extrapolated to the real 3,746,620
molecules.

The data set is written by
:func:`~torch_geometric_hot.datasets.write_pcqm4mv2_at_scale`: the
molecules that ship with RDKit (NCI and WEHI sets, about 15,000) repeated
to the size asked for, in PCQM4Mv2's raw layout, split in the real
release's proportions. Only the scale is synthetic. Then, each stage in a
fresh process (so that its peak memory is its own):

* ``write``: the raw set (``raw/data.csv.gz``, ``split_dict.pt``);
* ``ogb-process``: OGB's own processing
  (:class:`ogb.lsc.PygPCQM4Mv2Dataset`: SMILES to graphs, held as one
  ``Data`` object each, collated, saved) of a copy of the raw set;
* ``process``: the library's, which writes the same file in bounded
  memory with worker processes
  (:func:`~torch_geometric_hot.datasets.pcqm4mv2_processing.\
process_pcqm4mv2`), through
  :func:`~torch_geometric_hot.datasets.load_molecule_benchmark`, and OGB's
  loader reading it;
* ``prepare`` (per model and ``--views``): the training command's data
  preparation (``train.trainer.Run``: the dataset opened, the model's
  views and node identifiers stored when ``--views stored``, the
  targets' scale, the mean predictor's test metric, the model built);
* ``loader`` (per model, views and worker count): one pass of the
  training split through the command's data loader
  (``Run._loader('train')``) with that many worker processes, the views
  computed there when ``--views computed``, the batches planned for the
  layout of ``--layout`` (a GPU's by default: the planning copy's plans
  only, :func:`~torch_geometric_hot.ops.plan_cache.plans_only`).

Models: ``tokengt-lap`` (Laplacian node identifiers) and ``hot-kernel``
(the pair view). Per stage: wall seconds; peak resident memory of the
stage's process (``ru_maxrss``); for the loader, also the peak of the
proportional set size (PSS: shared pages split between the processes
that share them) summed over the main process and its workers, sampled
every 0.2 s once the workers have started (samples during which the main
process's share moved, a worker forking or exiting, are dropped), which
is the memory the pass holds (the workers' resident
sets count the dataset they share with the main process once each);
disk use of the dataset folder after the stage; loader throughput in
molecules per second, in all and per worker, over the whole pass and from
its first batch on (``steady``, without the workers' start).

Sizes are fractions of the real set (``--fractions 0.01,0.1``). With two
sizes or more, ``extrapolation`` holds a least-squares line in the number
of molecules (``a + b n``) per stage and quantity, evaluated at the real
size: a fitted extrapolation, not a measurement.

Usage::

    python benchmarks/pcqm4mv2_pipeline.py --fractions 0.01 \
        --out benchmarks/results/pcqm4mv2_pipeline_1pct.json
    python benchmarks/pcqm4mv2_pipeline.py --fractions 0.01,0.1 \
        --workers 1,2 --views computed,stored --out pipeline.json
    python benchmarks/pcqm4mv2_pipeline.py --smoke   # seconds, tiny set
"""
import argparse
import json
import os
import os.path as osp
import platform
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from typing import Dict, List, Optional, Sequence

import numpy as np

sys.path.insert(0, osp.dirname(osp.abspath(__file__)))
from harness import software_versions, write_json  # noqa: E402

ROOT = osp.dirname(osp.dirname(osp.abspath(__file__)))
MODELS = ('tokengt-lap', 'hot-kernel')
VIEW_ATTRIBUTES = {'tokengt-lap': 'lap_node_id', 'hot-kernel': 'pair_index'}
SMOKE_MOLECULES = 300
GB = 2**30


# ------------------------------------------------------------ measuring --
def peak_rss_bytes() -> int:
    r"""This process's peak resident set (``ru_maxrss``, KB on Linux)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def pss_bytes(pid: int) -> int:
    r"""The proportional set size of process :obj:`pid` (0 when it is
    gone)."""
    try:
        with open(f'/proc/{pid}/smaps_rollup') as f:
            for line in f:
                if line.startswith('Pss:'):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def children(pid: int) -> List[int]:
    try:
        with open(f'/proc/{pid}/task/{pid}/children') as f:
            return [int(p) for p in f.read().split()]
    except OSError:
        return []


class PssSampler:
    r"""Samples the summed PSS of this process and its children every
    :obj:`interval` seconds in a thread; :attr:`peak` is the largest sum
    (of the samples taken while this process's own PSS held still, or,
    where none did, as in a pass shorter than a few samples, of all)."""
    def __init__(self, interval: float = 0.2) -> None:
        self.interval = interval
        self.peak = 0
        self._unsteady = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        me = os.getpid()
        while not self._stop.is_set():
            before = pss_bytes(me)
            kids = sum(pss_bytes(p) for p in children(me))
            after = pss_bytes(me)
            # a process forked or exiting between the readings moves pages
            # between the shares: such a sample would count them twice
            if abs(after - before) <= 0.01 * max(before, 1):
                self.peak = max(self.peak, max(before, after) + kids)
            else:
                self._unsteady = max(self._unsteady, max(before, after) +
                                     kids)
            self._stop.wait(self.interval)

    def __enter__(self) -> 'PssSampler':
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        if self.peak == 0:
            self.peak = self._unsteady


def disk_bytes(folder: str) -> int:
    total = 0
    for path, _, files in os.walk(folder):
        for name in files:
            try:
                total += osp.getsize(osp.join(path, name))
            except OSError:
                pass
    return total


# --------------------------------------------------------------- stages --
def _args(root: str, model: str, views: str, workers: int,
          batch_size: int):
    from torch_geometric_hot.train.cli import parse_args
    return parse_args(['--dataset', 'pcqm4mv2', '--root', root, '--model',
                       model, '--views', views, '--num-workers',
                       str(workers), '--batch-size', str(batch_size),
                       '--device', 'cpu', '--no-progress'])


def _run(point: Dict):
    from torch_geometric_hot.train.distributed import setup
    from torch_geometric_hot.train.trainer import Run
    args = _args(point['root'], point['model'], point['views'],
                 point.get('workers', 0), point['batch_size'])
    return Run(args, point['model'], 0, setup('cpu'), None)


def stage_write(point: Dict) -> Dict:
    from torch_geometric_hot.datasets import write_pcqm4mv2_at_scale
    folder = write_pcqm4mv2_at_scale(point['root'], point['molecules'])
    return {'folder': folder}


def stage_ogb_process(point: Dict) -> Dict:
    r"""OGB's own processing (:class:`ogb.lsc.PygPCQM4Mv2Dataset`) of a
    copy of the raw set, in a folder of its own (removed afterwards)."""
    root = point['root'] + '_ogb'
    source = osp.join(point['root'], 'pcqm4m-v2')
    target = osp.join(root, 'pcqm4m-v2')
    shutil.rmtree(root, ignore_errors=True)
    os.makedirs(target)
    for name in ('raw', 'split_dict.pt', 'RELEASE_v1.txt'):
        (shutil.copytree if osp.isdir(osp.join(source, name)) else
         shutil.copy)(osp.join(source, name), osp.join(target, name))
    try:
        dataset = _ogb_dataset(root)
        disk = disk_bytes(target)
        return {'molecules_read': len(dataset), 'ogb_disk_bytes': disk}
    finally:
        shutil.rmtree(root, ignore_errors=True)


def stage_process(point: Dict) -> Dict:
    from torch_geometric_hot.datasets import load_molecule_benchmark
    bench = load_molecule_benchmark('pcqm4mv2', point['root'])
    data = bench.dataset._data
    return {'molecules_read': len(bench.dataset),
            'atoms_per_molecule': data.x.size(0) / len(bench.dataset),
            'bonds_per_molecule': data.edge_index.size(1) / 2 /
            len(bench.dataset)}


def stage_prepare(point: Dict) -> Dict:
    run = _run(point)
    start = time.perf_counter()
    mean = run.mean_predictor()
    return {'mean_predictor_s': time.perf_counter() - start,
            'mean_predictor_test': mean, 'views': run.bench.views,
            'train_molecules': int(run.bench.split['train'].numel())}


def stage_loader(point: Dict) -> Dict:
    import torch
    run = _run(point)
    loader = run._loader('train', epoch=1,
                         layout=torch.device(point.get('layout', 'cpu')))
    attribute = VIEW_ATTRIBUTES[point['model']]
    count = batches = 0
    first = None
    # the pass ends on its last batch, inside the PSS sampling: the workers
    # exit after it (a sample taken while one exits would count the pages
    # it shared twice, in its own PSS and in the main process's)
    limit = min(point.get('max_batches') or len(loader), len(loader))
    cpu_before = _children_cpu_s()
    start = time.perf_counter()
    iterator, batch = iter(loader), None  # the workers start (fork) here
    with PssSampler() as sampler:
        for batch in iterator:
            if first is None:
                first = time.perf_counter()
                first_size = batch.num_graphs
            if attribute not in batch:
                raise RuntimeError(f"the loader's batches lack {attribute!r}")
            count += batch.num_graphs
            batches += 1
            if batches >= limit:
                break
        end = time.perf_counter()
        del batch
    # the workers exit and are reaped: their CPU time counts
    iterator = loader = None
    worker_cpu = _children_cpu_s() - cpu_before
    workers = max(point['workers'], 1)
    steady = (count - first_size) / (end - first) if end > first else \
        float('nan')
    return {'molecules': count, 'batches': batches, 'pass_s': end - start,
            'first_batch_s': first - start,
            'molecules_per_s': count / (end - start),
            'molecules_per_s_per_worker': count / (end - start) / workers,
            'steady_molecules_per_s': steady,
            'steady_molecules_per_s_per_worker': steady / workers,
            'worker_cpu_s': worker_cpu,
            'molecules_per_worker_cpu_s': count / worker_cpu
            if point['workers'] and worker_cpu > 0 else float('nan'),
            'peak_pss_bytes': sampler.peak,
            'peak_rss_workers_bytes': resource.getrusage(
                resource.RUSAGE_CHILDREN).ru_maxrss * 1024}


def _children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _cpu_us(fn, count: int) -> float:
    start = time.process_time()
    fn()
    return (time.process_time() - start) / count * 1e6


def stage_profile(point: Dict) -> Dict:
    r"""CPU microseconds per molecule of what a loader worker does, step
    by step, on the first batches of the training split: read the
    molecules, compute the views, collate
    (:func:`~torch_geometric_hot.data.collate.collate_graphs`, as the
    loader does), then build the pair view and make the plans for the
    layout of the point (the loader's collate function,
    :class:`~torch_geometric_hot.data.PlannedCollate`); against
    reading them through OGB's dataset
    (:class:`~torch_geometric.data.InMemoryDataset`, which keeps a copy of
    each) and transforming them one by one."""
    import copy

    import torch

    from torch_geometric_hot.data import PlannedCollate
    from torch_geometric_hot.data.collate import collate_graphs
    from torch_geometric_hot.train.zoo import plans_batches
    from torch_geometric_hot.transforms.apply_to_many import apply_to_many
    torch.set_num_threads(1)  # as in a loader's worker
    run = _run(point)
    dataset, transform = run.bench.dataset, run.bench.dataset.transform
    batch_size = point['batch_size']
    index = run.bench.split['train'][:point.get('profile_batches', 40) *
                                     batch_size].tolist()
    chunks = [index[i:i + batch_size] for i in range(0, len(index),
                                                     batch_size)]
    n = len(index)
    graphs: List = []
    # as the loader's workers read a batch (CollatedMolecules.get_many)
    get_many = getattr(dataset, 'get_many', None) or (
        lambda chunk: [dataset.get(i) for i in chunk])
    read = _cpu_us(lambda: graphs.extend(get_many(chunk)
                                         for chunk in chunks), n)
    plain = [[copy.copy(g) for g in chunk] for chunk in graphs]
    done: List = []
    views = _cpu_us(lambda: done.extend(
        apply_to_many(transform, chunk) for chunk in graphs), n)
    collate = _cpu_us(lambda: [collate_graphs(c) for c in done], n)
    layout = torch.device(point.get('layout', 'cuda'))
    planned = PlannedCollate(
        collate_graphs, run._planner(layout), layout) if \
        plans_batches(run.spec) else collate_graphs
    plan = _cpu_us(lambda: [planned(c) for c in done], n) - collate
    source = _ogb_dataset(point['root'])
    ogb_read = _cpu_us(lambda: [source[i] for i in index], n)
    one_by_one = _cpu_us(lambda: [transform(g) for c in plain for g in c],
                         n)
    return {'molecules': n, 'read_us': read, 'views_us': views,
            'collate_us': collate, 'plan_us': plan,
            'worker_us': read + views + collate + plan,
            'ogb_dataset_read_us': ogb_read,
            'views_one_by_one_us': one_by_one,
            'before_us': ogb_read + one_by_one + collate}


def _ogb_dataset(root: str):
    # OGB's own dataset object (PyG's get, with its per-molecule copies)
    from ogb.lsc import PygPCQM4Mv2Dataset

    from torch_geometric_hot.datasets import ogb_safe_globals
    with ogb_safe_globals():
        return PygPCQM4Mv2Dataset(root)


STAGES = {'write': stage_write, 'ogb-process': stage_ogb_process,
          'process': stage_process,
          'prepare': stage_prepare, 'loader': stage_loader,
          'profile': stage_profile}


def measure(point: Dict) -> Dict:
    r"""Runs one stage in this process and measures it (the child side)."""
    os.environ.setdefault('OUTDATED_IGNORE', '1')
    import torch
    torch.set_num_threads(1)
    start = time.perf_counter()
    fields = STAGES[point['stage']](point)
    wall = time.perf_counter() - start
    return dict(point, **fields, wall_s=wall, peak_rss_bytes=peak_rss_bytes(),
                disk_bytes=disk_bytes(osp.join(point['root'], 'pcqm4m-v2')),
                load_avg=os.getloadavg()[0])


def run_point(point: Dict, timeout: Optional[float] = None) -> Dict:
    r"""Runs :func:`measure` for :obj:`point` in a fresh process."""
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep +
               os.environ.get('PYTHONPATH', ''), OMP_NUM_THREADS='1',
               OUTDATED_IGNORE='1')
    proc = subprocess.run(
        [sys.executable, osp.abspath(__file__), '--point', json.dumps(point)],
        capture_output=True, text=True, env=env, timeout=timeout)
    if proc.returncode != 0:
        raise RuntimeError(f"stage {point['stage']} failed:\n"
                           f"{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


# --------------------------------------------------------- extrapolation --
QUANTITIES = ('wall_s', 'peak_rss_bytes', 'peak_pss_bytes', 'disk_bytes')


def stage_key(record: Dict) -> str:
    parts = [record['stage']]
    for key in ('model', 'views'):
        if key in record:
            parts.append(record[key])
    if record['stage'] == 'loader':
        parts.append(f"{record['workers']}w")
        parts.append(record.get('layout', 'cpu'))  # planned for
    return '/'.join(parts)


def extrapolate(records: List[Dict], target: int) -> List[Dict]:
    r"""Per stage and quantity measured at two sizes or more: the
    least-squares line ``a + b n`` in the number of molecules, and its
    value at :obj:`target` molecules."""
    groups: Dict[str, List[Dict]] = {}
    for r in records:
        groups.setdefault(stage_key(r), []).append(r)
    out = []
    for key, rows in groups.items():
        sizes = sorted({r['molecules_total'] for r in rows})
        if len(sizes) < 2:
            continue
        entry = {'stage': key, 'sizes': sizes, 'target': target,
                 'method': 'least-squares line a + b * molecules'}
        for quantity in QUANTITIES:
            pairs = [(r['molecules_total'], r[quantity]) for r in rows
                     if r.get(quantity) is not None]
            if len({n for n, _ in pairs}) < 2:
                continue
            b, a = np.polyfit([n for n, _ in pairs], [v for _, v in pairs], 1)
            entry[quantity] = float(a + b * target)
            entry[quantity + '_per_molecule'] = float(b)
        out.append(entry)
    return out


# ------------------------------------------------------------------ main --
def points_for(molecules: int, root: str, models: Sequence[str],
               views: Sequence[str], workers: Sequence[int],
               batch_size: int, max_batches: Optional[int],
               loader_views: Sequence[str],
               layout: str = 'cuda') -> List[Dict]:
    base = {'root': root, 'molecules': molecules, 'molecules_total':
            molecules, 'batch_size': batch_size}
    points = [dict(base, stage='write'), dict(base, stage='ogb-process'),
              dict(base, stage='process')]
    for model in models:
        if 'computed' in views:
            points.append(dict(base, stage='profile', model=model,
                               views='computed', layout=layout))
        for view in views:
            points.append(dict(base, stage='prepare', model=model,
                               views=view))
            for w in (workers if view in loader_views else []):
                point = dict(base, stage='loader', model=model, views=view,
                             workers=w, layout=layout)
                if max_batches is not None:
                    point['max_batches'] = max_batches
                points.append(point)
    return points


def _fmt(record: Dict) -> str:
    text = (f"{stage_key(record):<34} {record['molecules_total']:>9,} mol "
            f"{record['wall_s']:8.1f} s  peak RSS "
            f"{record['peak_rss_bytes'] / GB:6.2f} GB  disk "
            f"{record['disk_bytes'] / GB:6.3f} GB")
    if record['stage'] == 'profile':
        text += (f"  CPU us/mol: read {record['read_us']:.0f} views "
                 f"{record['views_us']:.0f} collate "
                 f"{record['collate_us']:.0f} plans "
                 f"{record.get('plan_us', 0):.0f} = "
                 f"{record['worker_us']:.0f} "
                 f"(one by one through OGB's dataset: "
                 f"{record['before_us']:.0f})")
    if record['stage'] == 'loader':
        text += (f"  PSS {record['peak_pss_bytes'] / GB:5.2f} GB  "
                 f"{record['molecules_per_s']:7.0f} mol/s "
                 f"({record['molecules_per_s_per_worker']:6.0f} / worker, "
                 f"steady {record['steady_molecules_per_s_per_worker']:6.0f}"
                 f"; {record['molecules_per_worker_cpu_s']:6.0f} per worker "
                 f"CPU second)")
    return text + f"  load {record['load_avg']:.1f}"


def main(argv: Optional[Sequence[str]] = None) -> Dict:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--fractions', default='0.01',
                        help='sizes as fractions of the real 3,746,620 '
                        'molecules, separated by commas (default: '
                        '%(default)s)')
    parser.add_argument('--molecules', default=None,
                        help='sizes in molecules instead of --fractions')
    parser.add_argument('--models', default=','.join(MODELS))
    parser.add_argument('--views', default='computed',
                        help="'computed', 'stored' or both, separated by "
                        "commas (default: %(default)s)")
    parser.add_argument('--loader-views', default=None,
                        help='the views whose loader passes run (default: '
                        'all of --views)')
    parser.add_argument('--workers', default='1',
                        help='loader worker counts, separated by commas '
                        '(default: %(default)s)')
    parser.add_argument('--stages', default=None,
                        help='run only these stages, separated by commas '
                        '(of write, ogb-process, process, profile, prepare, '
                        'loader; write and process are needed by the '
                        'others)')
    parser.add_argument('--batch-size', type=int, default=128)
    parser.add_argument('--layout', default='cuda', choices=['cuda', 'cpu'],
                        help="the device whose layout the loader's workers "
                        "plan the batches for (default: %(default)s, as a "
                        "GPU run's loader does; the planning happens on "
                        "this machine's CPU either way)")
    parser.add_argument('--max-batches', type=int, default=None,
                        help='stop each loader pass after this many batches')
    parser.add_argument('--root', default=None,
                        help='folder for the data sets (default: a '
                        'temporary folder, removed afterwards)')
    parser.add_argument('--keep', action='store_true',
                        help='keep the data sets')
    parser.add_argument('--smoke', action='store_true',
                        help=f'{SMOKE_MOLECULES} molecules, one worker: the '
                        'same stages in seconds')
    parser.add_argument('--in-process', action='store_true',
                        help='run the stages in this process (faster; the '
                        'peak memory is then that of all stages so far)')
    parser.add_argument('--out', default=None, help='write the JSON here')
    parser.add_argument('--point', help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.point:
        print(json.dumps(measure(json.loads(args.point))))
        return {}
    from torch_geometric_hot.datasets import PCQM4MV2_MOLECULES
    if args.smoke:
        sizes = [SMOKE_MOLECULES]
        args.workers = '1'
    elif args.molecules:
        sizes = [int(float(v)) for v in args.molecules.split(',')]
    else:
        sizes = [int(round(float(f) * PCQM4MV2_MOLECULES))
                 for f in args.fractions.split(',')]
    models = [m for m in args.models.split(',') if m]
    unknown = [m for m in models if m not in MODELS]
    if unknown:
        parser.error(f"'--models': unknown {unknown}; choose from {MODELS}")
    views = [v for v in args.views.split(',') if v]
    workers = [int(w) for w in args.workers.split(',')]
    stages = args.stages.split(',') if args.stages else None
    loader_views = views if args.loader_views is None else \
        args.loader_views.split(',')
    base = args.root or tempfile.mkdtemp(prefix='pcqm4mv2_pipeline_')
    records = []
    try:
        for n in sizes:
            root = osp.join(base, f'n{n}')
            folder = osp.join(root, 'pcqm4m-v2')
            if osp.isdir(folder) and (not stages or 'write' in stages):
                shutil.rmtree(folder)
            elif not stages or 'process' in stages:  # process it again
                shutil.rmtree(osp.join(folder, 'processed'),
                              ignore_errors=True)
            for point in points_for(n, root, models, views, workers,
                                    args.batch_size, args.max_batches,
                                    loader_views, args.layout):
                if stages and point['stage'] not in stages:
                    continue
                record = measure(point) if args.in_process else \
                    run_point(point)
                records.append(record)
                print(_fmt(record), flush=True)
                if args.out:  # what is measured so far, if cut off later
                    write_json(args.out, {'benchmark': 'pcqm4mv2_pipeline',
                                          'records': records,
                                          'partial': True})
            if not args.keep:
                shutil.rmtree(root, ignore_errors=True)
    finally:
        if args.root is None and not args.keep:
            shutil.rmtree(base, ignore_errors=True)
    result = {'benchmark': 'pcqm4mv2_pipeline', 'records': records,
              'extrapolation': extrapolate(records, PCQM4MV2_MOLECULES),
              'settings': {'sizes': sizes, 'models': models, 'views': views,
                           'workers': workers,
                           'batch_size': args.batch_size,
                           'max_batches': args.max_batches,
                           'cpus': os.cpu_count(),
                           'machine': platform.machine(),
                           'versions': software_versions()}}
    for entry in result['extrapolation']:
        print(f"fitted at {PCQM4MV2_MOLECULES:,}: {entry['stage']:<34} "
              + '  '.join(f"{q} {entry[q]:.3g}" for q in QUANTITIES
                          if q in entry))
    if args.out:
        write_json(args.out, result)
        print(f'wrote {args.out}')
    return result


if __name__ == '__main__':
    main()
