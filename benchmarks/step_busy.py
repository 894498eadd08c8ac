r"""How busy the device is during a training step: the time its kernels
run over the step's wall time, from :mod:`torch.profiler`.

One HOT training step (forward, L1 loss, backward, Adam) on a batch of
molecules planned by :class:`~torch_geometric_hot.data.PlannedLoader`
(:mod:`molecule_batches`' models and data), after warm-up steps; the
profiled steps' kernel time (CUDA kernels; on the CPU, the top-level
operators' self time, only to exercise the script) over their wall time.
A step bound by launches and host work leaves the device idle between
kernels: a low fraction.

Usage::

    python benchmarks/step_busy.py --device cuda --out busy.json
    python benchmarks/step_busy.py --device cpu --quick   # a dry run
"""
import argparse
import os
import sys
import time
from typing import Dict

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import molecule_batches  # noqa: E402
from harness import write_json  # noqa: E402


def busy_fraction(runner: 'molecule_batches.Runner', batch,
                  steps: int) -> Dict[str, float]:
    r"""Kernel time over wall time of :obj:`steps` training steps."""
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
    if cuda:
        kernel_us = sum(e.self_device_time_total for e in events)
        launches = sum(e.count for e in events
                       if e.self_device_time_total > 0)
    else:
        kernel_us = sum(e.self_cpu_time_total for e in events
                        if e.key.startswith('aten::'))
        launches = sum(e.count for e in events if e.key.startswith('aten::'))
    return dict(step_ms=1e3 * wall / steps,
                kernel_ms=1e-3 * kernel_us / steps,
                busy=1e-6 * kernel_us / wall,
                kernels_per_step=launches / steps)


def main(argv=None) -> Dict:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--device', default='cuda')
    parser.add_argument('--models', default='hot_kernel,hot_softmax,'
                        'gps_multihead')
    parser.add_argument('--batch-size', type=int, default=128)
    parser.add_argument('--width', type=int, default=64)
    parser.add_argument('--layers', type=int, default=4)
    parser.add_argument('--heads', type=int, default=4)
    parser.add_argument('--steps', type=int, default=10)
    parser.add_argument('--warmup', type=int, default=5)
    parser.add_argument('--synthetic', action='store_true')
    parser.add_argument('--root', default=os.path.join(
        molecule_batches.ROOT, 'data_cache', 'nci_tpsa'))
    parser.add_argument('--quick', action='store_true',
                        help='8 molecules, width 16, 2 layers, 2 steps')
    parser.add_argument('--out', default=None)
    args = parser.parse_args(argv)
    if args.quick:
        args.batch_size, args.width, args.layers = 8, 16, 2
        args.steps, args.warmup = 2, 1
    if not args.synthetic and not molecule_batches._has_rdkit_and_ogb():
        args.synthetic = True
    from torch_geometric_hot.data import ModelPlanner
    device = torch.device(args.device)
    rows = {}
    for name in args.models.split(','):
        torch.manual_seed(0)
        runner = molecule_batches.Runner(molecule_batches.build_model(
            name, args.width, args.layers, args.heads), device)
        batch = molecule_batches.load_batches(
            args.root, args.batch_size, 1, args.synthetic,
            ModelPlanner(runner.model), device)[0].to(device)
        for _ in range(args.warmup):
            runner.train_step(batch)
        rows[name] = busy_fraction(runner, batch, args.steps)
        print(f'{name:<18} step {rows[name]["step_ms"]:8.2f} ms, kernels '
              f'{rows[name]["kernel_ms"]:8.2f} ms, busy '
              f'{100 * rows[name]["busy"]:5.1f} %, '
              f'{rows[name]["kernels_per_step"]:.0f} kernels per step',
              flush=True)
    result = dict(settings=dict(vars(args), torch=torch.__version__),
                  models=rows)
    if args.out:
        write_json(args.out, result)
    return result


if __name__ == '__main__':
    main()
