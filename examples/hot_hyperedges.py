r"""k-uniform hyperedge prediction (`HOT <https://arxiv.org/abs/2110.14416>`_
§5, Table 4): score 3-node candidates of a 3-partite hypergraph.

Data: by default an offline planted hypergraph
(:func:`~torch_geometric_hot.datasets.planted_hypergraph`: 60 / 40 / 10
nodes of three types, 4 planted communities); with ``--npz FOLDER``, a
benchmark in the DHNE / Hyper-SAGNN layout (``train_data.npz``,
``test_data.npz``; GPS, MovieLens, drug, wordnet), read by
:func:`~torch_geometric_hot.datasets.read_hyperedge_npz`. Candidates are the
hyperedges plus 5 negatives each (one slot replaced by a random node of
the same type, never a known hyperedge), as in the paper; training
negatives are redrawn every epoch. Node features: the node's row of the
training hypergraph's co-occurrence matrix (normalised) and its type.

Models (same width, epochs and optimiser):

* **HOT**: :class:`~torch_geometric_hot.models.HOTHyperedgeModel`,
  :math:`[\mathrm{Enc}_{1\to 1}]_{\times L} - \mathrm{Enc}_{1\to 3} -
  \mathrm{MLP}`, softmax attention over all nodes;
* **S2G+ (S)**, the paper's invariant-MLP baseline:
  :math:`[L_{1\to 1} - \mathrm{ReLU} - \mathrm{LN}]_{\times L} -
  L_{1\to 3} - \mathrm{MLP}`.

Test AUC and AUPR per seed go to ``results.json``; ``hyperedges.png`` plots
test AUC during training. Run ``python examples/hot_hyperedges.py`` or
``--smoke`` (seconds); ``--device cpu``, ``cuda`` or ``auto`` (the default:
CUDA when torch sees a GPU) picks where the models train. Negatives are
drawn on the CPU either way, so a seed draws the same candidates on every
device.
"""
import argparse
import json
import os
import sys
import time
from typing import Dict, List, Set, Tuple

import torch
from torch import Tensor
from tqdm import tqdm

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(
    __file__))))
from torch_geometric_hot.datasets import (  # noqa: E402
    planted_hypergraph, read_hyperedge_npz)
from torch_geometric_hot.models import HOTHyperedgeModel  # noqa: E402
from torch_geometric_hot.nn import EquivariantLinear  # noqa: E402
from torch_geometric_hot.train import resolve_device  # noqa: E402

MODELS = ('HOT', 'S2G+')


class HyperedgeMLP(torch.nn.Module):
    r"""S2G+ (S): :math:`[L_{1\to 1} - \mathrm{ReLU} - \mathrm{LN}]_{\times
    L} - L_{1\to k} - \mathrm{MLP}`."""
    def __init__(self, in_channels: int, channels: int, num_layers: int,
                 k: int, dropout: float) -> None:
        super().__init__()
        self.encoder = torch.nn.Linear(in_channels, channels)
        self.layers = torch.nn.ModuleList([
            EquivariantLinear(channels, channels, 1, 1, normalize='mean')
            for _ in range(num_layers)
        ])
        self.norms = torch.nn.ModuleList([
            torch.nn.LayerNorm(channels) for _ in range(num_layers)
        ])
        self.lift = EquivariantLinear(channels, channels, 1, k,
                                      normalize='mean')
        self.head = torch.nn.Sequential(torch.nn.ReLU(),
                                        torch.nn.Dropout(dropout),
                                        torch.nn.Linear(channels, channels),
                                        torch.nn.ReLU(),
                                        torch.nn.Linear(channels, 1))

    def forward(self, x: Tensor, hyperedge_index: Tensor) -> Tensor:
        h = self.encoder(x)
        for layer, norm in zip(self.layers, self.norms):
            h = norm(layer(h).relu())
        return self.head(self.lift(h, hyperedge_index=hyperedge_index))


def node_features(data) -> Tensor:
    r"""Row-normalised co-occurrence counts in the training hyperedges,
    then the one-hot node type (on the device of the hyperedges)."""
    n, index = data.num_nodes, data.train_hyperedges
    k = index.size(0)
    rows = index.repeat(k, 1).view(-1)
    cols = index.repeat_interleave(k, 0).view(-1)
    counts = torch.zeros(n, n, device=index.device).index_put_(
        (rows, cols), torch.ones(rows.numel(), device=index.device),
        accumulate=True)
    counts = counts / counts.sum(1, keepdim=True).clamp_min(1.0)
    types = torch.nn.functional.one_hot(data.node_type,
                                        int(data.nums_type.numel()))
    return torch.cat([counts, types.float()], 1)


