r"""Train and compare graph-level models on OGB molecule benchmarks, through
OGB's own loaders and evaluators.

Examples::

    # the offline benchmark (RDKit's NCI molecules written in the
    # PCQM4Mv2 layout, scored by OGB's PCQM4Mv2Evaluator)
    python -m torch_geometric_hot.train --dataset pcqm4mv2 --offline \
        --model hot-kernel,tokengt-lap,gin --out runs/demo

    # the real benchmark (downloaded by OGB into --root, or already there)
    python -m torch_geometric_hot.train --dataset ogbg-molhiv \
        --root data/ogb --model hot-kernel --device cuda --out runs/hiv

    # a paper's recipe: TokenGT (Lap) on PCQM4Mv2 on a GPU in bfloat16
    python -m torch_geometric_hot.train --dataset pcqm4mv2 \
        --preset tokengt-lap --device cuda --precision bf16 --out runs/pcqm

    # continue a killed run with the same arguments
    python -m torch_geometric_hot.train ... --resume runs/hiv/hot-kernel_seed0

    # train a finished run on, to 12 epochs (the schedule rebuilt)
    python -m torch_geometric_hot.train ... --epochs 12 --extend \
        --resume runs/hiv/hot-kernel_seed0

    # two processes (DistributedDataParallel; gloo on CPU, nccl on CUDA)
    torchrun --nproc_per_node=2 -m torch_geometric_hot.train ...
"""
import argparse
import json
import os
import os.path as osp
import re
import sys
from typing import Dict, List, Optional

from torch_geometric_hot.datasets.nci_descriptors import DESCRIPTORS
from torch_geometric_hot.ops.attention.hot import SIZE_SCALERS
from torch_geometric_hot.train.presets import PRESETS, smoke_values
from torch_geometric_hot.train.recipes import (LOSSES, OPTIMIZERS,
                                               PRECISIONS, SCHEDULES)
from torch_geometric_hot.train.zoo import MODELS

PROG = 'python -m torch_geometric_hot.train'
#: The arguments of :func:`~torch_geometric_hot.datasets.\
#: load_molecule_benchmark` that its data errors name, as options of the
#: command.
DATA_OPTIONS = {'name': '--dataset', 'root': '--root', 'offline': '--offline',
                'offline_molecules': '--offline-molecules',
                'offline_target': '--offline-target', 'offline_table': '--csv'}
#: The arguments of :func:`~torch_geometric_hot.datasets.read_molecule_csv`
#: that its errors start with, as options of the command.
TABLE_OPTIONS = {'path': '--csv', 'smiles_column': '--smiles-column',
                 'target_columns': '--target-columns'}
DATASET_HELP = ("an OGB molecule dataset: any 'ogbg-mol*' name "
                "(ogbg-molhiv, ogbg-molpcba, ogbg-moltox21, ogbg-molesol, "
                "...) or 'pcqm4mv2'")


def _models(text: str) -> List[str]:
    names = [t.strip() for t in text.split(',') if t.strip()]
    unknown = [n for n in names if n not in MODELS]
    if unknown or not names:
        raise argparse.ArgumentTypeError(
            f"unknown model(s) {unknown}; choose from {', '.join(MODELS)}")
    return names


def _seeds(text: str) -> List[int]:
    try:
        return [int(t) for t in text.split(',') if t.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"'--seed' takes integers separated by commas, got {text!r}"
        ) from None


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f'must be >= 1, got {value}')
    return value


def _positive_float(text: str) -> float:
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f'must be > 0, got {value}')
    return value


def _non_negative_float(text: str) -> float:
    value = float(text)
    if not value >= 0:
        raise argparse.ArgumentTypeError(f'must be >= 0, got {value}')
    return value


def _non_negative(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f'must be >= 0, got {value}')
    return value


