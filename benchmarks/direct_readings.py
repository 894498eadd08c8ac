r"""Kernel attention's small key groups read straight from their keys, against
their summaries, side by side in one process.

Kernel attention reads a group of few keys (a node's row or column of a
sparse graph) as :math:`\sum_j (q^\top k_j) [v_j, 1]` instead of building
its :math:`[R, C]` summary (``DirectReadings`` in
``torch_geometric_hot.ops.attention.dispatch``). This script times one
forward+backward pass of the HOT kernel model of ``hot_scaling.py``
(``4 x Enc2->2 + Enc2->0``, width 32, 4 heads x 8, FAVOR+) with every group
summarised (``use_path(direct=SUMMARIES_ONLY)``) and with the default
rule, the two settings alternating pass by pass in one process (so a
drift of the machine's speed hits both alike), on

* ``molecules``: a batch of Barabási--Albert graphs of 25 nodes, 2 links
  per new node (about 3.7 neighbours per node, like molecules);
* ``ba``: ``hot_scaling.py``'s Barabási--Albert graphs, 5 links per new
  node (about 10 neighbours per node, hubs of hundreds).

It prints, per graph, the minimum and median time of each setting and
their ratio (direct / summaries; below 1: faster), and writes JSON.

Usage::

    python benchmarks/direct_readings.py --threads 1 --out results/d.json
    python benchmarks/direct_readings.py --quick
"""
import argparse
import os
import sys
import time
from types import SimpleNamespace
from typing import Callable, Dict, List, Tuple

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import alternation_times, ba_edge_index, \
    format_alternation, software_versions, write_json  # noqa: E402
from hot_scaling import CHANNELS, hot_model  # noqa: E402

from torch_geometric_hot.data import PairView  # noqa: E402
from torch_geometric_hot.ops.attention.dispatch import (  # noqa: E402
    DIRECT_READINGS, SUMMARIES_ONLY, use_path)

Graph = Tuple[SimpleNamespace, PairView]


def molecules(num_graphs: int, nodes: int = 25, m: int = 2) -> Graph:
    r"""A batch of :obj:`num_graphs` Barabási--Albert graphs (both edge
    directions) with random node features."""
    edges, batch = [], []
    for g in range(num_graphs):
        edge_index = ba_edge_index(2 * m * nodes, m=m, seed=g)  # n nodes
        edges.append(edge_index + g * nodes)
        batch.append(torch.full((nodes, ), g))
    edge_index, batch = torch.cat(edges, 1), torch.cat(batch)
    return _graph(edge_index, batch.numel(), batch, num_graphs)


def ba(num_edges: int) -> Graph:
    r"""One Barabási--Albert graph of :obj:`num_edges` edges (5 links per
    new node), as in ``hot_scaling.py``."""
    edge_index = ba_edge_index(num_edges, m=5, seed=0)
    return _graph(edge_index, int(edge_index.max()) + 1, None, None)


def _graph(edge_index, num_nodes, batch, num_graphs) -> Graph:
    gen = torch.Generator().manual_seed(0)
    data = SimpleNamespace(x=torch.randn(num_nodes, CHANNELS, generator=gen),
                           edge_index=edge_index, batch=batch)
    view = PairView.build(edge_index, num_nodes, batch, num_graphs)
    return data, view


def _timed(step: Callable[[], torch.Tensor]) -> float:
    start = time.perf_counter()
    step().sum().backward()
    return time.perf_counter() - start


def compare(graph: Graph, repeats: int) -> Dict:
    r"""Alternating passes of the model with every group summarised and with
    the default rule; the times of each and their ratio."""
    data, view = graph
    model = hot_model('kernel')
    settings = {'summaries': SUMMARIES_ONLY, 'direct': DIRECT_READINGS}
    times: Dict[str, List[float]] = {name: [] for name in settings}
    for rep in range(repeats + 1):  # the first round warms up
        for name, rule in settings.items():
            with use_path(direct=rule):
                elapsed = _timed(lambda: model(data.x, data.edge_index,
                                               batch=data.batch, view=view))
            if rep:
                times[name].append(elapsed)
    record = dict(n_nodes=view.num_nodes, n_edges=data.edge_index.size(1),
                  n_graphs=view.num_graphs, threads=torch.get_num_threads(),
                  direct_max_keys=DIRECT_READINGS.max_keys,
                  direct_cost_ratio=DIRECT_READINGS.cost_ratio)
    record.update(alternation_times(times, 'summaries', 'direct'))
    return record


def format_record(name: str, r: Dict) -> str:
    settings = ('summaries', 'direct')
    return (f"{name:>10} n={r['n_nodes']:>7} m={r['n_edges']:>7}  " +
            format_alternation(r, settings, settings) + ' (min / median)')


def main(argv=None) -> List[Dict]:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--quick', action='store_true',
                        help='small graphs, two rounds (seconds)')
    parser.add_argument('--threads', type=int, default=1)
    parser.add_argument('--repeats', type=int, default=4)
    parser.add_argument('--out', default=None, help='JSON output path')
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    if args.quick:
        graphs = {'molecules': lambda: molecules(20),
                  'ba': lambda: ba(3000)}
        repeats = 2
    else:
        graphs = {'molecules': lambda: molecules(400),
                  'ba': lambda: ba(10**5)}
        repeats = args.repeats
    records = []
    for name, build in graphs.items():
        record = dict(graph=name, **compare(build(), repeats),
                      versions=software_versions())
        print(format_record(name, record), flush=True)
        records.append(record)
    if args.out:
        write_json(args.out, records)
    return records


if __name__ == '__main__':
    main()
