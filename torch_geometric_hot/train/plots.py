r"""Figures of a training command's run folder (``OUT/<model>_seed<seed>/``).

Examples::

    # TokenGT's mean attention distance in hops by head and depth, on
    # validation molecules, with the weights of the best validation epoch
    python -m torch_geometric_hot.train.plots attention-distance \
        runs/demo/tokengt-lap_seed0 --root data_cache/ogb --offline

    # the run's learning curve (training loss and metric per epoch)
    python -m torch_geometric_hot.train.plots learning-curves \
        runs/demo/tokengt-lap_seed0
"""
import argparse
import json
import os
import os.path as osp
import sys
from typing import Dict, List, Optional

import torch

from torch_geometric_hot.train import checkpoint

DISTANCE_FIGURE, DISTANCE_FILE = ('attention_distance.png',
                                  'attention_distance.json')
PARTS = ('train', 'valid', 'test')


def _state(run_dir: str, which: str) -> Dict:
    path = osp.join(run_dir, checkpoint.BEST if which == 'best' else
                    checkpoint.LAST)
    if not osp.isfile(path):
        raise FileNotFoundError(f"'RUN_DIR': {run_dir} holds no {which} "
                                f"checkpoint ({osp.basename(path)}); pass "
                                f"the folder of one run of the training "
                                f"command (<out>/<model>_seed<seed>)")
    return torch.load(path, map_location='cpu', weights_only=True)


def rebuild_run(run_dir: str, which: str = 'best',
                root: Optional[str] = None, offline: bool = False,
                device: str = 'cpu'):
    r"""The run of :obj:`run_dir` rebuilt as the training command built it
    (its dataset, with the model's views, and its model) from the run
    arguments saved in its checkpoint, with the checkpoint's weights.

    Args:
        run_dir (str): The run's folder.
        which (str): ``'best'`` (the best validation epoch) or ``'last'``.
        root (str, optional): The dataset root (default: the command's).
        offline (bool): As the command's ``--offline``.
        device (str): Where the model goes.

    Returns:
        ``train.trainer.Run`` (its :attr:`model` holds the weights, its
        :attr:`bench` the dataset) and the checkpoint's epoch.
    """
    from torch_geometric_hot.train.cli import parse_args
    from torch_geometric_hot.train.distributed import setup
    from torch_geometric_hot.train.trainer import Run
    state = _state(run_dir, which)
    saved = dict(state['args'])
    argv = ['--dataset', saved['dataset'], '--model', saved['model'],
            '--device', device, '--no-progress']
    if root is not None:
        argv += ['--root', root]
    if offline:
        argv.append('--offline')
    args = parse_args(argv)
    for key, value in saved.items():
        setattr(args, key, value)
    args.model = [saved['model']]
    args.seed = [saved['seed']]
    run = Run(args, saved['model'], saved['seed'], setup(device), None)
    run.model.load_state_dict(state['model'])
    return run, int(state['epoch'])


def attention_distance(run_dir: str, which: str = 'best',
                       split: str = 'valid', molecules: int = 1000,
                       batch_size: int = 64, root: Optional[str] = None,
                       offline: bool = False, device: str = 'cpu',
                       out: Optional[str] = None) -> Dict:
    r"""Mean attention distance in hops of the TokenGT run in
    :obj:`run_dir`, by layer and head
    (:func:`~torch_geometric_hot.analysis.mean_attention_distance`), on the
    first :obj:`molecules` of a split; writes the figure and the values
    (``attention_distance.png`` and ``.json``, in :obj:`out`, default the
    run folder) and returns the values."""
    from torch_geometric.loader import DataLoader

    from torch_geometric_hot.analysis import (mean_attention_distance,
                                              plot_attention_distance)
    from torch_geometric_hot.models import TokenGT
    from torch_geometric_hot.train.zoo import predict
    if split not in PARTS:
        raise ValueError(f"'--split' must be one of {PARTS}, got {split!r}")
    run, epoch = rebuild_run(run_dir, which, root, offline, device)
    if not isinstance(run.model, TokenGT):
        raise ValueError(f"'RUN_DIR': {run_dir} is a run of "
                         f"{run.config['model']!r}, not of a TokenGT model")
    index = run.bench.split[split][:molecules]
    loader = DataLoader(run.bench.dataset[index], batch_size=batch_size)
    distance = mean_attention_distance(
        run.model, loader, lambda batch: predict(run.model, run.spec, batch),
        run.ctx.device)
    out = out or run_dir
    os.makedirs(out, exist_ok=True)
    name = run.config['model']
    plot_attention_distance(
        distance, osp.join(out, DISTANCE_FIGURE),
        f'{name}, {which} epoch {epoch}: {index.numel():,} {split} '
        f'molecules')
    result = {'run': run_dir, 'model': name, 'checkpoint': which,
              'epoch': epoch, 'split': split, 'molecules': index.numel(),
              'layers': distance.size(0), 'heads': distance.size(1),
              'mean_distance_hops': distance.tolist()}
    with open(osp.join(out, DISTANCE_FILE), 'w') as f:
        json.dump(result, f, indent=1)
    return result