def _betas(text: str) -> tuple:
    try:
        betas = tuple(float(t) for t in text.split(','))
    except ValueError:
        betas = ()
    if len(betas) != 2 or not all(0.0 <= b < 1.0 for b in betas):
        raise argparse.ArgumentTypeError(
            f"takes two numbers in [0, 1) separated by a comma (e.g. "
            f"0.9,0.999), got {text!r}")
    return betas


def build_parser() -> argparse.ArgumentParser:
    r"""The command's argument parser (``--help`` lists every option and
    model)."""
    models = '\n'.join(f'  {name:<22} {spec.description}'
                       for name, spec in MODELS.items())
    presets = '\n'.join(f'  {name:<22} {preset.description}'
                        for name, preset in PRESETS.items())
    parser = argparse.ArgumentParser(
        prog=PROG,
        description=__doc__.split('\n\n')[0],
        epilog=f'models:\n{models}\n\npresets:\n{presets}\n\n' +
        __doc__.split('\n\n', 1)[1],
        formatter_class=argparse.RawDescriptionHelpFormatter)
    data = parser.add_argument_group('data')
    data.add_argument('--dataset', default='pcqm4mv2', help=DATASET_HELP +
                      ' (default: %(default)s)')
    data.add_argument('--root', default='data_cache/ogb',
                      help="folder that holds the dataset folder, as OGB's "
                      "root (default: %(default)s)")
    data.add_argument('--offline', action='store_true',
                      help="when the dataset folder is missing, write the NCI "
                      "molecules that RDKit ships in the dataset's own layout "
                      "instead of downloading (targets: their topological "
                      "polar surface area; for classification tasks, TPSA "
                      "above quantiles)")
    data.add_argument('--offline-molecules', type=_positive, default=None,
                      help='with --offline, write only the first N molecules '
                      '(default: all 4,991 that RDKit parses; an existing '
                      'root must hold that many, without the option it is '
                      'read as it is)')
    data.add_argument('--offline-target', default='tpsa',
                      choices=list(DESCRIPTORS),
                      help="with --offline, the target the NCI molecules are "
                      "labelled with, computed by RDKit: " + '; '.join(
                          f'{k}: {d.summary}' for k, d in
                          DESCRIPTORS.items()) + " (default: %(default)s; "
                      "a root keeps the target it was written with)")
    data.add_argument('--csv', default=None,
                      help="with --offline, write the molecules of this CSV "
                      "file (a header row, a SMILES column and one numeric "
                      "column per task of --dataset) instead of the NCI "
                      "molecules; rows RDKit cannot parse are skipped and "
                      "counted; an existing root must hold this table")
    data.add_argument('--views', default='auto',
                      choices=['auto', 'stored', 'computed'],
                      help="the models' views and node identifiers: stored "
                      "with the dataset (computed once, cached on disk, held "
                      "in memory), computed batch by batch as the loader's "
                      "workers read the molecules (nothing stored), or auto: "
                      "stored up to 200,000 molecules (default: "
                      "%(default)s)")
    data.add_argument('--smiles-column', default='smiles',
                      help='SMILES column of --csv (default: %(default)s)')
    data.add_argument('--target-columns', default=None,
                      help='target columns of --csv, separated by commas')
    model = parser.add_argument_group('model and training')
    model.add_argument('--model', type=_models, default=['hot-kernel'],
                       help='one or more model names separated by commas '
                       '(listed below; default: hot-kernel)')
    model.add_argument('--hidden', type=_positive, default=64,
                       help='width of every model (default: %(default)s)')
    model.add_argument('--layers', type=_positive, default=4,
                       help='blocks of every model (default: %(default)s)')
    model.add_argument('--dropout', type=float, default=0.0,
                       help='dropout rate (default: %(default)s)')
    model.add_argument('--epochs', type=_positive, default=20,
                       help='epochs (default: %(default)s)')
    model.add_argument('--batch-size', type=_positive, default=128,
                       help='molecules per batch and process (default: '
                       '%(default)s)')
    model.add_argument('--heads', type=_positive, default=None,
                       help='attention heads of the attention models '
                       '(default: 4)')
    model.add_argument('--node-id-dim', type=_positive, default=16,
                       help="TokenGT's node identifier width (default: "
                       "%(default)s)")
    model.add_argument('--size-scaler', default=None,
                       choices=list(SIZE_SCALERS),
                       help="HOT models: each class's attention output "
                       "times a function of its key group's size c: log "
                       "(log(1 + c), for targets that count), none (plain "
                       "averages, for targets that depend on which "
                       "substructures are present), sqrt or count "
                       "(default: log; the HOT presets: none)")
    model.add_argument('--sign-flip', action='store_true',
                       help="TokenGT models: random sign flips of the "
                       "Laplacian identifiers in training, as in the paper "
                       "(a regulariser for descriptor targets; default: "
                       "off, the Laplacian TokenGT presets: on)")
    model.add_argument('--lr', type=_positive_float, default=1e-3,
                       help='peak learning rate (default: %(default)s)')
    model.add_argument('--seed', type=_seeds, default=[0],
                       help='one or more seeds separated by commas; each '
                       'model trains once per seed (default: 0)')
    recipe = parser.add_argument_group(
        'recipe', 'optimizer, schedule and precision; --preset sets them '
        'and the model options above to one paper\'s configuration '
        '(presets listed below), and options given here override it')
    recipe.add_argument('--preset', choices=list(PRESETS), default=None,
                        help='a paper\'s configuration (default: none)')
    recipe.add_argument('--optimizer', choices=OPTIMIZERS, default='adam',
                        help='adam, or adamw (decoupled weight decay) '
                        '(default: %(default)s)')
    recipe.add_argument('--weight-decay', type=_non_negative_float,
                        default=0.0, help='(default: %(default)s)')
    recipe.add_argument('--betas', type=_betas, default=(0.9, 0.999),
                        help='Adam\'s betas, e.g. 0.9,0.999 (default: '
                        '0.9,0.999)')
    recipe.add_argument('--schedule', choices=SCHEDULES, default='cosine',
                        help='learning rate after the warm-up, by optimizer '
                        'steps: cosine or linear decay to 0, constant, or '
                        'step (x0.25 after every 30%% of the steps) '
                        '(default: %(default)s)')
    recipe.add_argument('--warmup-steps', type=_non_negative, default=0,
                        help='steps of linear warm-up (default: '
                        '%(default)s)')
    recipe.add_argument('--max-steps', type=_positive, default=None,
                        help='train this many optimizer steps (the last '
                        'epoch cut short) instead of --epochs (default: '
                        'the steps of --epochs)')
    recipe.add_argument('--grad-clip', type=_positive_float, default=None,
                        help='clip the gradients\' global norm to this '
                        '(default: none)')
    recipe.add_argument('--accumulate', type=_positive, default=1,
                        help='add the gradients of N batches per optimizer '
                        'step (an effective batch of N x --batch-size per '
                        'process) (default: %(default)s)')
    recipe.add_argument('--precision', choices=PRECISIONS, default='32',
                        help='32 (float32), bf16 or 16 (torch.autocast on '
                        'the run\'s device; 16 with a gradient scaler) '
                        '(default: %(default)s)')
    recipe.add_argument('--loss', choices=LOSSES, default='auto',
                        help='l1, l2, bce, or auto: bce for classification, '
                        'l1 where the metric is the MAE, l2 otherwise '
                        '(default: %(default)s)')
    run = parser.add_argument_group('running')
    run.add_argument('--device', default='auto',
                     choices=['cpu', 'cuda', 'auto'],
                     help='auto picks CUDA when torch sees a GPU (default: '
                     '%(default)s)')
    run.add_argument('--num-workers', type=int, default=0,
                     help='DataLoader worker processes (default: '
                     '%(default)s)')
    run.add_argument('--threads', type=_positive, default=None,
                     help="torch's CPU threads per process (default: "
                     "torch's choice)")
    run.add_argument('--compile', action='store_true',
                     help='the model under torch.compile (on CUDA with '
                     'CUDA graphs, mode reduce-overhead), on batches padded '
                     'with padding graphs to a few sizes (powers of 1.25) '
                     'and planned for the launch-bound layout; one '
                     'compilation per size bucket and mode; padding never '
                     'reaches the loss or the metrics')
    run.add_argument('--compile-backend', default='inductor',
                     help="torch.compile's backend with --compile (e.g. "
                     "aot_eager to debug) (default: %(default)s)")
    run.add_argument('--size-limit', type=_positive, default=None,
                     help='elements a size-guarded layer may allocate '
                     '(torch_geometric_hot.validation.set_size_limit; a guard '
                     'against quadratic blow-ups, sized for small batches '
                     'by default; the presets raise it for their paper '
                     'batch) (default: the library\'s, 10^8)')
    run.add_argument('--smoke', action='store_true',
                     help='a seconds-long run on a few batches through the '
                     'same code (default epochs: 2); with --preset, also '
                     'batches of 8 with --accumulate 2, a one-step warm-up '
                     'and the width and depth cut to at most 64 and 2 '
                     '(heads, identifiers and the rest of the recipe kept)')
    run.add_argument('--out', default=None,
                     help='write per-epoch metrics (metrics.jsonl), the last '
                     'and best checkpoints, summary.json and a learning '
                     'curve per run into OUT/<model>_seed<seed>/, and '
                     'results.md/results.json/curves.png for all runs')
    run.add_argument('--resume', default=None, metavar='RUN_DIR',
                     help='continue the run in RUN_DIR (a folder with '
                     'last.pt) from its last checkpoint; the other arguments '
                     'must be those of that run')
    run.add_argument('--extend', action='store_true',
                     help='with --resume, train a finished or stopped run '
                     'on to the --epochs or --max-steps given (more than '
                     'the run\'s): the schedule is rebuilt for the new '
                     'length from the step reached, and the run\'s summary '
                     'records the extension')
    run.add_argument('--fit-molecules', type=_non_negative, default=10000,
                     metavar='N',
                     help='after training, the fit of the last weights: '
                     'their loss and metric in evaluation mode on the first '
                     'N molecules of the training split (the logged loss is '
                     'the mean over the last epoch\'s steps in training '
                     'mode, where batch norm uses each batch\'s '
                     'statistics); 0: not measured (default: 10000)')
    run.add_argument('--no-progress', action='store_true',
                     help='no progress bars')
    return parser


