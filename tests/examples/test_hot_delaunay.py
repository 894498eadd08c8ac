import json

import pytest
import torch

from example_scripts import load_example

pytest.importorskip('matplotlib')
pytest.importorskip('scipy')


def load():
    return load_example('hot_delaunay')


def test_smoke_trains_both_models_and_writes_the_plot(tmp_path, device):
    module = load()
    out = module.main(['--smoke', '--root', str(tmp_path / 'data'), '--out',
                       str(tmp_path / 'out'), '--device', device.type])
    assert torch.device(out['config']['device']).type == device.type
    assert set(out['summary']) == {'HOT', 'S2G+'}
    for scores in out['summary'].values():
        for key in ('accuracy', 'precision', 'recall', 'f1'):
            assert 0.0 <= scores[key] <= 1.0
    assert (tmp_path / 'out' / 'delaunay.png').stat().st_size > 0
    saved = json.loads((tmp_path / 'out' / 'results.json').read_text())
    assert len(saved['runs']) == 2
    assert saved['runs'][0]['example']['target']  # Delaunay edges exist


def test_smoke_covers_the_variable_size_setting(tmp_path):
    from torch_geometric_hot.datasets import DelaunaySets
    from torch_geometric_hot.transforms import AddSecondOrderView
    module = load()
    args = module.parse_args(['--smoke'])
    assert args.points == [8, 12]
    assert module.parse_args(['--points', '20', '80']).points == [20, 80]
    train = DelaunaySets(str(tmp_path), 'train', args.train_sets,
                         tuple(args.points),
                         pre_transform=AddSecondOrderView())
    sizes = {data.num_nodes for data in train}
    assert len(sizes) > 1 and min(sizes) >= 8 and max(sizes) <= 12


def test_metrics():
    import torch
    module = load()
    pred = torch.tensor([True, True, False, False])
    y = torch.tensor([True, False, True, False])
    m = module.metrics(pred, y)
    assert m == dict(accuracy=0.5, precision=0.5, recall=0.5, f1=0.5)
