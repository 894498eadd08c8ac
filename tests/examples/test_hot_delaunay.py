import importlib.util
import json
from pathlib import Path

import pytest
import torch

pytest.importorskip('matplotlib')
pytest.importorskip('scipy')

SCRIPT = Path(__file__).resolve().parents[2] / 'examples' / 'hot_delaunay.py'


def test_smoke_trains_both_models_and_writes_the_plot(tmp_path, device):
    spec = importlib.util.spec_from_file_location('hot_delaunay', SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
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


@pytest.mark.skipif(torch.cuda.is_available(),
                    reason='this machine has a CUDA device')
def test_device_cuda_without_a_gpu_is_a_clear_error(tmp_path):
    spec = importlib.util.spec_from_file_location('hot_delaunay', SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    with pytest.raises(ValueError, match='--device'):
        module.main(['--smoke', '--root', str(tmp_path / 'data'), '--out',
                     str(tmp_path / 'out'), '--device', 'cuda'])
    assert not (tmp_path / 'out').exists()  # refused before any work


def test_smoke_covers_the_variable_size_setting(tmp_path):
    from torch_geometric_hot.datasets import DelaunaySets
    from torch_geometric_hot.transforms import AddSecondOrderView
    spec = importlib.util.spec_from_file_location('hot_delaunay', SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
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
    spec = importlib.util.spec_from_file_location('hot_delaunay', SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    pred = torch.tensor([True, True, False, False])
    y = torch.tensor([True, False, True, False])
    m = module.metrics(pred, y)
    assert m == dict(accuracy=0.5, precision=0.5, recall=0.5, f1=0.5)
