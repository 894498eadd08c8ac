import math
import os
import sys

import pytest
from torch_geometric.data import Batch

pytest.importorskip('ogb')

sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..', '..',
                                'benchmarks'))
import fit_ablations  # noqa: E402
import readout_spread  # noqa: E402

from torch_geometric_hot.testing import chain_molecule  # noqa: E402
from torch_geometric_hot.train import zoo  # noqa: E402


def test_batch_norm_readout_frees_the_mean_prediction():
    specs = {**zoo.MODELS, **fit_ablations.variants()}
    rows = {}
    for name in ('hot-kernel+bn-head', 'hot-kernel+paper-norm', 'gin'):
        spec = specs[name]
        graphs = [chain_molecule(n, n) for n in (3, 5, 4, 6)]
        if spec.pre_transform is not None:
            graphs = [spec.pre_transform(g) for g in graphs]
        rows[name] = readout_spread.spread(name, spec,
                                           Batch.from_data_list(graphs))
    for row in rows.values():
        assert math.isfinite(row['spread']) and row['spread'] > 0
    assert 'readout spread / rms' not in rows['gin']
    # with batch norm before the head the batch's mean prediction depends
    # on the biases after it only; with layer norm on every parameter
    assert rows['hot-kernel+bn-head']['mean gradient L1'] < \
        0.01 * rows['hot-kernel+paper-norm']['mean gradient L1']


def test_rows_and_arguments_written_as_json(tmp_path):
    import json
    out = tmp_path / 'spread.json'
    rows = readout_spread.main(['--molecules', '40', '--batch-size', '8',
                                '--variants', 'gin,hot-kernel+bn-head',
                                '--root', str(tmp_path / 'data'),
                                '--out', str(out)])
    written = json.loads(out.read_text())
    assert written['rows'] == rows
    assert [r['model'] for r in rows] == ['gin', 'hot-kernel+bn-head']
    assert written['args']['molecules'] == 40
    assert set(written['versions']) >= {'torch', 'source'}
    assert rows[1]['description'] == \
        fit_ablations.variants()['hot-kernel+bn-head'].description
