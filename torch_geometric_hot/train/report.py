r"""Tables and learning curves of finished runs."""
import json
import math
import os
import os.path as osp
from collections import OrderedDict
from typing import Dict, List, Sequence


def _mean_std(values: Sequence[float]) -> str:
    values = [v for v in values if not math.isnan(v)]
    if not values:
        return 'nan'
    mean = sum(values) / len(values)
    if len(values) == 1:
        return f'{mean:.4f}'
    std = math.sqrt(sum((v - mean)**2 for v in values) / (len(values) - 1))
    return f'{mean:.4f} ± {std:.4f}'


def by_model(summaries: List[Dict]) -> Dict[str, List[Dict]]:
    groups: Dict[str, List[Dict]] = OrderedDict()
    for s in summaries:
        groups.setdefault(s['model'], []).append(s)
    return groups


def _settings(summary: Dict) -> Dict:
    # what defines a run but its model and seed
    return {k: v for k, v in summary['config'].items()
            if k not in ('model', 'seed')}


def runs_like(folder: str, summaries: List[Dict],
              summary_file: str) -> List[Dict]:
    r""":obj:`summaries` and the finished runs of other commands in
    :obj:`folder` (each subfolder's :obj:`summary_file`) on the same dataset
    with the same settings but model and seed: models in the order of
    :obj:`summaries`, then of the subfolders' names; seeds in order."""
    key = (summaries[0]['dataset'], _settings(summaries[0]))
    own = {(s['model'], s['seed']) for s in summaries}
    others = []
    for name in sorted(os.listdir(folder)):
        path = osp.join(folder, name, summary_file)
        if not osp.isfile(path):
            continue
        with open(path) as f:
            summary = json.load(f)
        if 'config' in summary and (summary['dataset'],
                                    _settings(summary)) == key and \
                (summary['model'], summary['seed']) not in own:
            others.append(summary)
    runs = summaries + others
    order = list(by_model(runs))
    return sorted(runs, key=lambda s: (order.index(s['model']), s['seed']))


def _fitted(runs: List[Dict]) -> str:
    values = [r['fitted_loss'] for r in runs
              if r.get('fitted_loss') is not None]
    return _mean_std(values) if values else ''


def results_table(summaries: List[Dict]) -> str:
    r"""A Markdown table: per model, the test metric at the best validation
    epoch (mean ± sample standard deviation over seeds), the validation
    metric, the training loss of the last epoch (logged in training mode),
    the fitted loss (the last weights in evaluation mode on training
    molecules; empty where not measured), epochs, parameters, seconds per
    epoch and peak memory; and the mean predictor's test metric."""
    if not summaries:
        return '(no runs)'
    metric = summaries[0]['metric']
    lines = [f'| model | test {metric} | valid {metric} | final train loss '
             f'| fitted loss | seeds | epochs | parameters | s / epoch '
             f'| peak MB |', '|---' * 10 + '|']
    for model, runs in by_model(summaries).items():
        lines.append(
            f"| {model} | {_mean_std([r['test'] for r in runs])} | "
            f"{_mean_std([r['valid'] for r in runs])} | "
            f"{_mean_std([r.get('final_loss', math.nan) for r in runs])} | "
            f"{_fitted(runs)} | {len(runs)} | "
            f"{runs[0]['epochs']} | {runs[0]['parameters']:,} | "
            f"{sum(r['seconds_per_epoch'] for r in runs) / len(runs):.1f} | "
            f"{max(r['peak_mb'] for r in runs):.0f} |")
    lines.append(f"| predict the training mean | "
                 f"{summaries[0]['mean_predictor_test']:.4f} | | | | | | | "
                 f"| |")
    return '\n'.join(lines)


def read_history(run_dir: str) -> List[Dict]:
    with open(osp.join(run_dir, 'metrics.jsonl')) as f:
        return [json.loads(line) for line in f if line.strip()]


def plot_run(history: List[Dict], metric: str, path: str,
             title: str) -> None:
    r"""One run's learning curve: training loss and the metric on
    train/valid/test per epoch."""
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    epochs = [r['epoch'] for r in history]
    fig, (ax_loss, ax_metric) = plt.subplots(1, 2, figsize=(9, 3.4))
    ax_loss.plot(epochs, [r['loss'] for r in history], marker='o')
    ax_loss.set(xlabel='epoch', ylabel='training loss', title='loss')
    for part in ('train', 'valid', 'test'):
        ax_metric.plot(epochs, [r[part] for r in history], marker='o',
                       label=part)
    ax_metric.set(xlabel='epoch', ylabel=metric, title=metric)
    ax_metric.legend()
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_models(histories: Dict[str, List[List[Dict]]], metric: str,
                path: str, title: str) -> None:
    r"""The validation and test metric of every model per epoch (mean over
    its seeds), side by side."""
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8), sharey=True)
    for model, runs in histories.items():
        length = min(len(h) for h in runs)
        epochs = list(range(1, length + 1))
        for ax, part in zip(axes, ('valid', 'test')):
            mean = [sum(h[e][part] for h in runs) / len(runs)
                    for e in range(length)]
            ax.plot(epochs, mean, marker='o', label=model)
    for ax, part in zip(axes, ('valid', 'test')):
        ax.set(xlabel='epoch', ylabel=metric, title=f'{part} {metric}')
        ax.grid(alpha=0.3)
    axes[0].legend()
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
