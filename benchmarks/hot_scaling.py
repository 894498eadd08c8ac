r"""HOT runtime and memory (HOT App. A.2.3, Table 6a; ``docs/design.md``,
"Cost promises").

Barabási–Albert graphs (each new node linked to 5), one graph per point,
10^3 ... 2*10^6 directed edges, node features ``[n, 32]``; every variant
maps the graph to one output (forward) and back (``out.sum()``):

* ``hot_kernel``: :class:`HOTGraphModel` ``4 x Enc2->2 + Enc2->0``, width
  32, 4 heads of 8, FAVOR+ kernel attention (exact exclusions);
* ``hot_kernel_ckpt``: the same with activation checkpointing
  (``checkpoint=True``: each block recomputed in the backward pass);
* ``hot_softmax``: the same with exact softmax attention (the global
  classes attend over all ``n + m`` entries: quadratic; a point whose
  projected memory exceeds ``--max-mem-gb`` fails at once);
* ``invariant_mlp``: :class:`InvariantMLP` ``(32, 32, num_layers=4)``;
* ``gat``: PyG ``GATConv`` stack, 4 layers, 4 heads x 8 (concat), ELU;
* ``gps_performer``: PyG ``GPSConv`` stack, 4 layers, width 32, 4 heads,
  ``attn_type='performer'``, local ``GINConv``;
* ``floor``: one gather + ``index_add_`` of ``n + m`` rows of width 32
  (the pair-view entries the HOT variants work on).

Sizes count directed edges ``n_edges``; the pair view has ``n + m``
entries (``n_entries``). Points run in fresh processes (shared harness);
each child is stopped by a watchdog when its resident memory exceeds
``--max-mem-gb`` + 1.5 GB, so that a quadratic variant fails cleanly
instead of exhausting the machine.

Promises checked, kernel model, 10^4 ... 10^6 edges: peak-memory
log–log slope <= 1.1, time-to-floor ratio spread < 2, forward+backward at
>= 10^6 edges within 24 GB, forward+backward time per edge within 25x of
the GATConv stack at 10^5 edges. :func:`check_promises` prints them, and
the log–log time slope next to the ratio spread: the floor's own time
varies up to 3x between runs at a size (it is cache-resident at 10^4), so
the slope judges linearity more steadily. With ``--alternate ROUNDS
--alternate-with floor,gat`` each point's process also times the point
round by round against the floor and the GATConv stack on its own graph,
and the spread and the ratio to GAT are printed from those rounds too.
With ``--rounds R`` each size's processes run R times in turn, and the
ratio to GAT is printed as the median of the rounds' ratios (no process
shares the other's state: GATConv runs 10–25 % slower in a process that
has just run HOT).

    python benchmarks/hot_scaling.py --out results/hot_scaling.json \
        --max-seconds 120 --max-mem-gb 20 --alternate 5 \
        --alternate-with floor,gat
    python benchmarks/hot_scaling.py --quick
"""
import json
import os
import statistics
import sys
import threading
import time
from typing import Callable, Dict, List, Tuple

import torch
from torch import Tensor

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.dirname(HERE)]  # harness, package
from harness import ba_edge_index, bandwidth_floor, run_benchmark  # noqa

from torch_geometric_hot.data import PairView  # noqa: E402
from torch_geometric_hot.models import HOTGraphModel, InvariantMLP  # noqa

CHANNELS, HEADS, LAYERS = 32, 4, 4
SIZES = [10**3, 3 * 10**3, 10**4, 3 * 10**4, 10**5, 3 * 10**5, 10**6,
         2 * 10**6]
QUICK_SIZES = [10**3, 3 * 10**3]
PROMISE_RANGE = (10**4, 10**6)
Step = Callable[[], Tensor]


class BAGraph:
    r"""A BA graph with node features, as the models read it."""
    def __init__(self, size: int,
                 device: torch.device = torch.device('cpu')) -> None:
        self.edge_index = ba_edge_index(size, m=5, seed=0).to(device)
        self.num_nodes = int(self.edge_index.max()) + 1
        gen = torch.Generator().manual_seed(0)
        self.x = torch.randn(self.num_nodes, CHANNELS,
                             generator=gen).to(device)

    @property
    def fields(self) -> Dict:
        m = self.edge_index.size(1)
        return dict(n_nodes=self.num_nodes, n_edges=m,
                    n_entries=self.num_nodes + m)


def _pair_model(model: torch.nn.Module, size: int,
                device: torch.device) -> Tuple[Step, Dict]:
    graph = BAGraph(size, device)
    model.to(device)
    view = PairView.build(graph.edge_index, graph.num_nodes)
    return (lambda: model(graph.x, graph.edge_index, view=view)), \
        graph.fields


#: Softmax attention's global classes attend over all n + m entries of the
#: graph (per-graph blocks, quadratic in the graph's size): measured 0.15 GB
#: at 1,012 entries, 4.0 GB at 10,826 (2.5 GB at 1,012 when the global
#: classes still enumerated their (query, key) pairs).
SOFTMAX_GB_AT_1012 = 0.15


