import importlib.util
import json
import math
from pathlib import Path

import pytest
import torch

SCRIPT = Path(__file__).resolve().parents[2] / 'examples' / 'hot_chains.py'


def load_script():
    spec = importlib.util.spec_from_file_location('hot_chains', SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_trains_the_requested_models_and_writes_json(tmp_path, capsys,
                                                     device):
    module = load_script()
    models = ['GCN', 'HOT (S)']
    out = tmp_path / 'out' / 'chains.json'
    rows = module.main(['--epochs', '2', '--models', *models, '--out',
                        str(out), '--device', device.type])
    assert [row['model'] for row in rows] == models
    for row in rows:
        for key in ('test_accuracy', 'test_macro_f1'):
            assert isinstance(row[key], float)
            assert math.isfinite(row[key]) and 0.0 <= row[key] <= 1.0
        assert row['train_seconds'] >= 0.0
    assert json.loads(out.read_text()) == rows
    header = capsys.readouterr().out.splitlines()[0]
    assert f'device {device.type}' in header


@pytest.mark.skipif(torch.cuda.is_available(),
                    reason='this machine has a CUDA device')
def test_device_cuda_without_a_gpu_is_a_clear_error():
    module = load_script()
    with pytest.raises(ValueError, match='--device'):
        module.main(['--epochs', '1', '--models', 'GCN', '--device', 'cuda'])


@pytest.mark.parametrize('argv', [['--epochs', '0'], ['--models', 'GAT']])
def test_bad_options_are_usage_errors(argv, capsys):
    with pytest.raises(SystemExit):
        load_script().main(argv)
    assert argv[0] in capsys.readouterr().err