def learning_curves(run_dir: str, out: Optional[str] = None) -> str:
    r"""The run's learning curve (``train.report.plot_run``: training loss
    and the metric on train/valid/test per epoch) from its
    ``metrics.jsonl``, written to :obj:`out` (default: the run folder's
    ``curve.png``); returns the image's path."""
    from torch_geometric_hot.train import report
    from torch_geometric_hot.train.trainer import (CURVE_FILE, METRICS_FILE,
                                                   SUMMARY_FILE)
    if not osp.isfile(osp.join(run_dir, METRICS_FILE)):
        raise FileNotFoundError(f"'RUN_DIR': {run_dir} holds no "
                                f"{METRICS_FILE}; pass the folder of one run "
                                f"of the training command")
    history = report.read_history(run_dir)
    metric, title = 'metric', osp.basename(osp.normpath(run_dir))
    summary = osp.join(run_dir, SUMMARY_FILE)
    if osp.isfile(summary):
        with open(summary) as f:
            done = json.load(f)
        metric = done['metric']
        title = f"{done['model']} on {done['dataset']}, seed {done['seed']}"
    path = out or osp.join(run_dir, CURVE_FILE)
    report.plot_run(history, metric, path, title)
    return path


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog='python -m torch_geometric_hot.train.plots',
        description=__doc__.split('\n\n')[0],
        epilog=__doc__.split('\n\n', 1)[1],
        formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest='command', required=True)
    dist = commands.add_parser(
        'attention-distance', help="TokenGT's mean attention distance in "
        "hops by head and depth")
    dist.add_argument('run_dir', metavar='RUN_DIR')
    dist.add_argument('--checkpoint', default='best',
                      choices=['best', 'last'])
    dist.add_argument('--split', default='valid', choices=list(PARTS))
    dist.add_argument('--molecules', type=int, default=1000,
                      help='the first N molecules of the split (default: '
                      '%(default)s)')
    dist.add_argument('--batch-size', type=int, default=64)
    dist.add_argument('--root', default=None,
                      help="the dataset root of the run (default: the "
                      "training command's)")
    dist.add_argument('--offline', action='store_true',
                      help='as the run: the offline dataset')
    dist.add_argument('--device', default='cpu')
    dist.add_argument('--out', default=None,
                      help='folder of the figure and values (default: '
                      'RUN_DIR)')
    curves = commands.add_parser('learning-curves',
                                 help="the run's learning curve")
    curves.add_argument('run_dir', metavar='RUN_DIR')
    curves.add_argument('--out', default=None,
                        help='the image (default: RUN_DIR/curve.png)')
    return parser


def main(argv: Optional[List[str]] = None) -> Dict:
    r"""Runs one subcommand; returns what it computed."""
    os.environ.setdefault('OUTDATED_IGNORE', '1')  # ogb's version check
    args = build_parser().parse_args(argv)
    try:
        if args.command == 'learning-curves':
            path = learning_curves(args.run_dir, args.out)
            print(f'wrote {path}')
            return {'figure': path}
        if args.molecules < 1 or args.batch_size < 1:
            raise ValueError("'--molecules' and '--batch-size' must be >= 1")
        result = attention_distance(
            args.run_dir, args.checkpoint, args.split, args.molecules,
            args.batch_size, args.root, args.offline, args.device, args.out)
    except (FileNotFoundError, ValueError) as error:
        raise SystemExit(str(error)) from None
    out = args.out or args.run_dir
    print(f"{result['model']}, {result['checkpoint']} epoch "
          f"{result['epoch']}: mean attention distance (hops) on "
          f"{result['molecules']:,} {result['split']} molecules")
    for layer, row in enumerate(result['mean_distance_hops'], 1):
        print(f'  layer {layer}: ' + '  '.join(f'{v:.2f}' for v in row))
    print(f"wrote {osp.join(out, DISTANCE_FIGURE)} and "
          f"{osp.join(out, DISTANCE_FILE)}")
    return result


if __name__ == '__main__':
    sys.exit(main() and 0)
