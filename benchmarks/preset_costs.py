r"""What a paper's run costs: for every preset of the training command
(``--preset``), a few optimizer steps at the preset's batch size on one
device, and the hours its full schedule would take there.

Each preset runs in a fresh process (its peak memory is its own). The
molecules are the offline PCQM4Mv2-layout set of the training command
(RDKit's NCI molecules, about 15 atoms each, written once into
``--root``), with the model's pre-transform applied once, as the command
does; the batches are collated before the clock starts, so the data
pipeline is not in the timings. One optimizer step is what the command
does: ``batch / micro-batch`` forward and backward passes of
``--micro-batch`` molecules under the preset's precision (``--precision``,
default float32), their gradients accumulated, clipping and the
optimizer's step. With ``--timed-micro-batches M`` only the first ``M``
micro-batches of each step are timed and the step's time is extrapolated
(``M`` times their mean per micro-batch, plus the optimizer's time), and
the record says so.

Fields per preset: ``parameters``, ``batch_size``, ``micro_batch``,
``accumulate``, ``seconds_per_step`` (median over ``--steps`` steps after
``--warmup`` untimed ones), ``molecules_per_second``, ``peak_mb`` (CUDA:
:func:`torch.cuda.max_memory_allocated`; CPU: peak resident set of the
process), ``total_steps`` (the preset's schedule on PCQM4Mv2's 3,378,606
training molecules) and ``hours`` (``total_steps`` times
``seconds_per_step``, on this one device).

``python benchmarks/preset_costs.py --device cpu --micro-batch 32
--timed-micro-batches 2 --out benchmarks/results/preset_costs_cpu.json``
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from typing import Dict, List

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from torch_geometric_hot.train.presets import (PCQM4MV2_TRAIN,  # noqa: E402
                                               PRESETS)
from torch_geometric_hot.train.versions import \
    software_versions  # noqa: E402


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--presets', default=','.join(PRESETS),
                        help='presets separated by commas (default: all)')
    parser.add_argument('--device', default='cpu', choices=['cpu', 'cuda'])
    parser.add_argument('--precision', default='32',
                        choices=['32', 'bf16', '16'])
    parser.add_argument('--micro-batch', type=int, default=None,
                        help='molecules per forward/backward pass (default: '
                        "the preset's batch, no accumulation)")
    parser.add_argument('--timed-micro-batches', type=int, default=None,
                        help='time only this many micro-batches of each '
                        'step and extrapolate (default: all)')
    parser.add_argument('--steps', type=int, default=2,
                        help='timed steps per preset (default: 2)')
    parser.add_argument('--warmup', type=int, default=1,
                        help='untimed steps first (default: 1)')
    parser.add_argument('--batch-size', type=int, default=None,
                        help="molecules per step (default: the preset's)")
    parser.add_argument('--smoke', action='store_true',
                        help="the presets as the command's --smoke cuts "
                        'them (a test of this script)')
    parser.add_argument('--threads', type=int, default=None)
    parser.add_argument('--molecules', type=int, default=None,
                        help='offline molecules to write (default: all)')
    parser.add_argument('--root', default=os.path.join(
        ROOT, 'data_cache', 'ogb'), help='folder of the offline set')
    parser.add_argument('--out', default=None, help='JSON output path')
    parser.add_argument('--one', default=None, help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def _command_args(args: argparse.Namespace, name: str):
    from torch_geometric_hot.train import parse_args as command_args
    argv = ['--preset', name, '--dataset', 'pcqm4mv2', '--offline',
            '--root', args.root, '--precision', args.precision,
            '--device', args.device]
    if args.molecules:
        argv += ['--offline-molecules', str(args.molecules)]
    if args.smoke:
        argv += ['--smoke']
    if args.batch_size:
        argv += ['--batch-size', str(args.batch_size)]
    return command_args(argv)


def measure(args: argparse.Namespace, name: str) -> Dict:
    r"""One preset's record (in this process)."""
    import torch
    from torch_geometric.loader import DataLoader

    from torch_geometric_hot.datasets import load_molecule_benchmark
    from torch_geometric_hot.train import recipes
    from torch_geometric_hot.train.trainer import peak_memory_mb, settings
    from torch_geometric_hot.train.zoo import configured, predict
    if args.threads:
        torch.set_num_threads(args.threads)
    run = _command_args(args, name)
    if run.size_limit is not None:  # as the command applies it
        from torch_geometric_hot.validation import set_size_limit
        set_size_limit(run.size_limit)
    device = torch.device(args.device)
    spec = configured(run.model[0], settings(run, 0, 1))
    bench = load_molecule_benchmark('pcqm4mv2', args.root, offline=True,
                                    pre_transform=spec.pre_transform,
                                    offline_molecules=args.molecules)
    batch = run.batch_size
    micro = min(args.micro_batch or batch, batch)
    accumulate = -(-batch // micro)
    timed = min(args.timed_micro_batches or accumulate, accumulate)
    index = bench.split['train']
    index = index.repeat(-(-batch // index.numel()))[:batch]
    batches = [b.to(device) for b in DataLoader(
        bench.dataset[index], batch_size=micro, shuffle=False)]
    torch.manual_seed(0)
    model = spec.build(settings(run, 0, 1)).to(device)
    model.train()
    optimizer = recipes.build_optimizer(run.optimizer, model.parameters(),
                                        run.lr, run.betas, run.weight_decay)
    scaler = recipes.grad_scaler(device, run.precision)
    loss_fn = recipes.loss_function(run.loss, 'regression', 'mae')

    def sync() -> None:
        if device.type == 'cuda':
            torch.cuda.synchronize(device)

    def step() -> float:
        sync()
        start = time.perf_counter()
        for k in range(timed):
            data = batches[k]
            with recipes.autocast(device, run.precision):
                out = predict(model, spec, data).view(-1)
            loss = loss_fn(out.float(), data.y.view(-1).float())
            scaler.scale(loss / accumulate).backward()
        sync()
        passes = time.perf_counter() - start
        start = time.perf_counter()
        if run.grad_clip is not None:
            scaler.unscale_(optimizer)
            torch.nn.utils.clip_grad_norm_(model.parameters(), run.grad_clip)
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad()
        sync()
        return passes / timed * accumulate + time.perf_counter() - start

    if device.type == 'cuda':
        torch.cuda.reset_peak_memory_stats(device)
    for _ in range(args.warmup):
        step()
    seconds = statistics.median(step() for _ in range(args.steps))
    total_steps = run.max_steps or run.epochs * -(-PCQM4MV2_TRAIN // batch)
    return {'preset': name, 'model': run.model[0],
            'parameters': sum(p.numel() for p in model.parameters()),
            'reference_parameters_m': PRESETS[name].reference_parameters,
            'batch_size': batch, 'micro_batch': micro,
            'accumulate': accumulate, 'timed_micro_batches': timed,
            'extrapolated': timed < accumulate,
            'precision': run.precision, 'device': str(device),
            'threads': torch.get_num_threads(),
            'seconds_per_step': seconds,
            'molecules_per_second': batch / seconds,
            'peak_mb': peak_memory_mb(device),
            'total_steps': total_steps,
            'hours': total_steps * seconds / 3600}


def _child(args: argparse.Namespace, name: str, argv: List[str]) -> Dict:
    path = os.pathsep.join([ROOT, os.environ.get('PYTHONPATH', '')])
    env = dict(os.environ, OUTDATED_IGNORE='1', PYTHONPATH=path)
    proc = subprocess.run([sys.executable, os.path.abspath(__file__),
                           *argv, '--one', name], capture_output=True,
                          text=True, env=env)
    if proc.returncode != 0:
        raise RuntimeError(f'{name} failed:\n{proc.stderr[-3000:]}')
    return json.loads(proc.stdout.strip().splitlines()[-1])


def table(records: List[Dict]) -> str:
    r"""The records as a Markdown table."""
    lines = ['| preset | parameters | batch (micro x accumulate) | '
             's / step | molecules / s | peak MB | steps | hours |',
             '|---|---|---|---|---|---|---|---|']
    for r in records:
        mark = ' (extrapolated)' if r['extrapolated'] else ''
        lines.append(
            f"| {r['preset']} | {r['parameters'] / 1e6:.2f}M | "
            f"{r['batch_size']} ({r['micro_batch']} x {r['accumulate']}) | "
            f"{r['seconds_per_step']:.3g}{mark} | "
            f"{r['molecules_per_second']:.3g} | {r['peak_mb']:.0f} | "
            f"{r['total_steps']:,} | {r['hours']:,.0f} |")
    return '\n'.join(lines)


def main(argv=None) -> Dict:
    os.environ.setdefault('OUTDATED_IGNORE', '1')
    args = parse_args(argv)
    if args.one is not None:
        print(json.dumps(measure(args, args.one)))
        return {}
    names = [n.strip() for n in args.presets.split(',') if n.strip()]
    unknown = [n for n in names if n not in PRESETS]
    if unknown:
        raise SystemExit(f"'--presets': unknown {unknown}; choose from "
                         f"{', '.join(PRESETS)}")
    argv = list(sys.argv[1:] if argv is None else argv)
    records = []
    for name in names:
        record = _child(args, name, argv)
        print(json.dumps(record), flush=True)
        records.append(record)
    result = {'device': args.device, 'precision': args.precision,
              'versions': software_versions(), 'presets': records}
    print(table(records))
    if args.out:
        os.makedirs(os.path.dirname(os.path.abspath(args.out)),
                    exist_ok=True)
        with open(args.out, 'w') as f:
            json.dump(result, f, indent=1)
    return result


if __name__ == '__main__':
    main()
