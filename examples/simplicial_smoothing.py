r"""How smoothing is N-simplicial attention? The paper's three claims
(`Dussolle & Liò 2025 <https://arxiv.org/abs/2511.04624>`_, §3), measured
with :mod:`torch_geometric_hot.analysis`:

1. **Rank collapse** (Theorems 3.1 and 3.4): stacking N-simplicial attention
   (N = 1, 2, 3) without skip connections or normalisation drives all tokens
   to one representation layer by layer, on all tuples (unmasked) and with a
   mask (walks on a connected graph with self-loops); the layer's skip
   connection followed by LayerNorm prevents it. Plot ``collapse.png``: the
   relative Frobenius residual :math:`\lVert X - \mathbf{1}\bar x^\top
   \rVert_F / \lVert X \rVert_F` per layer.
2. **Lipschitz bound** (Theorem 3.7): on random unmasked layers and random
   inputs in the ball :math:`B_R^n`, the local Lipschitz constant (Jacobian
   power iteration) never exceeds the bound. Plot ``lipschitz.png``:
   empirical constant against the bound, with the diagonal.
3. **R -> 0**: the bound keeps a constant term for N = 1 and vanishes like
   :math:`R^{N-1}` for N >= 2 (layers without biases, as in the theorem);
   the largest empirical constant over the ball follows. Plot
   ``radius.png``.

Everything runs in float64, on a GPU when torch sees one (``--device``);
``summary.json`` holds the numbers. Run
``python examples/simplicial_smoothing.py`` (about a minute on 2 CPU cores)
or ``--smoke`` (seconds); ``--device cpu`` or ``--device cuda`` picks the
device (default ``auto``).
"""
import argparse
import json
import os
import sys
from typing import Dict, List

import torch
from torch import Tensor
from tqdm import tqdm

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(
    __file__))))
from torch_geometric_hot.analysis import (  # noqa: E402
    WithoutResidual, layerwise_token_residual, local_lipschitz,
    simplicial_lipschitz_bound)
from torch_geometric_hot.nn import SimplicialAttention  # noqa: E402
from torch_geometric_hot.train import resolve_device  # noqa: E402

ORDERS = (1, 2, 3)
STACKS = ('unmasked', 'masked', 'residual + LayerNorm')


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description='How smoothing is N-simplicial attention? Measures the '
        'three claims of Dussolle & Liò 2025, §3: rank collapse without '
        'skip connections, its prevention by skip connections and '
        'LayerNorm, and the empirical Lipschitz constant against its '
        'bound.')
    parser.add_argument('--smoke', action='store_true',
                        help='tiny sizes, a few seeds (seconds)')
    parser.add_argument('--tokens', type=int, default=16,
                        help='tokens per input (default: 16)')
    parser.add_argument('--lipschitz-tokens', type=int, default=6,
                        help='tokens per input of the Lipschitz claims '
                        '(default: 6; dense tuples grow as n^(N+1))')
    parser.add_argument('--channels', type=int, default=16,
                        help='token width (default: 16)')
    parser.add_argument('--depth', type=int, default=8,
                        help='layers per stack (default: 8)')
    parser.add_argument('--seeds', type=int, default=5,
                        help='random layers per setting (default: 5)')
    parser.add_argument('--threads', type=int, default=1,
                        help='torch threads (default: 1; the tensors are '
                        'tiny)')
    parser.add_argument('--out', default=os.path.join('results',
                                                      'simplicial_smoothing'),
                        help='output folder for plots and summary.json')
    parser.add_argument('--device', default='auto',
                        choices=('auto', 'cpu', 'cuda'),
                        help='cpu, cuda, or auto: CUDA when torch sees a GPU '
                        '(default: auto)')
    args = parser.parse_args(argv)
    if args.smoke:
        args.tokens, args.channels, args.depth, args.seeds = 5, 6, 4, 2
        args.lipschitz_tokens = 4
    return args


