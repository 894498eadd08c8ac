r"""How far the HOT kernel model is from what its arithmetic allows.

The cost promises ask the kernel model of ``hot_scaling.py`` (``4 x Enc2->2 +
Enc2->0``, width 32, 4 heads x 8, FAVOR+) to run forward+backward within
25x the time per edge of the ``GATConv`` stack. This script measures, in one
run and on one graph:

* the multiply-accumulates of one forward+backward pass: every matrix
  product (counted by ``torch.utils.flop_counter.FlopCounterMode``, forward
  and backward) plus the summaries and readings of kernel attention (the
  native kernels: counted from the pools and readings the model builds,
  every group as summarised, although small groups are read directly with
  fewer; their backward pass does twice the forward's), element-wise work
  not counted;
* this machine's single-precision matrix-product rate: a large square
  product (the peak) and the model's most frequent shape,
  ``[entries, 32] x [32, 32]``;
* the forward+backward time of the HOT model and of the ``GATConv`` stack,
  alternating round by round (one HOT pass, then the median of
  :data:`GAT_PER_ROUND` GAT passes), so that the machine's drifts hit both
  alike; each round's ratio is recorded too.

From these it prints the time the arithmetic alone would take at the peak
rate (the floor no implementation of this architecture can beat here), the
ratio to GAT that floor implies, and the rate the whole model would have to
sustain for the 25x target.

Usage::

    python benchmarks/hot_arithmetic.py --threads 1 --out results/a.json
    python benchmarks/hot_arithmetic.py --quick
"""
import argparse
import os
import statistics
import sys
import time
from typing import Callable, Dict, List, Tuple
from unittest import mock

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import software_versions, write_json  # noqa: E402
from hot_scaling import gat, hot  # noqa: E402

import torch_geometric_hot.ops.attention.pooled as attention  # noqa
from torch_geometric_hot.ops.pooled_combination import \
    pooled_combination  # noqa: E402

#: The arithmetic floor is this machine's CPU rate: the models run there.
CPU = torch.device('cpu')
TARGET = 25.0


def _native_macs(step: Callable[[], torch.Tensor]) -> int:
    r"""Forward multiply-accumulates of kernel attention's summaries and
    readings in one forward pass of :obj:`step`, every group counted as
    summarised (groups the kernels read directly from their keys cost
    fewer: an upper bound)."""
    total = [0]

    def counting(parts, pools, reads, phi_q, phi_k, values, *args):
        H, R, D = phi_k.size(1), phi_k.size(2), values.shape[-1]
        for pool in pools:
            total[0] += pool.position.numel() * H * R * (
                len(pool.slots) * D + 1)
        for read in reads:
            slots = read.slots or pools[read.pool].slots
            total[0] += read.group.numel() * H * R * (len(slots) * D + 1)
        return pooled_combination(parts, pools, reads, phi_q, phi_k, values,
                                  *args)

    with mock.patch.object(attention, 'pooled_combination', counting), \
            torch.no_grad():
        step()
    return total[0]


def _matmul_macs(step: Callable[[], torch.Tensor]) -> int:
    from torch.utils.flop_counter import FlopCounterMode
    with FlopCounterMode(display=False) as counter:
        step().sum().backward()
    return counter.get_total_flops() // 2


def _timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def _seconds(fn: Callable[[], object], repeats: int) -> float:
    fn()  # warm-up
    return statistics.median(_timed(fn) for _ in range(repeats))


#: GATConv passes per round of :func:`_alternating_seconds` (a pass is
#: about 30x shorter than the HOT model's).
GAT_PER_ROUND = 3


def _alternating_seconds(first: Callable[[], object],
                         second: Callable[[], object],
                         rounds: int) -> Tuple[List[float], List[float]]:
    r"""Per round, the time of one pass of :obj:`first` and the median of
    :data:`GAT_PER_ROUND` passes of :obj:`second` right after it (one
    warm-up pass of each first)."""
    first()
    second()
    times: Tuple[List[float], List[float]] = ([], [])
    for _ in range(rounds):
        times[0].append(_timed(first))
        times[1].append(statistics.median(
            _timed(second) for _ in range(GAT_PER_ROUND)))
    return times


