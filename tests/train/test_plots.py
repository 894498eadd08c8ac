import json
import os.path as osp

import pytest
import torch

pytest.importorskip('rdkit')
pytest.importorskip('ogb')
pytest.importorskip('matplotlib')

from torch_geometric_hot.train import main as train  # noqa: E402
from torch_geometric_hot.train import plots  # noqa: E402


@pytest.fixture(scope='module')
def runs(tmp_path_factory):
    base = tmp_path_factory.mktemp('plots')
    root, out = str(base / 'data'), str(base / 'runs')
    train(['--dataset', 'pcqm4mv2', '--root', root, '--offline',
           '--offline-molecules', '300', '--model', 'tokengt-lap,gin',
           '--smoke', '--batch-size', '16', '--hidden', '8', '--layers',
           '3', '--out', out, '--no-progress'])
    return root, out


def test_attention_distance_of_a_tokengt_run(runs, tmp_path):
    root, out = runs
    run_dir = osp.join(out, 'tokengt-lap_seed0')
    result = plots.main(['attention-distance', run_dir, '--root', root,
                         '--offline', '--molecules', '20', '--out',
                         str(tmp_path)])
    distance = torch.tensor(result['mean_distance_hops'])
    assert distance.shape == (3, 4)  # layers x the zoo's 4 heads
    assert bool(torch.isfinite(distance).all())
    assert bool((distance >= 0).all()) and bool((distance < 30).all())
    assert result['molecules'] == 20 and result['split'] == 'valid'
    assert osp.getsize(tmp_path / plots.DISTANCE_FIGURE) > 0
    with open(tmp_path / plots.DISTANCE_FILE) as f:
        assert json.load(f)['mean_distance_hops'] == \
            result['mean_distance_hops']
    last = plots.main(['attention-distance', run_dir, '--root', root,
                       '--offline', '--molecules', '20', '--checkpoint',
                       'last', '--out', str(tmp_path)])
    assert last['epoch'] == 2


def test_learning_curves_and_clear_errors(runs, tmp_path):
    root, out = runs
    path = str(tmp_path / 'curve.png')
    assert plots.main(['learning-curves', osp.join(out, 'gin_seed0'),
                       '--out', path])['figure'] == path
    assert osp.getsize(path) > 0
    with pytest.raises(SystemExit, match="not of a TokenGT model"):
        plots.main(['attention-distance', osp.join(out, 'gin_seed0'),
                    '--root', root, '--offline'])
    with pytest.raises(SystemExit, match='holds no best checkpoint'):
        plots.main(['attention-distance', str(tmp_path)])
    with pytest.raises(SystemExit, match='metrics.jsonl'):
        plots.main(['learning-curves', str(tmp_path)])
