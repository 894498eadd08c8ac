r"""The synthetic chains experiment of Higher-Order Transformers (HOT App.
A.2.4, Table 1): classify every node of a chain by a label that only one
terminal node carries. Train on 20-node chains, test on 200-node chains.
Models with global classes see the whole chain in one layer; models limited
to local aggregation (GCN, HOT "w/o global") cannot reach the far end.

    python examples/hot_chains.py           # the paper's schedule (100 epochs)
    python examples/hot_chains.py --quick   # a shorter schedule
    python examples/hot_chains.py --device cuda   # on the GPU

--device is auto by default: CUDA when torch sees a GPU, else the CPU.
Prints a table of test accuracy and macro-F1 per model.
"""
import argparse
import json
import os
import time

import torch
from torch_geometric.loader import DataLoader
from torch_geometric.nn import GCNConv

from torch_geometric_hot.data import PairView
from torch_geometric_hot.datasets import synthetic_chains
from torch_geometric_hot.models import HOTNodeModel
from torch_geometric_hot.nn import EquivariantLinear
from torch_geometric_hot.train import resolve_device
from torch_geometric_hot.transforms import AddSecondOrderView

HIDDEN = 16


class GCN(torch.nn.Module):
    r"""GCNConv(16)-ReLU-GCNConv(16)-Linear(2) (HOT Table 6b)."""
    def __init__(self):
        super().__init__()
        self.conv1, self.conv2 = GCNConv(2, HIDDEN), GCNConv(HIDDEN, HIDDEN)
        self.head = torch.nn.Linear(HIDDEN, 2)

    def forward(self, x, edge_index, edge_attr=None, batch=None, view=None):
        h = self.conv1(x, edge_index).relu()
        return self.head(self.conv2(h, edge_index))


class InvariantMLPNode(torch.nn.Module):
    r"""MLP_pi (S): L2->2(16)-ReLU-L2->1(16)-Linear(2) (HOT Table 6b)."""
    def __init__(self, classes='all'):
        super().__init__()
        self.encode = torch.nn.Linear(2, HIDDEN)
        self.l22 = EquivariantLinear(HIDDEN, HIDDEN, 2, 2, classes,
                                     normalize='mean')
        self.l21 = EquivariantLinear(HIDDEN, HIDDEN, 2, 1, classes,
                                     normalize='mean')
        self.head = torch.nn.Linear(HIDDEN, 2)

    def forward(self, x, edge_index, edge_attr=None, batch=None, view=None):
        h = self.l22(view.lift(self.encode(x)), view).relu()
        return self.head(self.l21(h, view))


def hot(attention, classes):
    r"""Enc2->2(16)-Enc2->1(16)-LN-Linear(2), one head (HOT Table 6b)."""
    return HOTNodeModel(HIDDEN, 2, num_layers=1, heads=1,
                        node_encoder=torch.nn.Linear(2, HIDDEN),
                        attention=attention, classes=classes, kernel='favor+',
                        seed=0)


MODELS = {
    'GCN': GCN,
    'MLP_pi (S)': InvariantMLPNode,
    'HOT (S) w/o global': lambda: hot('softmax', 'local'),
    'HOT (S, phi) w/o global': lambda: hot('kernel', 'local'),
    'HOT (S)': lambda: hot('softmax', 'all'),
    'HOT (S, phi)': lambda: hot('kernel', 'all'),
}


def run(model, batch):
    r"""A model on a batch, with PyG's calling convention, reusing the pair
    view the dataset carries."""
    return model(batch.x, batch.edge_index, batch.get('edge_attr'),
                 batch.batch, view=PairView.from_data(batch))