def _gemm_rate(m: int, k: int, n: int, repeats: int) -> float:
    a, b = torch.randn(m, k), torch.randn(k, n)
    return m * k * n / _seconds(lambda: a @ b, repeats) / 1e9


def measure(size: int, repeats: int) -> Dict:
    step, fields = hot('kernel')(size, CPU)
    gat_step, _ = gat(size, CPU)
    matmul = _matmul_macs(step)
    native = 3 * _native_macs(step)
    total = matmul + native
    hot_passes, gat_passes = _alternating_seconds(
        lambda: step().sum().backward(),
        lambda: gat_step().sum().backward(), repeats)
    hot_s, gat_s = (statistics.median(hot_passes),
                    statistics.median(gat_passes))
    round_ratios = [h / g for h, g in zip(hot_passes, gat_passes)]
    peak = _gemm_rate(2048, 2048, 2048, 3)
    skinny = _gemm_rate(fields['n_entries'], 32, 32, 10)
    floor_s = total / 1e9 / peak
    return dict(
        benchmark='hot_arithmetic', variant='hot_kernel', **fields,
        matmul_gmac=matmul / 1e9, native_gmac=native / 1e9,
        total_gmac=total / 1e9, peak_gmacs=peak, skinny_gmacs=skinny,
        hot_fwd_bwd_s=hot_s, gat_fwd_bwd_s=gat_s,
        achieved_gmacs=total / 1e9 / hot_s,
        achieved_of_peak=total / 1e9 / hot_s / peak,
        floor_at_peak_s=floor_s, floor_ratio_to_gat=floor_s / gat_s,
        measured_ratio_to_gat=hot_s / gat_s,
        hot_pass_s=hot_passes, gat_pass_s=gat_passes,
        round_ratios=round_ratios,
        round_ratio_median=statistics.median(round_ratios),
        gmacs_for_target=total / 1e9 / (TARGET * gat_s),
        target_of_peak=total / 1e9 / (TARGET * gat_s) / peak,
        device='cpu', versions=software_versions(),
        threads=torch.get_num_threads())


def format_record(r: Dict) -> str:
    return '\n'.join([
        f"{r['n_edges']} edges, {r['n_entries']} entries, "
        f"{r['threads']} thread(s):",
        f"  multiply-accumulates per forward+backward: "
        f"{r['total_gmac']:.1f} G ({r['matmul_gmac']:.1f} G matrix "
        f"products, {r['native_gmac']:.1f} G summaries and readings)",
        f"  sgemm rate: {r['peak_gmacs']:.1f} GMAC/s (2048^3), "
        f"{r['skinny_gmacs']:.1f} GMAC/s ([entries, 32] x [32, 32])",
        f"  HOT {r['hot_fwd_bwd_s']:.2f} s ({r['achieved_gmacs']:.2f} "
        f"GMAC/s, {100 * r['achieved_of_peak']:.0f} % of peak), GAT "
        f"{r['gat_fwd_bwd_s']:.3f} s: {r['measured_ratio_to_gat']:.1f}x "
        f"(medians of {len(r['round_ratios'])} alternating rounds; per "
        f"round {min(r['round_ratios']):.1f}-{max(r['round_ratios']):.1f}x, "
        f"median {r['round_ratio_median']:.1f}x)",
        f"  arithmetic alone at peak: {r['floor_at_peak_s']:.2f} s = "
        f"{r['floor_ratio_to_gat']:.1f}x GAT",
        f"  {TARGET:.0f}x GAT needs {r['gmacs_for_target']:.2f} GMAC/s "
        f"sustained = {100 * r['target_of_peak']:.0f} % of peak"])


def main(argv: List[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--sizes', type=float, nargs='+', default=[1e5])
    parser.add_argument('--repeats', type=int, default=5,
                        help='alternating rounds of the two models')
    parser.add_argument('--threads', type=int, default=None)
    parser.add_argument('--quick', action='store_true')
    parser.add_argument('--out', default=None)
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    sizes = [3e3] if args.quick else args.sizes
    records = []
    for size in sizes:
        records.append(measure(int(size), 1 if args.quick else args.repeats))
        print(format_record(records[-1]), flush=True)
    if args.out:
        write_json(args.out, records)


if __name__ == '__main__':
    main(sys.argv[1:])
