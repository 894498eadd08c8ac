r"""Host instructions of one training step per model, counted by callgrind:
a deterministic stand-in, on the CPU, for the host's share of an eager GPU
step.

An eager training step on a GPU is paced by the host: Python, the
dispatcher and autograd, one kernel launch after another, while the device
waits (``molecule_batches.py --busy``). Timing that on a busy 2-core
machine is noise; counting it is not. Each model trains on one small
batch (default 1 molecule, width 8, so that the arithmetic is a small part
of the count) with the layout CUDA uses
(:func:`~torch_geometric_hot.testing.cuda_layout`: the native CPU kernels
off, the GPU's packed blocks and token layouts), and
:meth:`torch.utils.benchmark.Timer.collect_callgrind` counts the
instructions of :obj:`--steps` steps (forward, L1 loss, backward, a
foreach Adam step, as on a GPU), the setup excluded. Ratios are to
``gps_multihead``. It needs valgrind, and each model takes a few minutes.

What it does not see: the launches themselves (a GPU driver call per
kernel, ``molecule_batches.py --count-ops`` counts those). What it sees
that a GPU's host does not: the arithmetic, which the CPU runs itself. The
count is therefore also split by function: the instructions of the CPU's
arithmetic and memory kernels (:data:`KERNEL_SYMBOLS`: MKL and oneDNN,
ATen's vectorised loops, reductions, gathers and scatters, libc's
``memset``/``memcpy``), work a GPU runs on the device, and the rest, the
host's own work (Python, dispatch, autograd, allocation, shape and
metadata), with its ratio to ``gps_multihead``. The split goes by symbol
names, so it is an estimate; the kernels' share grows with the size.

    python benchmarks/host_instructions.py \
        --out benchmarks/results/host_instructions.json
"""
import argparse
import os
import re
import shutil
import sys
from typing import Callable, Dict, List, Optional

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from harness import software_versions, write_json  # noqa: E402

MODELS = ('gps_multihead', 'hot_kernel', 'hot_softmax', 'tokengt_softmax',
          'tokengt_performer')

#: Symbols of the CPU's arithmetic and memory kernels, the work that a GPU
#: runs on the device: MKL's and oneDNN's products, ATen's vectorised and
#: element loops and its reductions, the loops of its gathers and
#: scatters, and libc's memory fills and copies.
KERNEL_SYMBOLS = re.compile(
    r'mkl_|dnnl|gemm|blas|Vectorized|loop_2d_from_1d|basic_loop|'
    r'serial_for_each|_sum<|row_sum|index_select_out_cpu_|index_add_cpu|'
    r'cpu_kernel|_kernel\(|kernel_impl|__mem(set|cpy|move|cmp)')


def is_kernel(symbol: str) -> bool:
    r"""Whether the function :obj:`symbol` (callgrind's name for it) is one
    of the CPU's arithmetic or memory kernels (:data:`KERNEL_SYMBOLS`)."""
    return KERNEL_SYMBOLS.search(symbol) is not None


def prepare(name: str, batch_size: int, width: int,
            root: Optional[str] = None) -> Callable[[], None]:
    r"""One training step of model :obj:`name` (the function's
    :obj:`model` attribute) on its first batch of :obj:`batch_size`
    molecules, with CUDA's layout (the batch planned for it as the loader's
    workers plan it) and the value checks off, after two untimed steps."""
    import molecule_batches as mb

    from torch_geometric_hot.data import (ModelPlanner, PlannedLoader,
                                          real_graphs)
    from torch_geometric_hot.ops.layout_device import planned_for
    from torch_geometric_hot.validation import validation
    torch.set_num_threads(1)
    graphs = mb.load_graphs(root or mb.parse_args([]).root, batch_size)
    torch.manual_seed(0)
    model = mb.build_model(name, width, 4, 4)
    batch = next(iter(PlannedLoader(graphs, batch_size, device='cuda',
                                    planner=ModelPlanner(model))))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3, foreach=True)

    def step() -> None:
        with planned_for('cuda'), validation(False):
            optimizer.zero_grad()
            model.train()
            out = real_graphs(model(batch), batch)
            (out - real_graphs(batch.y, batch)).abs().mean().backward()
            optimizer.step()

    step()
    step()
    step.model = model  # type: ignore[attr-defined]
    return step


def instructions(name: str, args: argparse.Namespace) -> Dict[str, float]:
    r"""Instructions per step of model :obj:`name`, callgrind's count of
    :obj:`args.steps` steps in a process of its own over the steps:
    :obj:`total`, and the share of the CPU's kernels (:func:`is_kernel`,
    each function's own instructions), :obj:`kernels`."""
    from torch.utils.benchmark import Timer
    here = os.path.dirname(os.path.abspath(__file__))
    setup = (f'import sys; sys.path.insert(0, {here!r}); '
             f'import host_instructions; step = host_instructions.prepare('
             f'{name!r}, {args.batch_size}, {args.width}, {args.root!r})')
    # the count runs in a fresh interpreter: this one's
    path = os.environ.get('PATH', '')
    os.environ['PATH'] = os.path.dirname(sys.executable) + os.pathsep + path
    try:
        stats = Timer('step()', setup=setup).collect_callgrind(
            number=args.steps, repeats=1)[0]
    finally:
        os.environ['PATH'] = path
    kernels = sum(count for count, symbol in
                  stats.as_standardized().stats(inclusive=False)
                  if is_kernel(symbol))
    return dict(total=stats.counts(denoise=True) / args.steps,
                kernels=kernels / args.steps)


def parse_args(argv: Optional[List[str]] = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--models', default=','.join(MODELS),
                        help='comma-separated; must include gps_multihead')
    parser.add_argument('--batch-size', type=int, default=1)
    parser.add_argument('--width', type=int, default=8)
    parser.add_argument('--steps', type=int, default=2)
    parser.add_argument('--root', default=None)
    parser.add_argument('--out', default=None, help='JSON output path')
    args = parser.parse_args(argv)
    args.models = [m for m in args.models.split(',') if m]
    if 'gps_multihead' not in args.models:
        parser.error("--models must include 'gps_multihead' (the ratios "
                     "are to it)")
    if min(args.batch_size, args.width, args.steps) < 1:
        parser.error('--batch-size, --width and --steps must be >= 1')
    return args


def main(argv: Optional[List[str]] = None) -> Dict:
    args = parse_args(argv)
    if shutil.which('valgrind') is None:
        raise SystemExit('host_instructions.py needs valgrind (callgrind)')
    counts = {}
    for name in args.models:
        counts[name] = count = instructions(name, args)
        print(f'{name:<20} {count["total"] / 1e6:8.2f} M instructions per '
              f'step, {count["kernels"] / 1e6:.2f} M of them in the '
              f'kernels', flush=True)
    base = counts['gps_multihead']
    base_host = base['total'] - base['kernels']
    models = {}
    for name, count in counts.items():
        host = count['total'] - count['kernels']
        models[name] = dict(instructions=count['total'],
                            to_gps_multihead=count['total'] / base['total'],
                            kernel_instructions=count['kernels'],
                            host_instructions=host,
                            host_to_gps_multihead=host / base_host)
        print(f'{name:<20} {models[name]["to_gps_multihead"]:6.2f}x '
              f'gps_multihead, without the kernels '
              f'{models[name]["host_to_gps_multihead"]:6.2f}x')
    result = dict(settings=dict(batch_size=args.batch_size, width=args.width,
                                steps=args.steps, layout='cuda',
                                versions=software_versions()),
                  models=models)
    if args.out:
        write_json(args.out, result)
    return result


if __name__ == '__main__':
    main()
