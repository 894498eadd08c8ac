import json
import os
import sys

import pytest

pytest.importorskip('rdkit')
pytest.importorskip('ogb')

sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..', '..',
                                'benchmarks'))
import preset_costs  # noqa: E402


def test_tiny_presets_write_every_field(tmp_path):
    out = tmp_path / 'costs.json'
    result = preset_costs.main([
        '--presets', 'gin-vn,tokengt-lap', '--smoke', '--batch-size', '8',
        '--micro-batch', '4', '--timed-micro-batches', '1', '--steps', '1',
        '--molecules', '60', '--threads', '1', '--root',
        str(tmp_path / 'ogb'), '--out', str(out)])
    assert json.loads(out.read_text()) == result
    gin, tokengt = result['presets']
    assert (gin['preset'], tokengt['preset']) == ('gin-vn', 'tokengt-lap')
    for r in (gin, tokengt):
        assert (r['batch_size'], r['micro_batch'], r['accumulate']) == (
            8, 4, 2)
        assert r['extrapolated'] and r['seconds_per_step'] > 0
        assert r['molecules_per_second'] == pytest.approx(
            8 / r['seconds_per_step'])
        assert r['hours'] == pytest.approx(
            r['total_steps'] * r['seconds_per_step'] / 3600)
        assert r['peak_mb'] > 0 and r['parameters'] > 0
    # the command's smoke run: 2 epochs of PCQM4Mv2 in batches of 8
    assert gin['total_steps'] == 2 * -(-3_378_606 // 8)
    assert '| gin-vn |' in preset_costs.table(result['presets'])
    with pytest.raises(SystemExit, match="'--presets'"):
        preset_costs.main(['--presets', 'gpt-4'])