def negatives(positives: Tensor, nums_type: Tensor, known: Set[Tuple],
              per_positive: int, gen: torch.Generator) -> Tensor:
    r"""For every positive column, :obj:`per_positive` copies with one
    random slot replaced by a random node of that slot's type; copies that
    hit a known hyperedge are redrawn (up to 20 times, then dropped)."""
    k = positives.size(0)
    offset = torch.cumsum(nums_type, 0) - nums_type
    base = positives.repeat(1, per_positive)
    out = base.clone()
    todo = torch.ones(base.size(1), dtype=torch.bool)
    for _ in range(20):
        cols = todo.nonzero().view(-1)
        slot = torch.randint(k, (cols.numel(), ), generator=gen)
        node = (torch.rand(cols.numel(), generator=gen) *
                nums_type[slot]).long() + offset[slot]
        draw = base[:, cols].clone()
        draw[slot, torch.arange(cols.numel())] = node
        out[:, cols] = draw
        todo[cols] = torch.tensor([tuple(c) in known
                                   for c in draw.t().tolist()],
                                  dtype=torch.bool)
        if not bool(todo.any()):
            break
    return out[:, ~todo]


def auc_aupr(score: Tensor, label: Tensor) -> Tuple[float, float]:
    r"""Area under the ROC curve and average precision (scikit-learn's
    :func:`roc_auc_score` and :func:`average_precision_score`)."""
    from sklearn.metrics import average_precision_score, roc_auc_score
    score = score.detach().cpu().double().numpy()
    label = (label.detach().cpu() > 0.5).numpy()
    return (float(roc_auc_score(label, score)),
            float(average_precision_score(label, score)))


def build(name: str, in_channels: int, args: argparse.Namespace,
          k: int) -> torch.nn.Module:
    if name == 'HOT':
        return HOTHyperedgeModel(
            args.channels, 1, k=k, num_layers=args.layers, heads=args.heads,
            dropout=args.dropout,
            node_encoder=torch.nn.Linear(in_channels, args.channels))
    return HyperedgeMLP(in_channels, args.channels, args.layers, k,
                        args.dropout)


def score(model: torch.nn.Module, x: Tensor, index: Tensor) -> Tensor:
    r"""One logit per candidate column of :obj:`index`."""
    return model(x, index)[:, 0]


def train(name: str, seed: int, data, x: Tensor, test: Tuple[Tensor, Tensor],
          args: argparse.Namespace) -> Dict:
    r"""Trains one model on the device of :obj:`x` (:obj:`test` lives
    there too); :obj:`data` stays on the CPU, where the negatives are
    drawn."""
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    k = data.train_hyperedges.size(0)
    model = build(name, x.size(1), args, k).to(x.device)
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
    known = {tuple(c) for c in data.train_hyperedges.t().tolist()}
    positives = data.train_hyperedges
    curve: List[Dict] = []
    start = time.perf_counter()
    for epoch in range(1, args.epochs + 1):
        model.train()
        neg = negatives(positives, data.nums_type, known, 5, gen)
        index = torch.cat([positives, neg], 1).to(x.device)
        label = torch.cat([torch.ones(positives.size(1)),
                           torch.zeros(neg.size(1))]).to(x.device)
        loss = torch.nn.functional.binary_cross_entropy_with_logits(
            score(model, x, index), label)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if epoch % args.eval_every == 0 or epoch == args.epochs:
            model.eval()
            with torch.no_grad():
                auc, aupr = auc_aupr(score(model, x, test[0]), test[1])
            curve.append(dict(epoch=epoch, loss=float(loss.detach()),
                              auc=auc, aupr=aupr))
    return dict(model=name, seed=seed, seconds=time.perf_counter() - start,
                params=sum(p.numel() for p in model.parameters()),
                curve=curve, auc=curve[-1]['auc'], aupr=curve[-1]['aupr'])