def parse_args(argv: Optional[List[str]] = None) -> argparse.Namespace:
    r"""Parses :obj:`argv` (default: the command line) and checks the
    combinations of options; an invalid one exits with a usage error."""
    parser = build_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parser.parse_args(argv)
    given = explicit_options(argv)
    if args.preset is not None:
        preset = PRESETS[args.preset]
        values = dict(preset.values)
        if args.smoke:
            values.update(smoke_values(preset))
        for key, value in values.items():
            if key not in given:
                setattr(args, key, value)
        args.model_options = dict(preset.options)
    else:
        args.model_options = {}
    if args.size_scaler is not None:
        if not any(name.startswith('hot-') for name in args.model):
            parser.error("'--size-scaler' applies to the HOT models "
                         "(hot-kernel, hot-softmax); --model has none")
        args.model_options['size_scaler'] = args.size_scaler
    if args.sign_flip:
        if not any(name.startswith('tokengt-lap') for name in args.model):
            parser.error("'--sign-flip' applies to the TokenGT models with "
                         "Laplacian identifiers (tokengt-lap, "
                         "tokengt-lap-performer); --model has none")
        args.model_options['sign_flip'] = True
    if args.smoke and 'epochs' not in given:
        args.epochs = 2
    args.explicit = sorted(given)
    if not 0.0 <= args.dropout < 1.0:
        parser.error(f"'--dropout' must be in [0, 1), got {args.dropout}")
    if args.num_workers < 0:
        parser.error("'--num-workers' must be >= 0")
    if args.resume is not None and (len(args.model) > 1 or
                                    len(args.seed) > 1):
        parser.error("'--resume' continues one run: give one --model and one "
                     "--seed")
    if args.extend and args.resume is None:
        parser.error("'--extend' continues a run: give --resume RUN_DIR")
    if args.offline_molecules is not None and not args.offline:
        parser.error("'--offline-molecules' needs --offline")
    if args.offline_target != 'tpsa' and (not args.offline or
                                          args.csv is not None):
        parser.error("'--offline-target' needs --offline and no --csv")
    if args.csv is not None:
        if not args.offline:
            parser.error("'--csv' needs --offline (it writes the dataset "
                         "folder when it is missing)")
        if not args.target_columns:
            parser.error("'--csv' needs --target-columns")
        if not osp.isfile(args.csv):
            parser.error(f"'--csv': no file {args.csv!r}")
    return args


