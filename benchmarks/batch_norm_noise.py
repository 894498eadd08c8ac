r"""How much of a finished run's logged training loss is batch norm's
per-batch noise (``docs/results.md``, "The logged loss and the fit").

The training command logs the mean loss over an epoch's steps in training
mode, where every batch norm normalises by the statistics of the batch in
hand. For the last weights of one run of the command this measures

* ``logged``: the logged loss of the run's last epoch (``metrics.jsonl``);
* ``train_mode``: the loss of the same weights in training mode over the
  training split in shuffled batches of the run's size (the order of epoch
  ``--epoch``; default: the one after the run's last), with no step taken;
* ``train_mode_except``: the same with the modules named by ``--eval``
  (default ``norm``, the norm before the head of the HOT and TokenGT
  models) in evaluation mode, normalising by their running statistics;
* ``fitted``: the loss in evaluation mode on the first ``--fit-molecules``
  molecules of the training split (the command's ``fitted_loss``).

The gap from ``train_mode`` to ``train_mode_except`` is the named modules'
share of the noise, the gap from there to ``fitted`` the other batch norms'.

Run (a variant of ``fit_ablations.py`` is rebuilt as that script ran it)::

    python benchmarks/batch_norm_noise.py \
        runs/fsp3/hot-kernel+bn-head_seed0 --root data/fsp3 --offline \
        --out batch_norm_noise.json
"""
import argparse
import copy
import os
import os.path as osp
import sys
from typing import Dict, List, Optional

import torch

HERE = osp.dirname(osp.abspath(__file__))
sys.path[:0] = [HERE, osp.dirname(HERE)]  # fit_ablations, the package

import fit_ablations  # noqa: E402
from harness import software_versions, write_json  # noqa: E402

from torch_geometric_hot.train import zoo  # noqa: E402
from torch_geometric_hot.train.plots import rebuild_run  # noqa: E402
from torch_geometric_hot.train.report import read_history  # noqa: E402
from torch_geometric_hot.train.trainer import _loss, _targets  # noqa: E402


def parse_args(argv: Optional[List[str]] = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('run_dir', metavar='RUN_DIR',
                        help='the folder of one run of the training command')
    parser.add_argument('--root', default=None,
                        help="the run's dataset root (the command's --root)")
    parser.add_argument('--offline', action='store_true',
                        help="as the command's --offline")
    parser.add_argument('--eval', default='norm',
                        help='comma-separated names of the model modules '
                        'kept in evaluation mode for train_mode_except '
                        '(default: norm)')
    parser.add_argument('--epoch', type=int, default=None,
                        help="the epoch whose batch order the training-mode "
                        "pass reads (default: the one after the run's last)")
    parser.add_argument('--out', default=None, help='write the result here')
    return parser.parse_args(argv)


@torch.no_grad()
def train_mode_loss(run, model: torch.nn.Module, in_eval: List[str],
                    epoch: int) -> float:
    r"""The loss of :obj:`model`'s weights in training mode over the
    batches of the run's training split in the order of :obj:`epoch`, the
    modules :obj:`in_eval` in evaluation mode; :obj:`model` itself (its
    running statistics) is left as it was."""
    model = copy.deepcopy(model)
    model.train()
    modules = dict(model.named_modules())
    for name in in_eval:
        modules[name].eval()
    torch.manual_seed(epoch)  # dropout, where the model has any
    total, count = 0.0, 0
    for batch in run._loader('train', epoch):
        batch = batch.to(run.ctx.device)
        y = _targets(run.bench, batch)
        out = run._predict(model, batch).view_as(y)
        out, y = run._real(out, batch), run._real(y, batch)
        loss = _loss(run.loss, out.float(), run.scale.scale(y))
        total += float(loss) * y.size(0)
        count += y.size(0)
    return total / max(count, 1)


def main(argv: Optional[List[str]] = None) -> Dict:
    args = parse_args(argv)
    # fit_ablations' variants rebuild as that script registered them
    added = {name: spec for name, spec in fit_ablations.variants().items()
             if name not in zoo.MODELS}
    with fit_ablations._registered(added):
        return measure(args)


def measure(args: argparse.Namespace) -> Dict:
    run, epoch = rebuild_run(args.run_dir, 'last', args.root, args.offline)
    in_eval = [name for name in args.eval.split(',') if name]
    modules = dict(run.model.named_modules())
    missing = [name for name in in_eval if name not in modules]
    if missing:
        raise SystemExit(f"'--eval': the model has no module {missing}; "
                         f"its top-level modules: "
                         f"{[n for n, _ in run.model.named_children()]}")
    order = epoch + 1 if args.epoch is None else args.epoch
    result = {
        'run': osp.basename(osp.normpath(args.run_dir)),
        'model': run.config['model'], 'epoch': epoch,
        'logged': read_history(args.run_dir)[-1]['loss'],
        'train_mode': train_mode_loss(run, run.model, [], order),
        'train_mode_except': train_mode_loss(run, run.model, in_eval,
                                             order),
        'order_of_epoch': order,
        'in_eval': in_eval,
        'fitted': run.evaluate('fit')['loss'],
        'versions': software_versions()}
    for key in ('logged', 'train_mode', 'train_mode_except', 'fitted'):
        print(f'{key:<18} {result[key]:.5g}')
    if args.out:
        write_json(args.out, result)
    return result


if __name__ == '__main__':
    os.environ.setdefault('OUTDATED_IGNORE', '1')
    main()
