r"""1-simplicial (ordinary) vs 2-simplicial attention on a three-way task.

Task ("sum of three tokens", a Match3-style problem): every graph is a set of
:math:`n = 6` tokens with values :math:`v_i \in \mathbb{Z}_{24}`; token
:math:`i` is labelled 1 when some pair of tokens of its set (repeats and
:math:`i` itself allowed) completes it to a zero sum,

.. math::
    y_i = \mathbb{1}\left[\exists\, j, k : v_i + v_j + v_k \equiv 0
    \pmod{24}\right].

The label is a three-way interaction: no pairwise statistic decides it. Both
models are identical except for the attention order: token embedding ->
one :class:`~torch_geometric_hot.nn.SimplicialAttention` layer on dense
tuples (4 heads, width 32) -> LayerNorm -> MLP. Data are generated on the
fly (fresh sets every step, drawn on the CPU with a seeded generator, so
every device sees the same sets); accuracy is measured on 2048 held-out
sets.

Run ``python examples/simplicial_three_way.py --quick`` (about a minute on
2 CPU cores); it trains on a GPU when torch sees one, and
``--device cpu`` or ``--device cuda`` picks the device (default ``auto``).
"""
import argparse
import os
import sys
import time
from typing import Dict, List, Optional, Tuple

import torch
from torch import Tensor

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(
    __file__))))
from torch_geometric_hot.nn import SimplicialAttention  # noqa: E402
from torch_geometric_hot.train import resolve_device  # noqa: E402

SET_SIZE, MODULUS = 6, 24


def sample_sets(num_sets: int,
                gen: torch.Generator) -> Tuple[Tensor, Tensor, Tensor]:
    r"""Token values :obj:`[B*n]`, labels :obj:`[B*n]` and the batch
    vector of :obj:`num_sets` random sets."""
    v = torch.randint(MODULUS, (num_sets, SET_SIZE), generator=gen)
    sums = v[:, :, None, None] + v[:, None, :, None] + v[:, None, None, :]
    label = (sums % MODULUS == 0).flatten(2).any(-1).float()
    batch = torch.arange(num_sets).repeat_interleave(SET_SIZE)
    return v.view(-1), label.view(-1), batch


class TokenClassifier(torch.nn.Module):
    r"""Embedding -> N-simplicial attention (dense tuples) -> MLP."""
    def __init__(self, order: int, channels: int = 32, heads: int = 4):
        super().__init__()
        self.embed = torch.nn.Embedding(MODULUS, channels)
        self.attention = SimplicialAttention(channels, heads=heads,
                                             order=order)
        self.norm = torch.nn.LayerNorm(channels)
        self.head = torch.nn.Sequential(torch.nn.Linear(channels, 64),
                                        torch.nn.GELU(),
                                        torch.nn.Linear(64, 1))

    def forward(self, value: Tensor, batch: Tensor) -> Tensor:
        x = self.attention(self.embed(value), batch=batch)
        return self.head(self.norm(x)).squeeze(-1)


def to_device(tensors: Tuple[Tensor, ...],
              device: torch.device) -> Tuple[Tensor, ...]:
    return tuple(t.to(device) for t in tensors)


def train(order: int, steps: int, sets_per_step: int,
          test: Tuple[Tensor, Tensor, Tensor], device: torch.device) -> Dict:
    r"""Trains one model on :obj:`device` (:obj:`test` already there)."""
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(1)
    model = TokenClassifier(order).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    start = time.perf_counter()
    for _ in range(steps):
        value, label, batch = to_device(sample_sets(sets_per_step, gen),
                                        device)
        loss = torch.nn.functional.binary_cross_entropy_with_logits(
            model(value, batch), label)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    loss = loss.item()  # waits for the device
    seconds = time.perf_counter() - start
    model.eval()
    with torch.no_grad():
        value, label, batch = test
        accuracy = ((model(value, batch) > 0).float() == label).float()
    return dict(order=order, params=sum(p.numel()
                                        for p in model.parameters()),
                steps=steps, seconds=seconds, loss=loss,
                accuracy=float(accuracy.mean()))


def main(argv: Optional[List[str]] = None) -> Dict:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--quick', action='store_true',
                        help='300 training steps instead of 1500')
    parser.add_argument('--steps', type=int,
                        help='training steps (default: 1500, 300 with '
                        '--quick)')
    parser.add_argument('--threads', type=int, default=None,
                        help="torch intra-op threads (default: torch's "
                        'choice)')
    parser.add_argument('--device', default='auto',
                        choices=('auto', 'cpu', 'cuda'),
                        help='cpu, cuda, or auto: CUDA when torch sees a GPU '
                        '(default: auto)')
    args = parser.parse_args(argv)
    if args.steps is not None and args.steps < 1:
        parser.error(f'--steps must be at least 1, got {args.steps}')
    device = resolve_device(args.device)
    if args.threads:
        torch.set_num_threads(args.threads)
    steps = args.steps or (300 if args.quick else 1500)
    sets_per_step = 256
    test = sample_sets(2048, torch.Generator().manual_seed(12345))
    positives = float(test[1].mean())
    test = to_device(test, device)
    print(f'sum of three tokens: sets of {SET_SIZE}, values mod {MODULUS}, '
          f'{steps} steps x {sets_per_step} sets; test positives '
          f'{positives:.3f}; device {device}')
    print(f"{'model':>14} {'params':>7} {'train s':>8} {'loss':>7} "
          f"{'test acc':>9}")
    results = []
    for order in (1, 2):
        r = train(order, steps, sets_per_step, test, device)
        results.append(r)
        print(f"{f'{order}-simplicial':>14} {r['params']:>7} "
              f"{r['seconds']:>8.1f} {r['loss']:>7.3f} "
              f"{r['accuracy']:>9.3f}", flush=True)
    return dict(device=str(device), steps=steps, sets_per_step=sets_per_step,
                test_positives=positives, models=results)


if __name__ == '__main__':
    main()
