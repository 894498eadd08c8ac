import json
import math

import pytest

from example_scripts import load_example


def load():
    return load_example('hot_chains')


def test_trains_the_requested_models_and_writes_json(tmp_path, capsys,
                                                     device):
    module = load()
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


@pytest.mark.parametrize('argv', [['--epochs', '0'], ['--models', 'GAT']])
def test_bad_options_are_usage_errors(argv, capsys):
    with pytest.raises(SystemExit):
        load().main(argv)
    assert argv[0] in capsys.readouterr().err