def hot_model(attention: str, checkpoint: bool = False) -> HOTGraphModel:
    r"""The benchmark's HOT model: ``4 x Enc2->2 + Enc2->0``, width 32, 4
    heads x 8, FAVOR+ for kernel attention."""
    return HOTGraphModel(CHANNELS, CHANNELS, num_layers=LAYERS, heads=HEADS,
                         attention=attention, kernel='favor+',
                         checkpoint=checkpoint, seed=0)


def hot(attention: str, checkpoint: bool = False):
    def build(size: int, device: torch.device) -> Tuple[Step, Dict]:
        if attention == 'softmax':
            _check_softmax_fits(size)
        return _pair_model(hot_model(attention, checkpoint), size, device)

    return build


def _check_softmax_fits(size: int) -> None:
    r"""Fails a softmax point at once when its quadratic pair count is
    projected (from the measured 10^3-edge point) over ``--max-mem-gb``."""
    entries = BAGraph(size).fields['n_entries']
    projected = SOFTMAX_GB_AT_1012 * (entries / 1012)**2
    limit = float(os.environ.get('HOT_SCALING_MAX_MEM_GB', 12.0))
    if projected > limit:
        raise MemoryError(f'softmax attention on {entries} entries: '
                          f'projected {projected:.0f} GB > {limit} GB')


def invariant_mlp(size: int, device: torch.device) -> Tuple[Step, Dict]:
    return _pair_model(InvariantMLP(CHANNELS, CHANNELS, num_layers=LAYERS),
                       size, device)


class _Stack(torch.nn.Module):
    def __init__(self, convs: List[torch.nn.Module], act: bool) -> None:
        super().__init__()
        self.convs = torch.nn.ModuleList(convs)
        self.act = act

    def forward(self, x: Tensor, edge_index: Tensor) -> Tensor:
        for conv in self.convs:
            x = conv(x, edge_index)
            if self.act:
                x = torch.nn.functional.elu(x)
        return x.sum(0, keepdim=True)


def _node_model(stack: _Stack, size: int,
                device: torch.device) -> Tuple[Step, Dict]:
    graph = BAGraph(size, device)
    stack.to(device)
    return (lambda: stack(graph.x, graph.edge_index)), graph.fields