def usage_error(message: str) -> SystemExit:
    r"""Writes :obj:`message` as the command's one-line usage error
    (``python -m torch_geometric_hot.train: error: ...``, as argparse writes
    its own, without the usage) and returns the :class:`SystemExit` of
    status 2 to raise."""
    sys.stderr.write(f'{PROG}: error: {message}\n')
    return SystemExit(2)


def data_error_message(error: Exception) -> str:
    r"""The message of a :class:`~torch_geometric_hot.datasets.\
    BenchmarkDataError` in the command's words: the library's arguments it
    names in quotes (``'root'``) as the options that set them
    (``--root``, see :data:`DATA_OPTIONS`)."""
    pattern = "'(" + '|'.join(DATA_OPTIONS) + ")'"
    return re.sub(pattern, lambda m: DATA_OPTIONS[m.group(1)], str(error))


def table_error_message(error: Exception) -> str:
    r"""The message of a :class:`~torch_geometric_hot.datasets.\
    MoleculeTableError` in the command's words: the argument it starts with
    (``'target_columns': ...``) as the option that sets it
    (``--target-columns: ...``, see :data:`TABLE_OPTIONS`)."""
    name, _, rest = str(error).partition(': ')
    return TABLE_OPTIONS[name.strip("'")] + ': ' + rest


