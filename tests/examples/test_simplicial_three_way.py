import math

import pytest

from example_scripts import load_example


def load():
    return load_example('simplicial_three_way')


def test_short_run_favours_the_2_simplicial_model(device):
    # 150 steps (half of --quick) already separate the two models by about
    # 3.5 points of test accuracy.
    result = load().main(['--steps', '150', '--device', device.type])
    assert result['device'].split(':')[0] == device.type
    assert result['steps'] == 150
    models = {r['order']: r for r in result['models']}
    assert sorted(models) == [1, 2]
    assert 0.5 < result['test_positives'] < 0.75
    majority = max(result['test_positives'], 1 - result['test_positives'])
    for r in models.values():
        assert r['steps'] == 150
        assert math.isfinite(r['loss']) and 0 < r['loss'] < math.log(2)
        assert r['seconds'] > 0
        # both learn something beyond the majority class ...
        assert majority + 0.05 < r['accuracy'] <= 1.0
    # ... the 2-simplicial model (more parameters in its attention only)
    # more: the label is a three-way interaction
    assert models[2]['params'] > models[1]['params']
    assert models[2]['accuracy'] > models[1]['accuracy'] + 0.015


def test_steps_below_one_are_a_usage_error(capsys):
    with pytest.raises(SystemExit):
        load().main(['--steps', '0'])
    assert '--steps' in capsys.readouterr().err