def gat(size: int, device: torch.device) -> Tuple[Step, Dict]:
    from torch_geometric.nn import GATConv
    convs = [GATConv(CHANNELS, CHANNELS // HEADS, heads=HEADS)
             for _ in range(LAYERS)]
    return _node_model(_Stack(convs, act=True), size, device)


def gps_performer(size: int, device: torch.device) -> Tuple[Step, Dict]:
    from torch_geometric.nn import GINConv, GPSConv

    def local() -> torch.nn.Module:
        return GINConv(torch.nn.Sequential(
            torch.nn.Linear(CHANNELS, CHANNELS), torch.nn.ReLU(),
            torch.nn.Linear(CHANNELS, CHANNELS)))

    convs = [GPSConv(CHANNELS, local(), heads=HEADS, attn_type='performer')
             for _ in range(LAYERS)]
    return _node_model(_Stack(convs, act=False), size, device)


def floor(size: int, device: torch.device) -> Tuple[Step, Dict]:
    fields = BAGraph(size).fields
    return bandwidth_floor(fields['n_entries'], CHANNELS,
                           device=device), fields


VARIANTS = {  # the HOT kernel variants first: the longest, most wanted
    'hot_kernel': hot('kernel'),
    'hot_kernel_ckpt': hot('kernel', checkpoint=True),
    'gat': gat,
    'invariant_mlp': invariant_mlp,
    'gps_performer': gps_performer,
    'hot_softmax': hot('softmax'),
}


def _cap_child_memory(argv: List[str]) -> None:
    r"""In a point's child process: stop the point when its resident memory
    exceeds ``--max-mem-gb`` + 1.5 GB (runtime and inputs), so an
    over-budget point fails instead of exhausting the machine.

    A watchdog thread reads the resident set size every 0.1 s and ends the
    process (exit 3) when it is over the limit. (An address-space limit,
    ``RLIMIT_AS``, stopped the checkpointed kernel model at 10^6 edges with
    a 22.5 GB cap while its resident peak at 3*10^5 edges was 4.7 GB:
    virtual memory is not the budget.)"""
    if '--point' not in argv:  # the parent: children inherit the limit
        if '--max-mem-gb' in argv:
            os.environ['HOT_SCALING_MAX_MEM_GB'] = argv[
                argv.index('--max-mem-gb') + 1]
        return
    limit_gb = float(os.environ.get('HOT_SCALING_MAX_MEM_GB', 12.0))
    limit_pages = int((limit_gb + 1.5) * 2**30) // os.sysconf('SC_PAGE_SIZE')

    def watch() -> None:
        while True:
            with open('/proc/self/statm') as f:
                resident = int(f.read().split()[1])
            if resident > limit_pages:
                sys.stderr.write(f'resident memory over {limit_gb + 1.5} GB\n')
                sys.stderr.flush()
                os._exit(3)
            time.sleep(0.1)

    threading.Thread(target=watch, daemon=True).start()


def check_promises(records: List[Dict]) -> List[str]:
    r"""The cost promises for ``hot_kernel`` (and ``hot_kernel_ckpt``)
    over :data:`PROMISE_RANGE`, from the records of one run: judged for
    each huge-page setting of the run apart (``--thp`` times every point
    without and with them; those lines end in ``[THP]``)."""
    ok = [r for r in records if r.get('status') == 'ok']
    lines = []
    for thp in sorted({r.get('thp', False) for r in ok}):
        same = [r for r in ok if r.get('thp', False) == thp]
        lines += [line + (' [THP]' if thp else '')
                  for line in _promises(same)]
    return lines


def _promises(ok: List[Dict]) -> List[str]:
    from harness import round_medians, summarize
    lo, hi = PROMISE_RANGE
    lines = []
    merged = round_medians(ok)  # one record per size: medians of rounds
    gat = {r['size']: r for r in merged if r['variant'] == 'gat'}
    for variant in ('hot_kernel', 'hot_kernel_ckpt'):
        rows = [r for r in ok if r['variant'] in (variant, 'floor')
                and lo <= r['size'] <= hi]
        mine = [r for r in merged if r['variant'] == variant
                and lo <= r['size'] <= hi]
        if not mine:
            continue
        summary = next(s for s in summarize(rows) if s['variant'] == variant)
        big = [r for r in mine if r['n_edges'] >= 10**6 * 0.99]
        lines.append(
            f"{variant} {lo:.0e}..{hi:.0e} edges: mem slope "
            f"{summary['mem_slope']:.3f} (<= 1.1), time-to-floor ratio "
            f"{summary.get('ratio_min', float('nan')):.3g}.."
            f"{summary.get('ratio_max', float('nan')):.3g}, spread "
            f"{summary.get('ratio_spread', float('nan')):.3f} (< 2); "
            f"time slope {summary['time_slope']:.3f} (1: linear; the "
            f"floor's own varies between runs)")
        if 'alt_ratio_spread' in summary:
            lines.append(
                f"{variant} {lo:.0e}..{hi:.0e} edges, alternating with the "
                f"floor in one process: time-to-floor ratio "
                f"{summary['alt_ratio_min']:.3g}.."
                f"{summary['alt_ratio_max']:.3g}, spread "
                f"{summary['alt_ratio_spread']:.3f} (< 2)")
        for r in big:
            lines.append(f"{variant} at {r['n_edges']} edges: fwd+bwd "
                         f"{r['fwd_bwd_s']:.3g} s, peak "
                         f"{r['peak_mem_mb'] / 1024:.3g} GB (+ base RSS "
                         f"{r['base_rss_mb'] / 1024:.3g} GB; <= 24 GB)")
        if 10**5 in gat and any(r['size'] == 10**5 for r in mine):
            r = next(r for r in mine if r['size'] == 10**5)
            g = gat[10**5]
            ratio = (r['fwd_bwd_s'] / r['n_edges']) / (
                g['fwd_bwd_s'] / g['n_edges'])
            lines.append(f"{variant} / gat fwd+bwd time per edge at 1e5: "
                         f"{ratio:.3g}x (<= 25x)")
            rounds = _round_ratios(ok, variant, 'gat', 10**5)
            if len(rounds) > 1:
                lines.append(
                    f"{variant} / gat at 1e5, median of {len(rounds)} "
                    f"rounds of processes: {statistics.median(rounds):.3g}x"
                    f" (rounds {min(rounds):.3g}..{max(rounds):.3g}x; "
                    f"<= 25x)")
        for r in mine:
            if r['size'] == 10**5 and 'alt_to_gat' in r:
                lines.append(
                    f"{variant} / gat at 1e5, alternating in one process "
                    f"(median of {len(r['alt_self_s'])} rounds): "
                    f"{r['alt_to_gat']:.3g}x (<= 25x)")
    return lines


def _round_ratios(ok: List[Dict], variant: str, reference: str,
                  size: int) -> List[float]:
    # per round of a run with --rounds: the variant's fwd+bwd time per edge
    # over the reference's, both at `size` (rounds where both succeeded)
    def per_edge(name: str) -> Dict[int, float]:
        return {r.get('round', 0): r['fwd_bwd_s'] / r['n_edges'] for r in ok
                if r['variant'] == name and r['size'] == size}

    mine, theirs = per_edge(variant), per_edge(reference)
    return [mine[k] / theirs[k] for k in sorted(mine) if k in theirs]


def main(argv: List[str]) -> None:
    _cap_child_memory(argv)
    records = run_benchmark('hot_scaling', SIZES, VARIANTS, argv=argv,
                            quick_sizes=QUICK_SIZES, floor=floor)
    lines = check_promises(records)
    if lines:
        print('\npromises:\n' + '\n'.join(lines))
    if '--out' in argv and '--count-ops' not in argv:
        out = argv[argv.index('--out') + 1]
        with open(os.path.splitext(out)[0] + '_promises.json', 'w') as f:
            json.dump(lines, f, indent=1)


if __name__ == '__main__':
    main(sys.argv[1:])
