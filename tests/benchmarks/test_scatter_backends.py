import os
import statistics
import sys

import pytest
import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..', '..',
                                'benchmarks'))
import scatter_backends  # noqa: E402


@pytest.mark.parametrize('name', list(scatter_backends.OPERATIONS))
def test_ours_and_pygs_agree(name):
    # the check measure() makes before timing, on rows with empty groups
    shape, ours, pyg = scatter_backends.OPERATIONS[name]
    src, index, groups = scatter_backends.inputs(50, shape,
                                                 torch.device('cpu'))
    groups += 3  # groups without rows
    torch.testing.assert_close(ours(src, index, groups),
                               pyg(src, index, groups))


def test_quick_run_records_every_operation(tmp_path):
    out = tmp_path / 'scatter.json'
    result = scatter_backends.main(['--quick', '--out', str(out)])
    records = result['records']
    assert [r['operation'] for r in records] == \
        list(scatter_backends.OPERATIONS)
    for r in records:
        assert len(r['rounds']['ours']) == len(r['rounds']['pyg']) == 2
        ratios = [p / o for p, o in zip(r['rounds']['pyg'],
                                        r['rounds']['ours'])]
        assert r['pyg_to_ours'] == pytest.approx(statistics.median(ratios))
    assert out.exists()