def ring(n: int) -> Tensor:
    r"""Edges of the undirected cycle on :obj:`n` nodes."""
    node = torch.arange(n)
    return torch.stack([torch.cat([node, (node + 1) % n]),
                        torch.cat([(node + 1) % n, node])])


def collapse(args: argparse.Namespace, order: int, stack: str, seed: int,
             device: torch.device) -> List[float]:
    r"""Relative residual per layer of one random stack (built and drawn
    on the CPU, as for every device, then run on :obj:`device`)."""
    torch.manual_seed(seed)
    candidates = 'walks' if stack == 'masked' else 'dense'
    layers = []
    for _ in range(args.depth):
        attention = SimplicialAttention(args.channels, heads=1, order=order,
                                        candidates=candidates,
                                        include_self=True)
        layers.append(
            torch.nn.Sequential(attention, torch.nn.LayerNorm(args.channels))
            if stack == 'residual + LayerNorm' else
            WithoutResidual(attention))
    layers = [layer.double().to(device) for layer in layers]
    x = torch.randn(args.tokens, args.channels,
                    dtype=torch.double).to(device)
    edge_index = ring(args.tokens).to(device)

    def forward(layer, h):
        if stack == 'masked':
            return layer(h, edge_index)
        return layer(h)

    res = layerwise_token_residual(layers, x, forward=forward)
    return res[:, 0].cpu().tolist()


def ball_point(n: int, channels: int, radius: float,
               gen: torch.Generator) -> Tensor:
    r"""Random tokens with norms uniform in [0, R], the first on the
    sphere, drawn from :obj:`gen` (a CPU generator: the same points on
    every device)."""
    x = torch.randn(n, channels, generator=gen, dtype=torch.double)
    norms = radius * torch.rand(n, 1, generator=gen, dtype=torch.double)
    norms[0] = radius
    return x / x.norm(dim=1, keepdim=True) * norms


def lipschitz(args: argparse.Namespace, order: int, seed: int,
              radii: List[float], biases: bool,
              device: torch.device) -> List[Dict]:
    r"""Empirical local constant (max over points of the ball) and bound of
    one random pure attention layer, per radius."""
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    layer = SimplicialAttention(args.channels, heads=2,
                                order=order).double().to(device)
    if not biases:
        with torch.no_grad():
            layer.lin_qkv.bias.zero_()
    pure = WithoutResidual(layer)
    points, iterations = (2, 20) if args.smoke else (4, 100)
    n = args.lipschitz_tokens
    rows = []
    for radius in radii:
        empirical = max(
            local_lipschitz(pure,
                            ball_point(n, args.channels, radius,
                                       gen).to(device),
                            iterations=iterations, generator=gen)
            for _ in range(points))
        rows.append(dict(order=order, seed=seed, radius=radius,
                         empirical=empirical,
                         bound=simplicial_lipschitz_bound(
                             layer, radius, n, residual=False)))
    return rows