def evaluate(model, loader, device=torch.device('cpu')):
    model.eval()
    preds, labels = [], []
    with torch.no_grad():
        for batch in loader:
            batch = batch.to(device)
            preds.append(run(model, batch).argmax(-1))
            labels.append(batch.y)
    pred, label = torch.cat(preds), torch.cat(labels)
    accuracy = float((pred == label).float().mean())
    f1 = []
    for c in (0, 1):
        tp = float(((pred == c) & (label == c)).sum())
        fp = float(((pred == c) & (label != c)).sum())
        fn = float(((pred != c) & (label == c)).sum())
        f1.append(2 * tp / max(2 * tp + fp + fn, 1.0))
    return accuracy, sum(f1) / 2


def train(name, build, train_loader, test_loader, epochs, seed,
          device=torch.device('cpu')):
    torch.manual_seed(seed)
    model = build().to(device)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    start = time.time()
    for _ in range(epochs):
        model.train()
        for batch in train_loader:
            batch = batch.to(device)
            opt.zero_grad()
            loss = torch.nn.functional.cross_entropy(run(model, batch),
                                                     batch.y)
            loss.backward()
            opt.step()
    accuracy, f1 = evaluate(model, test_loader, device)
    return {'model': name, 'test_accuracy': accuracy, 'test_macro_f1': f1,
            'train_seconds': time.time() - start}


def main(argv=None):
    r"""Runs the experiment with the command-line arguments :obj:`argv`
    (default: :obj:`sys.argv`) and returns one row per model: its name,
    test accuracy, test macro-F1 and training seconds."""
    parser = argparse.ArgumentParser(
        description='The synthetic chains experiment of Higher-Order '
        'Transformers (HOT App. A.2.4, Table 1): train on 20-node chains, '
        'test on 200-node chains, print test accuracy and macro-F1 per '
        'model.')
    parser.add_argument('--epochs', type=int, default=None,
                        help='training epochs (default: 100, or 30 with '
                        '--quick)')
    parser.add_argument('--quick', action='store_true',
                        help='30 epochs unless --epochs says otherwise, 10 '
                        'test chains')
    parser.add_argument('--seed', type=int, default=0,
                        help='random seed (default: 0)')
    parser.add_argument('--models', nargs='*', default=list(MODELS),
                        choices=list(MODELS), metavar='MODEL',
                        help='models to train (default: all of '
                        + ', '.join(repr(name) for name in MODELS) + ')')
    parser.add_argument('--out', default=None, help='write JSON here')
    parser.add_argument('--device', default='auto',
                        choices=('auto', 'cpu', 'cuda'),
                        help='cpu, cuda, or auto: CUDA when torch sees a GPU '
                        '(default: auto)')
    args = parser.parse_args(argv)
    if args.epochs is not None and args.epochs < 1:
        parser.error(f'--epochs must be at least 1, got {args.epochs}')
    device = resolve_device(args.device)
    epochs = args.epochs or (30 if args.quick else 100)
    view = AddSecondOrderView()
    train_set = synthetic_chains(40, 20, seed=args.seed, transform=view)
    test_set = synthetic_chains(10 if args.quick else 20, 200,
                                seed=args.seed + 1, transform=view)
    train_loader = DataLoader(train_set, batch_size=16, shuffle=True)
    test_loader = DataLoader(test_set, batch_size=4)
    print(f'chains: 40 train x 20 nodes, {len(test_set)} test x 200 nodes, '
          f'{epochs} epochs, batch 16, Adam 1e-3, device {device}')
    print(f"{'model':<26}{'test acc':>10}{'macro-F1':>10}{'train s':>9}")
    rows = []
    for name in args.models:
        row = train(name, MODELS[name], train_loader, test_loader, epochs,
                    args.seed, device)
        rows.append(row)
        print(f"{name:<26}{row['test_accuracy']:>10.3f}"
              f"{row['test_macro_f1']:>10.3f}{row['train_seconds']:>9.1f}",
              flush=True)
    if args.out:
        os.makedirs(os.path.dirname(os.path.abspath(args.out)),
                    exist_ok=True)
        with open(args.out, 'w') as f:
            json.dump(rows, f, indent=2)
    return rows


if __name__ == '__main__':
    main()