def explicit_options(argv: List[str]) -> set:
    r"""The names (destinations) of the options :obj:`argv` gives."""
    parser = build_parser()
    for action in parser._actions:
        action.default = argparse.SUPPRESS
    return set(vars(parser.parse_args(argv)))


def main(argv: Optional[List[str]] = None) -> List[Dict]:
    r"""Runs every (model, seed) of the arguments in turn; returns their
    summaries."""
    os.environ.setdefault('OUTDATED_IGNORE', '1')  # ogb's version check
    args = parse_args(argv)
    import torch

    from torch_geometric_hot.datasets import (BenchmarkDataError,
                                              MoleculeTableError,
                                              benchmark_name)
    from torch_geometric_hot.train import checkpoint, report
    from torch_geometric_hot.train.distributed import (resolve_device,
                                                       setup, teardown)
    from torch_geometric_hot.train.trainer import (CURVE_FILE, Run, counted,
                                                   run_config, run_name)
    try:  # a clear error before any work
        benchmark_name(args.dataset)
    except ValueError as error:
        raise usage_error(f'--dataset: {error}') from None
    try:
        resolve_device(args.device)
    except ValueError as error:  # '--device cuda' without a GPU
        raise SystemExit(str(error)) from None
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    if args.size_limit is not None:
        from torch_geometric_hot.validation import set_size_limit
        set_size_limit(args.size_limit)
        # the loader's worker processes plan batches under the same limit
        os.environ['TORCH_GEOMETRIC_HOT_SIZE_LIMIT'] = str(args.size_limit)
    state = None
    if args.resume:
        try:  # one line naming the file or the arguments, before any work
            state = checkpoint.load(args.resume)
            checkpoint.check_same_run(state['args'], run_config(
                args, args.model[0], args.seed[0]), args.extend)
        except checkpoint.CheckpointError as error:
            raise SystemExit(str(error)) from None
    ctx = setup(args.device)
    summaries = []
    try:
        for model_name in args.model:
            for seed in args.seed:
                run_dir = args.resume or (osp.join(
                    args.out, run_name(model_name, seed)) if args.out
                                          else None)
                try:  # the dataset folder is opened, written or fetched
                    run = Run(args, model_name, seed, ctx, run_dir)
                except BenchmarkDataError as error:
                    raise usage_error(data_error_message(error)) from None
                except MoleculeTableError as error:
                    raise usage_error(table_error_message(error)) from None
                if state is not None:
                    try:
                        run.resume(state)
                    except checkpoint.CheckpointError as error:
                        raise SystemExit(str(error)) from None
                if ctx.is_main:
                    batch = run.recipe()['effective_batch_size']
                    print(f'{model_name}, seed {seed}: '
                          f'{run.num_parameters:,} parameters'
                          f'{_reference(args)} on '
                          f'{ctx.device} x {ctx.world_size}; '
                          f'{run.bench.name} ('
                          f"{counted(len(run.bench.dataset), 'molecule')}, "
                          f'metric {run.bench.metric}); '
                          f"{counted(run.total_steps, 'step')} of "
                          f"{counted(batch, 'molecule')}", flush=True)
                summary = run.fit()
                if ctx.distributed:
                    print(f'rank {ctx.rank} weights {summary["weights"]}',
                          flush=True)
                summaries.append(summary)
                if run_dir is not None and ctx.is_main:
                    report.plot_run(run.history, run.bench.metric,
                                    osp.join(run_dir, CURVE_FILE),
                                    f'{model_name} on {run.bench.name}, '
                                    f'seed {seed}')
        if ctx.is_main:
            _report(args, summaries, report)
    finally:
        teardown(ctx)
    return summaries