def plot(summary: Dict, out: str) -> None:
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(STACKS), figsize=(13, 3.8), sharey=True)
    for ax, stack in zip(axes, STACKS):
        for order in ORDERS:
            curves = torch.tensor(summary['collapse'][stack][str(order)])
            median = curves.median(0).values.clamp_min(1e-17)
            ax.semilogy(range(curves.size(1)), median, marker='o',
                        label=f'N = {order}')
        ax.set_title(stack)
        ax.set_xlabel('layer')
    axes[0].set_ylabel('relative residual ||X - 1x^T||_F / ||X||_F')
    axes[0].legend()
    fig.tight_layout()
    fig.savefig(os.path.join(out, 'collapse.png'), dpi=120)

    fig, ax = plt.subplots(figsize=(5, 4.5))
    for order in ORDERS:
        rows = [r for r in summary['lipschitz'] if r['order'] == order]
        ax.loglog([r['bound'] for r in rows], [r['empirical'] for r in rows],
                  'o', label=f'N = {order}', alpha=0.7)
    lo = min(r['empirical'] for r in summary['lipschitz'])
    hi = max(r['bound'] for r in summary['lipschitz'])
    ax.loglog([lo, hi], [lo, hi], 'k--', label='empirical = bound')
    ax.set_xlabel('Theorem 3.7 bound')
    ax.set_ylabel('empirical local Lipschitz constant')
    ax.legend()
    fig.tight_layout()
    fig.savefig(os.path.join(out, 'lipschitz.png'), dpi=120)

    fig, ax = plt.subplots(figsize=(5.5, 4.5))
    for order in ORDERS:
        rows = [r for r in summary['radius'] if r['order'] == order]
        radii = sorted({r['radius'] for r in rows})
        bound = [max(r['bound'] for r in rows if r['radius'] == x)
                 for x in radii]
        empirical = [max(r['empirical'] for r in rows if r['radius'] == x)
                     for x in radii]
        line, = ax.loglog(radii, bound, '-', label=f'bound, N = {order}')
        ax.loglog(radii, empirical, 'o--', color=line.get_color(),
                  label=f'empirical, N = {order}')
    ax.set_xlabel('radius R')
    ax.set_ylabel('Lipschitz constant (pure attention)')
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(os.path.join(out, 'radius.png'), dpi=120)
    plt.close('all')


def main(argv=None) -> Dict:
    args = parse_args(argv)
    device = resolve_device(args.device)
    torch.set_num_threads(args.threads)
    os.makedirs(args.out, exist_ok=True)
    seeds = range(args.seeds)
    config = {k: v for k, v in vars(args).items() if k != 'out'}
    config['device'] = str(device)
    summary: Dict = dict(config=config,
                         collapse={s: {} for s in STACKS})
    jobs = [(order, stack) for stack in STACKS for order in ORDERS]
    for order, stack in tqdm(jobs, desc='collapse'):
        summary['collapse'][stack][str(order)] = [
            collapse(args, order, stack, seed, device) for seed in seeds
        ]
    radii_wide = [0.1, 2.0] if args.smoke else [0.1, 0.5, 1.0, 2.0]
    summary['lipschitz'] = [
        row for order in tqdm(ORDERS, desc='lipschitz') for seed in seeds
        for row in lipschitz(args, order, seed, radii_wide, biases=True,
                             device=device)
    ]
    radii_small = [10.0**e for e in ([-3, -1, 0] if args.smoke else
                                     [-4, -3, -2, -1, -0.5, 0, 0.5])]
    summary['radius'] = [
        row for order in tqdm(ORDERS, desc='radius') for seed in seeds
        for row in lipschitz(args, order, seed, radii_small, biases=False,
                             device=device)
    ]
    rows = summary['lipschitz'] + summary['radius']
    summary['claims'] = dict(
        collapse_final_median={
            stack: {order: float(torch.tensor(curves).median(0).values[-1])
                    for order, curves in by_order.items()}
            for stack, by_order in summary['collapse'].items()
        },
        max_empirical_over_bound=max(r['empirical'] / r['bound']
                                     for r in rows if r['bound'] > 0),
        bound_at_smallest_radius={
            order: max(r['bound'] for r in summary['radius']
                       if r['order'] == order
                       and r['radius'] == min(radii_small))
            for order in ORDERS
        })
    with open(os.path.join(args.out, 'summary.json'), 'w') as f:
        json.dump(summary, f, indent=1)
    plot(summary, args.out)
    claims = summary['claims']
    for stack, finals in claims['collapse_final_median'].items():
        print(f'{stack:>22}: residual after {args.depth} layers ' +
              ', '.join(f'N={o}: {v:.1e}' for o, v in finals.items()))
    print(f"max empirical / bound: {claims['max_empirical_over_bound']:.3g}")
    print(f'bound at R = {min(radii_small):g}: ' + ', '.join(
        f'N={o}: {v:.2e}'
        for o, v in claims['bound_at_smallest_radius'].items()))
    print(f'plots and summary.json in {args.out} (device: {device})')
    return summary


if __name__ == '__main__':
    main()