def plot(results: List[Dict], out: str) -> None:
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5.5, 4))
    for r in results:
        ax.plot([c['epoch'] for c in r['curve']],
                [c['auc'] for c in r['curve']],
                color='C0' if r['model'] == 'HOT' else 'C1', alpha=0.8,
                label=f"{r['model']} seed {r['seed']}")
    ax.set_xlabel('epoch')
    ax.set_ylabel('test AUC')
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(os.path.join(out, 'hyperedges.png'), dpi=120)
    plt.close(fig)


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description='k-uniform hyperedge prediction (HOT section 5, Table 4):'
        ' HOT against the invariant-MLP baseline S2G+ on a planted '
        '3-partite hypergraph, or on a DHNE / Hyper-SAGNN benchmark folder.')
    parser.add_argument('--smoke', action='store_true',
                        help='a tiny hypergraph, 3 epochs, one seed '
                        '(seconds)')
    parser.add_argument('--npz', default=None,
                        help='folder with train_data.npz / test_data.npz '
                        '(default: the offline planted hypergraph)')
    parser.add_argument('--epochs', type=int, default=200,
                        help='training epochs (default: 200)')
    parser.add_argument('--eval-every', type=int, default=10,
                        help='epochs between test evaluations (default: 10)')
    parser.add_argument('--lr', type=float, default=1e-3,
                        help='learning rate (default: 0.001)')
    parser.add_argument('--channels', type=int, default=64,
                        help='model width (default: 64)')
    parser.add_argument('--layers', type=int, default=1,
                        help='1->1 blocks before the 1->3 block (default: 1)')
    parser.add_argument('--heads', type=int, default=4,
                        help='attention heads of HOT (default: 4)')
    parser.add_argument('--dropout', type=float, default=0.1,
                        help='dropout probability (default: 0.1)')
    parser.add_argument('--seeds', type=int, nargs='+', default=[0, 1, 2],
                        help='random seeds, one run each (default: 0 1 2)')
    parser.add_argument('--models', nargs='+', default=list(MODELS),
                        choices=MODELS,
                        help='models to train (default: all)')
    parser.add_argument('--threads', type=int, default=None,
                        help="torch's CPU threads (default: torch's choice)")
    parser.add_argument('--device', default='auto',
                        choices=('auto', 'cpu', 'cuda'),
                        help='cpu, cuda, or auto: CUDA when torch sees a GPU '
                        '(default: auto)')
    parser.add_argument('--out', default=os.path.join('results',
                                                      'hot_hyperedges'),
                        help='folder for results.json and hyperedges.png '
                        '(default: results/hot_hyperedges)')
    args = parser.parse_args(argv)
    if args.smoke:
        args.epochs, args.eval_every, args.seeds = 3, 1, [0]
        args.channels = 8
    return args


def main(argv=None) -> Dict:
    args = parse_args(argv)
    device = resolve_device(args.device)
    if args.threads:
        torch.set_num_threads(args.threads)
    os.makedirs(args.out, exist_ok=True)
    if args.npz:
        data = read_hyperedge_npz(args.npz)
    elif args.smoke:
        data = planted_hypergraph((12, 8, 4), 120, seed=0)
    else:
        data = planted_hypergraph(seed=0)
    x = node_features(data)
    known = {tuple(c) for c in torch.cat(
        [data.train_hyperedges, data.test_hyperedges], 1).t().tolist()}
    test_neg = negatives(data.test_hyperedges, data.nums_type, known, 5,
                         torch.Generator().manual_seed(12345))
    test = (torch.cat([data.test_hyperedges, test_neg], 1).to(device),
            torch.cat([torch.ones(data.test_hyperedges.size(1)),
                       torch.zeros(test_neg.size(1))]).to(device))
    x = x.to(device)
    runs = [(m, s) for s in args.seeds for m in args.models]
    results = [train(m, s, data, x, test, args)
               for m, s in tqdm(runs, desc=f'hyperedges ({device})')]
    summary = {}
    for name in args.models:
        rows = [r for r in results if r['model'] == name]
        summary[name] = dict(
            auc=sum(r['auc'] for r in rows) / len(rows),
            aupr=sum(r['aupr'] for r in rows) / len(rows),
            auc_per_seed=[r['auc'] for r in rows],
            params=rows[0]['params'])
    config = {k: v for k, v in vars(args).items() if k != 'out'}
    with open(os.path.join(args.out, 'results.json'), 'w') as f:
        json.dump(dict(config=config, device=str(device), summary=summary,
                       runs=results), f, indent=1)
    plot(results, args.out)
    for name, s in summary.items():
        per_seed = ', '.join(f'{v:.3f}' for v in s['auc_per_seed'])
        print(f"{name:>5}: AUC {s['auc']:.3f}  AUPR {s['aupr']:.3f}  "
              f"(AUC per seed {per_seed})")
    return dict(config=config, summary=summary)


if __name__ == '__main__':
    main()
