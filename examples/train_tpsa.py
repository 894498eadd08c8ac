r"""Graph regression on real molecules, offline: predict the topological polar
surface area (TPSA) of the NCI molecules that RDKit ships
(:class:`~torch_geometric_hot.datasets.NCITPSA`, OGB featurisation).

    python examples/train_tpsa.py --model mlp            # a few minutes
    python examples/train_tpsa.py --model mlp --quick    # under a minute

Prints a table of epoch, training loss and validation MAE, then the test MAE
at the best validation epoch next to the MAE of predicting the training
mean, and writes ``results/tpsa_<model>.json`` and
``results/tpsa_<model>_curve.png`` (under ``results/quick/`` with
``--quick``, so that a quick run never replaces a full run's results).

To add a model, add one line to :data:`MODELS`: a :class:`ModelSpec` whose
``build(hidden_channels, num_layers, dropout)`` returns a module mapping a
:class:`~torch_geometric.data.Batch` to ``[num_graphs, 1]``, and the
transform (if any) that the dataset must apply once as ``pre_transform``.
"""
import argparse
import copy
import json
import os
import time
from typing import Callable, Dict, List, NamedTuple, Optional

import torch
from torch_geometric.loader import DataLoader
from tqdm import tqdm

from torch_geometric_hot.data import PairView
from torch_geometric_hot.datasets import NCITPSA
from torch_geometric_hot.models import HOTGraphModel, InvariantMLP
from torch_geometric_hot.nn import CategoricalEncoder
from torch_geometric_hot.transforms import AddSecondOrderView

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def atom_encoder(channels: int) -> CategoricalEncoder:
    from ogb.utils.features import get_atom_feature_dims
    return CategoricalEncoder(get_atom_feature_dims(), channels)


def bond_encoder(channels: int) -> CategoricalEncoder:
    from ogb.utils.features import get_bond_feature_dims
    return CategoricalEncoder(get_bond_feature_dims(), channels)


class ModelSpec(NamedTuple):
    build: Callable[[int, int, float], torch.nn.Module]
    pre_transform: Optional[Callable] = None


def build_mlp(hidden: int, num_layers: int, dropout: float):
    return InvariantMLP(hidden, 1, num_layers=num_layers,
                        node_encoder=atom_encoder(hidden),
                        edge_encoder=bond_encoder(hidden), normalize='mean',
                        dropout=dropout)


def build_hot(hidden: int, num_layers: int, dropout: float):
    return HOTGraphModel(hidden, 1, num_layers=num_layers, heads=4,
                         node_encoder=atom_encoder(hidden),
                         edge_encoder=bond_encoder(hidden),
                         attention='kernel', dropout=dropout, seed=0)


MODELS: Dict[str, ModelSpec] = {
    'mlp': ModelSpec(build_mlp, AddSecondOrderView()),
    'hot': ModelSpec(build_hot, AddSecondOrderView()),
}


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description='Graph regression on real molecules, offline: predict '
        'the topological polar surface area (TPSA) of the NCI molecules '
        'that RDKit ships, with OGB featurisation.')
    parser.add_argument('--model', choices=sorted(MODELS), default='mlp',
                        help='model to train (default: mlp)')
    parser.add_argument('--epochs', type=int, default=None,
                        help='default: 15 (8 with --quick)')
    parser.add_argument('--quick', action='store_true',
                        help='1,000 molecules and 8 epochs (under a minute)')
    parser.add_argument('--limit', type=int, default=None,
                        help='use only the first N molecules')
    parser.add_argument('--hidden', type=int, default=32,
                        help='model width (default: 32)')
    parser.add_argument('--layers', type=int, default=4,
                        help='number of layers (default: 4)')
    parser.add_argument('--dropout', type=float, default=0.0,
                        help='dropout probability (default: 0)')
    parser.add_argument('--batch-size', type=int, default=64,
                        help='molecules per batch (default: 64)')
    parser.add_argument('--lr', type=float, default=2e-3,
                        help='initial Adam learning rate, cosine decay '
                        '(default: 0.002)')
    parser.add_argument('--seed', type=int, default=0,
                        help='random seed (default: 0)')
    parser.add_argument('--threads', type=int, default=1,
                        help='torch intra-op threads (molecule batches are '
                        'too small to gain from more, and extra threads '
                        'stall badly on a busy machine)')
    parser.add_argument('--root', default=os.path.join(ROOT, 'data_cache',
                                                       'nci_tpsa'),
                        help='dataset cache (default: data_cache/nci_tpsa)')
    parser.add_argument('--out-dir', default=None,
                        help='where to write the JSON and the plot '
                        '(default: results/, or results/quick/ with --quick)')
    parser.add_argument('--no-progress', action='store_true',
                        help='hide the tqdm progress bars')
    args = parser.parse_args(argv)
    if args.epochs is None:
        args.epochs = 8 if args.quick else 15
    if args.limit is None and args.quick:
        args.limit = 1000
    if args.out_dir is None:
        args.out_dir = os.path.join(ROOT, 'results', 'quick') if args.quick \
            else os.path.join(ROOT, 'results')
    return args


