r"""Set-to-graph: Delaunay triangulation of random point sets (`HOT
<https://arxiv.org/abs/2110.14416>`_ §5, Table 3, after `Set2Graph
<https://arxiv.org/abs/2002.08772>`_).

Each set holds :math:`n` points uniform in the unit square: :math:`n = 50`
(the default), or a size drawn uniformly per set from
:math:`\{20, \dots, 80\}` with ``--points 20 80`` (the paper's second
setting; ``--smoke`` draws from 8 to 12, so it covers sets of different
sizes in one batch); every ordered pair is
classified as a Delaunay edge or not
(:class:`~torch_geometric_hot.datasets.DelaunaySets`). Two models with the
same width, the same optimiser, the same number of steps and the same sets:

* **HOT** (:class:`~torch_geometric_hot.models.HOTSetToGraph`):
  :math:`[\mathrm{Enc}_{1\to 1}]_{\times L} - \mathrm{Enc}_{1\to 2} -
  \mathrm{MLP}` with softmax attention;
* **S2G+** (the invariant-MLP baseline of Set2Graph):
  :math:`[L_{1\to 1} - \mathrm{ReLU} - \mathrm{LN}]_{\times L} -
  L_{1\to 2} - \mathrm{MLP}` with the full equivariant bases.

Both minimise binary cross-entropy plus :math:`1 - \text{soft-F}_1` (as in
the paper). Test accuracy, precision, recall and F1 of the edge-wise
classification on held-out sets, per seed and averaged; ``results.json``
and ``delaunay.png`` (test F1 during training, and one test set with the
edges each model predicts) go to ``--out``.

Run ``python examples/hot_delaunay.py`` (the default budget; see
``docs/paper_results.md`` for its time) or ``--smoke`` (seconds). Training
runs on ``--device`` (``auto``, the default: CUDA when torch sees a GPU,
else the CPU; or ``cpu``, ``cuda``), e.g.
``python examples/hot_delaunay.py --smoke --device cuda``.
"""
import argparse
import json
import os
import sys
import time
from typing import Dict, List

import torch
from torch import Tensor
from torch_geometric.loader import DataLoader
from tqdm import tqdm

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(
    __file__))))
from torch_geometric_hot.data import PairView  # noqa: E402
from torch_geometric_hot.datasets import DelaunaySets  # noqa: E402
from torch_geometric_hot.models import HOTSetToGraph  # noqa: E402
from torch_geometric_hot.nn import EquivariantLinear  # noqa: E402
from torch_geometric_hot.train import resolve_device  # noqa: E402
from torch_geometric_hot.transforms import AddSecondOrderView  # noqa: E402

MODELS = ('HOT', 'S2G+')


class SetToGraphMLP(torch.nn.Module):
    r"""S2G+: :math:`[L_{1\to 1} - \mathrm{ReLU} - \mathrm{LN}]_{\times L}
    - L_{1\to 2} - \mathrm{MLP}` on the pair view. The layer norms keep
    the per-element signal alive: without them it shrinks about threefold
    per layer at initialisation and the pair logits start almost constant
    (the model then stays at "no edge")."""
    def __init__(self, channels: int, num_layers: int, dropout: float):
        super().__init__()
        self.encoder = torch.nn.Linear(2, channels)
        self.layers = torch.nn.ModuleList([
            EquivariantLinear(channels, channels, 1, 1, normalize='mean')
            for _ in range(num_layers)
        ])
        self.norms = torch.nn.ModuleList([
            torch.nn.LayerNorm(channels) for _ in range(num_layers)
        ])
        self.lift = EquivariantLinear(channels, channels, 1, 2,
                                      normalize='mean')
        self.head = torch.nn.Sequential(torch.nn.ReLU(),
                                        torch.nn.Dropout(dropout),
                                        torch.nn.Linear(channels, channels),
                                        torch.nn.ReLU(),
                                        torch.nn.Linear(channels, 1))

    def forward(self, x: Tensor, view: PairView) -> Tensor:
        h = self.encoder(x)
        for layer, norm in zip(self.layers, self.norms):
            h = norm(layer(h, view).relu())
        return self.head(self.lift(h, view))


def build(name: str, args: argparse.Namespace) -> torch.nn.Module:
    if name == 'HOT':
        return HOTSetToGraph(args.channels, 1, num_layers=args.layers,
                             heads=args.heads, dropout=args.dropout,
                             node_encoder=torch.nn.Linear(2, args.channels))
    return SetToGraphMLP(args.channels, args.layers, args.dropout)


def edge_scores(model: torch.nn.Module, batch) -> Tensor:
    r"""One logit per pair of :obj:`batch.edge_index` (the off-diagonal
    entries of the pair view, in the same order). Both models see the
    points standardised (unit square centred, unit variance per axis)."""
    view = PairView.from_data(batch)
    x = (batch.x - 0.5) * 12**0.5
    if isinstance(model, HOTSetToGraph):
        out = model(x, batch.edge_index, batch.batch,
                    num_graphs=batch.num_graphs, view=view)
    else:
        out = model(x, view)
    return out[view.off_pos, 0]


