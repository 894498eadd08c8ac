import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..', '..',
                                'benchmarks'))
import hot_arithmetic  # noqa: E402
import hot_scaling  # noqa: E402

from torch_geometric_hot.ops import native  # noqa: E402
from torch_geometric_hot.ops.feature_maps import \
    default_num_features  # noqa: E402


def test_native_count_matches_the_pools_of_one_block():
    # the model of hot_scaling (4 x Enc2->2 + Enc2->0) on a 300-edge graph:
    # the count adds rows x H x R x columns over pools and readings
    step, fields = hot_scaling.hot('kernel')(300, hot_arithmetic.CPU)
    count = hot_arithmetic._native_macs(step)
    H, R, D = 4, default_num_features(8), 8
    m = fields['n_edges']
    # at least: each 2->2 layer sums every off-diagonal entry into one slot
    # of one pool and reads it once
    assert count > 4 * 2 * m * H * R * (D + 1)
    assert count % (H * R) == 0


@pytest.mark.skipif(not native.available(), reason='no native kernels')
def test_measure_is_consistent():
    r = hot_arithmetic.measure(300, 3)
    assert r['total_gmac'] == pytest.approx(r['matmul_gmac'] +
                                            r['native_gmac'])
    # three alternating rounds: the medians of their passes, and each
    # round's ratio
    assert len(r['hot_pass_s']) == len(r['gat_pass_s']) == 3
    assert r['hot_fwd_bwd_s'] == sorted(r['hot_pass_s'])[1]
    assert r['round_ratios'] == pytest.approx(
        [h / g for h, g in zip(r['hot_pass_s'], r['gat_pass_s'])])
    assert r['round_ratio_median'] == sorted(r['round_ratios'])[1]
    assert r['floor_at_peak_s'] == pytest.approx(r['total_gmac'] /
                                                 r['peak_gmacs'])
    assert r['measured_ratio_to_gat'] == pytest.approx(
        r['hot_fwd_bwd_s'] / r['gat_fwd_bwd_s'])
    assert 0 < r['achieved_of_peak'] < 1.5
    assert 'arithmetic alone' in hot_arithmetic.format_record(r)
