import math

import pytest

from example_scripts import load_example

pytest.importorskip('networkx')


def load():
    return load_example('tokengt_basis_approximation')


def test_smoke_needs_node_and_type_identifiers(tmp_path, device):
    out = tmp_path / 'table.json'
    result = load().main(['--smoke', '--out', str(out), '--device',
                          device.type])
    assert out.stat().st_size > 0
    assert result['device'].split(':')[0] == device.type
    records = {(r['node_id'], r['type_id']): r for r in result['records']}
    assert sorted(records) == [('None', True), ('laplacian', True),
                               ('orf', False), ('orf', True)]
    for r in result['records']:
        assert r['input'] == 'sparse'
        for key in ('train_l2', 'test_l2'):
            assert math.isfinite(r[key]) and r[key] >= 0
    l2 = {key: r['test_l2'] for key, r in records.items()}
    # Orthonormal node identifiers with type identifiers approximate the
    # basis far better than type identifiers alone or ORF alone.
    for node_id in ('orf', 'laplacian'):
        assert l2[node_id, True] < 0.5 * l2['None', True]
    assert l2['orf', True] < 0.6 * l2['orf', False]
