import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..', '..',
                                'benchmarks'))
import direct_readings  # noqa: E402

from torch_geometric_hot.ops.attention import dispatch  # noqa: E402


def test_molecules_are_separate_graphs_of_25_nodes():
    data, view = direct_readings.molecules(4)
    assert view.num_nodes == 100 and view.num_graphs == 4
    graph = data.batch[data.edge_index]
    assert (graph[0] == graph[1]).all()  # no edge between two graphs
    assert (data.edge_index // 25 == graph).all()


def test_compare_alternates_the_two_settings_and_leaves_the_rule():
    r = direct_readings.compare(direct_readings.molecules(3), repeats=2)
    assert dispatch.direct_readings() == dispatch.DIRECT_READINGS
    assert r['direct_max_keys'] == dispatch.DIRECT_READINGS.max_keys
    assert len(r['summaries_s']) == len(r['direct_s']) == 2
    assert r['ratio_min'] == pytest.approx(r['direct_min_s'] /
                                           r['summaries_min_s'])
    assert 'ratio' in direct_readings.format_record('molecules', r)