def loss_fn(logit: Tensor, y: Tensor) -> Tensor:
    r"""Binary cross-entropy plus :math:`1 - \text{soft-F}_1`."""
    p = logit.sigmoid()
    soft_f1 = 2 * (p * y).sum() / (p.sum() + y.sum()).clamp_min(1e-8)
    bce = torch.nn.functional.binary_cross_entropy_with_logits(logit, y)
    return bce + 1 - soft_f1


def metrics(pred: Tensor, y: Tensor) -> Dict[str, float]:
    tp = float((pred & y).sum())
    fp = float((pred & ~y).sum())
    fn = float((~pred & y).sum())
    precision = tp / max(tp + fp, 1.0)
    recall = tp / max(tp + fn, 1.0)
    return dict(accuracy=float((pred == y).float().mean()),
                precision=precision, recall=recall,
                f1=2 * precision * recall / max(precision + recall, 1e-12))


@torch.no_grad()
def evaluate(model: torch.nn.Module, loader: DataLoader,
             device: torch.device = torch.device('cpu')) -> Dict:
    model.eval()
    preds, ys = [], []
    for batch in loader:
        batch = batch.to(device)
        preds.append(edge_scores(model, batch) > 0)
        ys.append(batch.y > 0.5)
    model.train()
    return metrics(torch.cat(preds), torch.cat(ys))


def train(name: str, seed: int, args: argparse.Namespace, data: Dict,
          progress: tqdm, device: torch.device = torch.device('cpu')) -> Dict:
    torch.manual_seed(seed)
    model = build(name, args).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
    loader = DataLoader(data['train'], batch_size=args.batch_size,
                        shuffle=True)
    val_loader = DataLoader(data['val'], batch_size=args.batch_size)
    curve: List[Dict] = []
    step, start, best, best_state = 0, time.perf_counter(), -1.0, None
    while step < args.steps:
        for batch in loader:
            batch = batch.to(device)
            loss = loss_fn(edge_scores(model, batch), batch.y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            step += 1
            progress.update()
            if step % args.eval_every == 0 or step == args.steps:
                val = evaluate(model, val_loader, device)
                curve.append(dict(step=step, loss=float(loss.detach()), **val))
                progress.set_postfix(model=name, seed=seed,
                                     val_f1=f"{val['f1']:.3f}")
                if val['f1'] > best:
                    best = val['f1']
                    best_state = {k: v.clone()
                                  for k, v in model.state_dict().items()}
            if step == args.steps:
                break
    seconds = time.perf_counter() - start
    model.load_state_dict(best_state)
    test = evaluate(model, DataLoader(data['test'],
                                      batch_size=args.batch_size), device)
    return dict(model=name, seed=seed, seconds=seconds, curve=curve,
                params=sum(p.numel() for p in model.parameters()),
                test=test,
                example=example_prediction(model, data['test'], device))


@torch.no_grad()
def example_prediction(model: torch.nn.Module, dataset,
                       device: torch.device = torch.device('cpu')) -> Dict:
    model.eval()
    batch = next(iter(DataLoader(dataset, batch_size=1))).to(device)
    pred = edge_scores(model, batch) > 0
    return dict(pos=batch.x.cpu().tolist(),
                predicted=batch.edge_index[:, pred].cpu().tolist(),
                target=batch.edge_index[:, batch.y > 0.5].cpu().tolist())


def plot(results: List[Dict], out: str) -> None:
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 1 + len(MODELS), figsize=(14, 4))
    for r in results:
        axes[0].plot([c['step'] for c in r['curve']],
                     [c['f1'] for c in r['curve']],
                     color='C0' if r['model'] == 'HOT' else 'C1',
                     alpha=0.8, label=f"{r['model']} seed {r['seed']}")
    axes[0].set_xlabel('step')
    axes[0].set_ylabel('validation F1')
    axes[0].legend(fontsize=7)
    for ax, name in zip(axes[1:], MODELS):
        example = next(r for r in results if r['model'] == name)['example']
        pos = torch.tensor(example['pos'])
        for (i, j) in zip(*example['target']):
            ax.plot(*pos[[i, j]].T, color='0.8', lw=3, zorder=1)
        for (i, j) in zip(*example['predicted']):
            ax.plot(*pos[[i, j]].T, color='C3', lw=0.8, zorder=2)
        ax.scatter(*pos.T, s=8, color='k', zorder=3)
        ax.set_title(f'{name}: predicted (red) vs Delaunay (grey)')
        ax.set_aspect('equal')
        ax.set_xticks([])
        ax.set_yticks([])
    fig.tight_layout()
    fig.savefig(os.path.join(out, 'delaunay.png'), dpi=120)
    plt.close(fig)


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description='Set-to-graph: predict the Delaunay triangulation of '
        'random point sets (HOT §5, Table 3, after Set2Graph).')
    parser.add_argument('--smoke', action='store_true',
                        help='a few tiny sets of 8 to 12 points (the '
                        'variable-size setting) and a few steps (seconds)')
    parser.add_argument('--points', type=int, nargs='+', default=[50],
                        help='points per set, or a range LOW HIGH: every '
                        'set draws its size uniformly from it (the '
                        "paper's two settings are 50 and 20 80; "
                        'default: 50)')
    parser.add_argument('--train-sets', type=int, default=2000,
                        help='training point sets (default: 2000)')
    parser.add_argument('--test-sets', type=int, default=200,
                        help='test point sets (default: 200)')
    parser.add_argument('--steps', type=int, default=1500,
                        help='optimiser steps per model and seed '
                        '(default: 1500)')
    parser.add_argument('--batch-size', type=int, default=8,
                        help='sets per step (default: 8)')
    parser.add_argument('--eval-every', type=int, default=100,
                        help='steps between test evaluations (default: 100)')
    parser.add_argument('--lr', type=float, default=1e-3,
                        help='learning rate (default: 0.001)')
    parser.add_argument('--channels', type=int, default=32,
                        help='model width (default: 32)')
    parser.add_argument('--layers', type=int, default=3,
                        help='1->1 blocks before the 1->2 block '
                        '(default: 3)')
    parser.add_argument('--heads', type=int, default=4,
                        help='attention heads (default: 4)')
    parser.add_argument('--dropout', type=float, default=0.0,
                        help='dropout probability (default: 0)')
    parser.add_argument('--seeds', type=int, nargs='+', default=[0, 1, 2],
                        help='random seeds, one run each (default: 0 1 2)')
    parser.add_argument('--models', nargs='+', default=list(MODELS),
                        choices=MODELS,
                        help='models to train (default: all)')
    parser.add_argument('--threads', type=int, default=None,
                        help="torch intra-op threads (default: torch's "
                        'choice)')
    parser.add_argument('--device', default='auto',
                        choices=('auto', 'cpu', 'cuda'),
                        help='cpu, cuda, or auto: CUDA when torch sees a GPU '
                        '(default: auto)')
    parser.add_argument('--root', default=os.path.join('data_cache',
                                                       'delaunay'),
                        help='dataset cache (default: '
                        'data_cache/delaunay)')
    parser.add_argument('--out', default=os.path.join('results',
                                                      'hot_delaunay'),
                        help='output folder (default: results/hot_delaunay)')
    args = parser.parse_args(argv)
    if args.smoke:
        args.points, args.train_sets, args.test_sets = [8, 12], 16, 8
        args.steps, args.eval_every, args.seeds = 4, 2, [0]
        args.channels, args.layers, args.batch_size = 8, 1, 4
    if len(args.points) not in (1, 2):
        parser.error('--points takes one size or a range LOW HIGH')
    return args


