r"""The torch paths that exist only to be faster than their reference, each
timed side by side with it, native kernels off (the torch operations a GPU
runs, timed on the CPU).

* ``direct``: kernel attention's small key groups read straight from their
  keys by the torch operations (``DirectReadings.torch_cost_ratio``)
  against every group through its summary
  (``use_path(direct=SUMMARIES_ONLY)``), on the path ``'pooled'``;
* ``backward``: the hand-written torch backward pass of the operator
  ``torch_geometric_hot::pooled_combination`` against plain autograd
  through its torch forward pass (the operator replaced by that forward
  pass for the comparison), on the path ``'pooled'``;
* ``padded``: HOT softmax attention's global classes on
  ``scaled_dot_product_attention`` over padded blocks (path ``'padded'``)
  against enumerated pairs (path ``'pairs'``).

Workloads: ``molecules``, training passes (forward, L1 loss, backward) of
``molecule_batches.py``'s ``hot_kernel`` model on its first 4 batches of
128 NCITPSA molecules (``--synthetic``: its synthetic molecules), and
``ba:<edges>``, one forward+backward pass of ``hot_scaling.py``'s HOT
model (kernel attention for ``direct`` and ``backward``, softmax for
``padded``) on its Barabási--Albert graph. The two settings alternate
round by round in one process (the order reversed every other round,
after one warm-up round), so a drift of the machine's speed hits both
alike; it prints each setting's minimum and median time and their ratios
(second / first: below 1, the path is faster than its reference) and
writes JSON.

Usage::

    python benchmarks/torch_paths.py direct molecules --threads 1
    python benchmarks/torch_paths.py backward ba:1e5 --rounds 3
    python benchmarks/torch_paths.py padded ba:1e3 --out results/p.json
    python benchmarks/torch_paths.py --quick
"""
import argparse
import os
import sys
import time
from typing import Callable, Dict, List, Tuple

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.dirname(HERE)]
from harness import alternation_times, format_alternation, \
    software_versions, write_json  # noqa: E402

import torch_geometric_hot.ops.pooled_combination  # noqa: E402,F401
from torch_geometric_hot.ops.attention.dispatch import (  # noqa: E402
    DIRECT_READINGS, SUMMARIES_ONLY, use_path)
from torch_geometric_hot.ops.native import use_native  # noqa: E402

# the module (ops re-exports the function under the same name)
pooled = sys.modules['torch_geometric_hot.ops.pooled_combination']
OPERATOR = pooled._pooled_combination
Step = Callable[[], None]


def autograd_pooled(phi_k, phi_q, values, weight, index, structure, heads,
                    head_channels, eps, direct):
    r"""The operator's torch forward pass under plain autograd (its
    arguments, its classes)."""
    pools, reads, parts = pooled._decode(index, structure)
    buffers = pooled._summary_buffers(phi_q, pools, head_channels)
    outs, _ = pooled._torch_forward(
        phi_k, phi_q, pooled._values(values, weight, heads, head_channels),
        pools, reads, parts, eps, pooled._direct(direct), buffers)
    return outs


#: experiment -> (reference, path): each a setting's name and its
#: use_path arguments and operator
SETTINGS: Dict[str, Tuple[Tuple[str, Dict], Tuple[str, Dict]]] = {
    'direct': (('summaries', dict(direct=SUMMARIES_ONLY)),
               ('direct', dict(direct=DIRECT_READINGS))),
    'backward': (('autograd', dict(operator=autograd_pooled)),
                 ('hand', dict(operator=OPERATOR))),
    'padded': (('pairs', dict(path='pairs')), ('padded',
                                               dict(path='padded'))),
}


def molecules(root: str, synthetic: bool, path: str) -> Tuple[Step, Dict]:
    from molecule_batches import Runner, build_model, load_batches
    batches = load_batches(root, 128, 4, synthetic)
    torch.manual_seed(0)
    runner = Runner(build_model('hot_kernel', 64, 4, 4),
                    torch.device('cpu'))

    def step() -> None:
        with use_path(path, operations=('hot', )):
            for batch in batches:
                runner.forward_backward(batch)

    return step, dict(batches=len(batches), batch_size=128)


def ba(edges: int, attention: str, path: str) -> Tuple[Step, Dict]:
    from hot_scaling import BAGraph, hot_model
    from torch_geometric_hot.data import PairView
    graph = BAGraph(edges)
    view = PairView.build(graph.edge_index, graph.num_nodes)
    model = hot_model(attention)

    def step() -> None:
        with use_path(path):
            model(graph.x, graph.edge_index, view=view).sum().backward()

    return step, graph.fields


def _timed(step: Step, setting: Dict) -> float:
    pooled._pooled_combination = setting.get('operator', OPERATOR)
    try:
        with use_path(**({'direct': setting['direct']}
                         if 'direct' in setting else {})):
            start = time.perf_counter()
            step()
            return time.perf_counter() - start
    finally:
        pooled._pooled_combination = OPERATOR


def compare(experiment: str, workload: str, rounds: int, root: str,
            synthetic: bool) -> Dict:
    r"""Alternating rounds of the experiment's two settings on the
    workload; their times and ratios."""
    settings = SETTINGS[experiment]
    steps, fields = {}, {}
    for name, setting in settings:
        path = setting.get('path', 'pooled')
        if workload == 'molecules':
            steps[name], fields = molecules(root, synthetic, path)
        else:
            attention = 'softmax' if experiment == 'padded' else 'kernel'
            steps[name], fields = ba(int(float(workload.split(':')[1])),
                                     attention, path)
    times: Dict[str, List[float]] = {name: [] for name, _ in settings}
    for round in range(rounds + 1):  # the first round warms up
        order = settings if round % 2 == 0 else settings[::-1]
        for name, setting in order:
            elapsed = _timed(steps[name], setting)
            if round:
                times[name].append(elapsed)
    (first, _), (second, _) = settings
    record = dict(experiment=experiment, workload=workload, **fields,
                  threads=torch.get_num_threads())
    record.update(alternation_times(times, first, second))
    return record


def main(argv=None) -> List[Dict]:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('experiment', nargs='?', choices=list(SETTINGS))
    parser.add_argument('workload', nargs='?', default='molecules',
                        help="'molecules' or 'ba:<edges>'")
    parser.add_argument('--rounds', type=int, default=3)
    parser.add_argument('--threads', type=int, default=1)
    parser.add_argument('--synthetic', action='store_true')
    parser.add_argument('--root', default=os.path.join(
        os.path.dirname(HERE), 'data_cache', 'nci_tpsa'))
    parser.add_argument('--quick', action='store_true',
                        help='every experiment on a small BA graph, one '
                        'round (seconds)')
    parser.add_argument('--out', default=None, help='JSON output path')
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    runs = [(name, 'ba:1000', 1) for name in SETTINGS] if args.quick else \
        [(args.experiment or parser.error('an experiment, or --quick'),
          args.workload, args.rounds)]
    records = []
    with use_native('off'):
        for experiment, workload, rounds in runs:
            record = compare(experiment, workload, rounds, args.root,
                             args.synthetic)
            (first, _), (second, _) = SETTINGS[experiment]
            print(f'{experiment:>8} {workload:>10}  ' + format_alternation(
                record, (first, second), (first, second)) +
                  ' (min / median)', flush=True)
            records.append(dict(record, versions=software_versions()))
    if args.out:
        write_json(args.out, records)
    return records


if __name__ == '__main__':
    main()