def _reference(args) -> str:
    if args.preset is None:
        return ''
    preset = PRESETS[args.preset]
    cut = ', cut by --smoke' if args.smoke else ''
    return (f' (preset {args.preset}: the paper\'s model has '
            f'{preset.reference_parameters}M{cut})')


def _print_table(summaries: List[Dict], report) -> None:
    print(f"\n{summaries[0]['dataset']}: test {summaries[0]['metric']} at "
          f"the best validation epoch\n{report.results_table(summaries)}")


def _report(args, summaries: List[Dict], report) -> None:
    from torch_geometric_hot.datasets.atomic_files import held_alone
    from torch_geometric_hot.train.trainer import SUMMARY_FILE, counted
    if args.out is None or args.resume:
        _print_table(summaries, report)
        return
    os.makedirs(args.out, exist_ok=True)
    # other commands may report into the same folder at the same time
    with held_alone(osp.join(args.out, '.results.lock')):
        runs = report.runs_like(args.out, summaries, SUMMARY_FILE)
        _print_table(runs, report)
        if len(runs) > len(summaries):
            print(f"(with {counted(len(runs) - len(summaries), 'run')} of "
                  f'other commands with these settings in {args.out})')
        with open(osp.join(args.out, 'results.md'), 'w') as f:
            f.write(report.results_table(runs) + '\n')
        with open(osp.join(args.out, 'results.json'), 'w') as f:
            json.dump(runs, f, indent=1)
        histories = {model: [report.read_history(osp.join(
            args.out, f"{model}_seed{r['seed']}")) for r in group]
                     for model, group in report.by_model(runs).items()}
        report.plot_models(histories, runs[0]['metric'],
                           osp.join(args.out, 'curves.png'),
                           f"{runs[0]['dataset']}: mean over seeds")
    print(f"wrote {osp.join(args.out, 'results.md')} and "
          f"{osp.join(args.out, 'curves.png')}")
