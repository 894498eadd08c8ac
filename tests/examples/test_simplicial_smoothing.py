import pytest

from example_scripts import load_example

pytest.importorskip('matplotlib')
pytest.importorskip('tqdm')


def load():
    return load_example('simplicial_smoothing')


def test_smoke_reproduces_the_claims(tmp_path, device):
    summary = load().main(['--smoke', '--out', str(tmp_path), '--device',
                           device.type])
    assert summary['config']['device'].split(':')[0] == device.type
    for name in ('collapse.png', 'lipschitz.png', 'radius.png',
                 'summary.json'):
        assert (tmp_path / name).stat().st_size > 0
    finals = summary['claims']['collapse_final_median']
    for order in ('1', '2', '3'):
        assert finals['unmasked'][order] < 1e-8
        assert finals['masked'][order] < 0.1
        assert finals['residual + LayerNorm'][order] > 0.3
    assert summary['claims']['max_empirical_over_bound'] <= 1.0
    bound = summary['claims']['bound_at_smallest_radius']
    assert bound[1] > 1.0 > 1e-1 > bound[2] > bound[3]