def run_epoch(model, loader, mean: float, std: float, optimizer=None,
              progress: Optional[tqdm] = None) -> float:
    r"""One pass; trains when an optimizer is given. Returns the MAE in Å²
    (the training loss is the L1 loss on the standardised target)."""
    model.train(optimizer is not None)
    total, count = 0.0, 0
    with torch.set_grad_enabled(optimizer is not None):
        for batch in loader:
            pred = model(batch.x, batch.edge_index, batch.edge_attr, batch.batch,
                         view=PairView.from_data(batch)) * std + mean
            error = (pred - batch.y).abs()
            if optimizer is not None:
                optimizer.zero_grad()
                (error.mean() / std).backward()
                optimizer.step()
            total += float(error.detach().sum())
            count += batch.num_graphs
            if progress is not None:
                progress.update(1)
    return total / count


def plot_curve(history: List[Dict], baseline: float, path: str,
               title: str) -> None:
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt

    epochs = [h['epoch'] for h in history]
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.plot(epochs, [h['train_mae'] for h in history], 'o-', label='train')
    ax.plot(epochs, [h['val_mae'] for h in history], 's-', label='validation')
    ax.axhline(baseline, color='grey', ls='--', label='predict train mean')
    ax.set_xlabel('epoch')
    ax.set_ylabel('MAE of TPSA [Å²]')
    ax.set_ylim(bottom=0)
    ax.set_title(title)
    ax.grid(True, which='both', alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv=None) -> Dict:
    args = parse_args(argv)
    torch.manual_seed(args.seed)
    torch.set_num_threads(args.threads)
    spec = MODELS[args.model]
    splits = {
        name: NCITPSA(args.root, split=name, limit=args.limit,
                      pre_transform=spec.pre_transform)
        for name in ('train', 'val', 'test')
    }
    # A split's .y holds the targets of its molecules only: [len(split), 1].
    mean, std = float(splits['train'].y.mean()), float(splits['train'].y.std())
    baseline = {
        name: float((ds.y - mean).abs().mean())
        for name, ds in splits.items()
    }
    loaders = {
        name: DataLoader(ds, batch_size=args.batch_size,
                         shuffle=name == 'train')
        for name, ds in splits.items()
    }
    model = spec.build(args.hidden, args.layers, args.dropout)
    num_params = sum(p.numel() for p in model.parameters())
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(
        optimizer, T_max=args.epochs)
    print(f'{args.model}: {model} ({num_params:,} parameters); molecules '
          f'train/val/test = {len(splits["train"])}/{len(splits["val"])}/'
          f'{len(splits["test"])}; TPSA mean {mean:.1f} Å², std {std:.1f}')

    history, best = [], (float('inf'), None, 0)
    header = f'{"epoch":>5} {"train loss":>10} {"train MAE":>10} ' \
             f'{"val MAE":>9} {"time s":>7}'
    print(header)
    steps = args.epochs * (len(loaders['train']) + len(loaders['val']))
    progress = tqdm(total=steps, disable=args.no_progress, leave=False,
                    unit='batch')
    for epoch in range(1, args.epochs + 1):
        start = time.perf_counter()
        train_mae = run_epoch(model, loaders['train'], mean, std, optimizer,
                              progress)
        val_mae = run_epoch(model, loaders['val'], mean, std,
                            progress=progress)
        scheduler.step()
        history.append(dict(epoch=epoch, train_loss=train_mae / std,
                            train_mae=train_mae, val_mae=val_mae,
                            seconds=time.perf_counter() - start))
        progress.write(f'{epoch:>5} {train_mae / std:>10.4f} '
                       f'{train_mae:>10.2f} {val_mae:>9.2f} '
                       f'{history[-1]["seconds"]:>7.1f}')
        if val_mae < best[0]:
            best = (val_mae, copy.deepcopy(model.state_dict()), epoch)
    progress.close()

    model.load_state_dict(best[1])
    test_mae = run_epoch(model, loaders['test'], mean, std)
    print(f'best epoch {best[2]}: val MAE {best[0]:.2f} Å², test MAE '
          f'{test_mae:.2f} Å² (predicting the training mean: val '
          f'{baseline["val"]:.2f}, test {baseline["test"]:.2f})')

    os.makedirs(args.out_dir, exist_ok=True)
    stem = os.path.join(args.out_dir, f'tpsa_{args.model}')
    result = dict(model=args.model, args=vars(args), parameters=num_params,
                  history=history, best_epoch=best[2], val_mae=best[0],
                  test_mae=test_mae, baseline_mae=baseline,
                  torch=torch.__version__,
                  threads=torch.get_num_threads())
    with open(stem + '.json', 'w') as f:
        json.dump(result, f, indent=1)
    plot_curve(history, baseline['val'], stem + '_curve.png',
               f'{args.model} on NCI/TPSA (test MAE {test_mae:.2f} Å²)')
    print(f'wrote {stem}.json and {stem}_curve.png')
    return result


if __name__ == '__main__':
    main()
