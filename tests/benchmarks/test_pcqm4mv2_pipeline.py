import os
import sys

import pytest

pytest.importorskip('rdkit')
pytest.importorskip('ogb')

sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..', '..',
                                'benchmarks'))
import pcqm4mv2_pipeline  # noqa: E402


def test_smoke_runs_every_stage_and_writes_json(tmp_path):
    out = tmp_path / 'pipeline.json'
    result = pcqm4mv2_pipeline.main([
        '--smoke', '--in-process', '--models', 'tokengt-lap', '--views',
        'computed', '--root', str(tmp_path / 'data'), '--out', str(out)])
    assert out.exists()
    stages = [pcqm4mv2_pipeline.stage_key(r) for r in result['records']]
    assert stages == ['write', 'ogb-process', 'process',
                      'profile/tokengt-lap/computed',
                      'prepare/tokengt-lap/computed',
                      'loader/tokengt-lap/computed/1w/cuda']
    records = {pcqm4mv2_pipeline.stage_key(r): r for r in result['records']}
    assert records['process']['molecules_read'] == \
        pcqm4mv2_pipeline.SMOKE_MOLECULES
    loader = records['loader/tokengt-lap/computed/1w/cuda']
    train = records['prepare/tokengt-lap/computed']['train_molecules']
    assert loader['molecules'] == train and loader['molecules_per_s'] > 0
    assert loader['worker_cpu_s'] > 0 and loader['peak_pss_bytes'] > 0
    profile = records['profile/tokengt-lap/computed']
    assert profile['worker_us'] == pytest.approx(
        profile['read_us'] + profile['views_us'] + profile['collate_us'] +
        profile['plan_us'])
    assert profile['plan_us'] > 0  # the planning pass of a GPU's batches
    for r in result['records']:
        assert r['wall_s'] > 0 and r['peak_rss_bytes'] > 0
    assert result['extrapolation'] == []  # one size: nothing fitted


def test_extrapolation_is_a_least_squares_line():
    records = [dict(stage='process', molecules_total=n, wall_s=2 + 0.5 * n,
                    peak_rss_bytes=100 + 3 * n, disk_bytes=7 * n)
               for n in (10, 100, 1000)]
    (entry, ) = pcqm4mv2_pipeline.extrapolate(records, 10**6)
    assert entry['stage'] == 'process' and entry['sizes'] == [10, 100, 1000]
    assert entry['wall_s'] == pytest.approx(2 + 0.5e6)
    assert entry['peak_rss_bytes_per_molecule'] == pytest.approx(3)
    assert entry['disk_bytes'] == pytest.approx(7e6)
    assert 'peak_pss_bytes' not in entry