def main(argv=None) -> Dict:
    args = parse_args(argv)
    device = resolve_device(args.device)
    if args.threads:
        torch.set_num_threads(args.threads)
    os.makedirs(args.out, exist_ok=True)
    points = (args.points[0] if len(args.points) == 1 else
              tuple(args.points))
    sizes = dict(train=args.train_sets, val=args.test_sets,
                 test=args.test_sets)
    data = {
        split: DelaunaySets(args.root, split, sizes[split], points,
                            pre_transform=AddSecondOrderView())
        for split in sizes
    }
    runs = [(m, s) for s in args.seeds for m in args.models]
    results = []
    with tqdm(total=len(runs) * args.steps,
              desc=f'delaunay on {device}') as progress:
        for name, seed in runs:
            results.append(train(name, seed, args, data, progress, device))
    summary = {}
    for name in args.models:
        tests = [r['test'] for r in results if r['model'] == name]
        summary[name] = {
            k: sum(t[k] for t in tests) / len(tests) for k in tests[0]
        }
        summary[name]['f1_per_seed'] = [t['f1'] for t in tests]
        summary[name]['params'] = next(r['params'] for r in results
                                       if r['model'] == name)
        summary[name]['seconds_per_run'] = sum(
            r['seconds'] for r in results
            if r['model'] == name) / len(tests)
    config = {k: v for k, v in vars(args).items() if k not in ('out', )}
    config['device'] = str(device)  # the device it ran on, not 'auto'
    with open(os.path.join(args.out, 'results.json'), 'w') as f:
        json.dump(dict(config=config, summary=summary, runs=results), f,
                  indent=1)
    plot(results, args.out)
    print(f"{'model':>6} {'params':>7} {'acc':>6} {'prec':>6} {'rec':>6} "
          f"{'F1':>6}  F1 per seed")
    for name, s in summary.items():
        print(f"{name:>6} {s['params']:>7} {s['accuracy']:>6.3f} "
              f"{s['precision']:>6.3f} {s['recall']:>6.3f} {s['f1']:>6.3f}"
              f"  {', '.join(f'{v:.3f}' for v in s['f1_per_seed'])}")
    return dict(config=config, summary=summary)


if __name__ == '__main__':
    main()
