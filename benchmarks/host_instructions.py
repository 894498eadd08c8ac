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
kernel, ``molecule_batches.py --count-ops`` counts those), and the
arithmetic and its threads, which it does count, at a small size.

    python benchmarks/host_instructions.py \
        --out benchmarks/results/host_instructions.json
"""
import argparse
import os
import shutil
import sys
from typing import Callable, Dict, List, Optional

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from harness import software_versions, write_json  # noqa: E402

MODELS = ('gps_multihead', 'hot_kernel', 'hot_softmax', 'tokengt_softmax',
          'tokengt_performer')


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


def instructions(name: str, args: argparse.Namespace) -> float:
    r"""Instructions per step of model :obj:`name`: callgrind's count of
    :obj:`args.steps` steps in a process of its own, over the steps."""
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
    return stats.counts(denoise=True) / args.steps


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
        counts[name] = instructions(name, args)
        print(f'{name:<20} {counts[name] / 1e6:8.2f} M instructions per '
              f'step', flush=True)
    base = counts['gps_multihead']
    for name, count in counts.items():
        print(f'{name:<20} {count / base:6.2f}x gps_multihead')
    result = dict(settings=dict(batch_size=args.batch_size, width=args.width,
                                steps=args.steps, layout='cuda',
                                versions=software_versions()),
                  models={name: dict(instructions=count,
                                     to_gps_multihead=count / base)
                          for name, count in counts.items()})
    if args.out:
        write_json(args.out, result)
    return result


if __name__ == '__main__':
    main()
