r"""Runs the code cells of every notebook in ``examples/notebooks/`` without
Jupyter (plain ``exec`` in a fresh namespace, matplotlib's Agg backend) in
the quick setting (``TORCH_GEOMETRIC_HOT_QUICK=1``: a smaller subset and
fewer epochs), and checks what each notebook claims."""
import json
import math
from pathlib import Path

import pytest
import torch

pytest.importorskip('rdkit')
pytest.importorskip('ogb')
matplotlib = pytest.importorskip('matplotlib')

NOTEBOOKS = Path(__file__).resolve().parents[2] / 'examples' / 'notebooks'


def code_of(name: str) -> str:
    r"""The notebook's code cells joined in order."""
    with open(NOTEBOOKS / name, encoding='utf-8') as f:
        book = json.load(f)
    cells = []
    for cell in book['cells']:
        if cell['cell_type'] != 'code':
            continue
        source = cell['source']
        source = ''.join(source) if isinstance(source, list) else source
        assert not any(line.lstrip().startswith(('%', '!'))
                       for line in source.splitlines()), \
            f'{name}: IPython magics cannot run without Jupyter'
        cells.append(source)
    return '\n\n'.join(cells)


@pytest.fixture
def run_notebook(tmp_path, monkeypatch):
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt

    monkeypatch.setenv('TORCH_GEOMETRIC_HOT_QUICK', '1')
    monkeypatch.setenv('TORCH_GEOMETRIC_HOT_DATA', str(tmp_path / 'data'))
    monkeypatch.chdir(tmp_path)

    def run(name: str) -> dict:
        namespace = {'__name__': '__notebook__'}
        exec(compile(code_of(name), str(NOTEBOOKS / name), 'exec'),
             namespace)
        return namespace

    yield run
    plt.close('all')


def check_beats_mean(results: dict) -> None:
    baseline = results.pop('predict the training mean')
    assert math.isfinite(baseline) and baseline > 0
    for name, mae in results.items():
        assert math.isfinite(mae), name
        assert mae < baseline, f'{name}: test MAE {mae:.2f} is not below ' \
            f'the mean prediction ({baseline:.2f})'


def test_hot_molecules(run_notebook):
    ns = run_notebook('hot_molecules.ipynb')
    assert ns['QUICK']
    view, n, m = ns['view'], ns['n'], ns['m']
    assert view.num_entries == n + m  # both bond directions, no self-loops
    assert set(ns['results']) == {'predict the training mean',
                                  'InvariantMLP', 'HOTGraphModel (kernel)'}
    check_beats_mean(dict(ns['results']))
    for key, grid in ns['maps'].items():  # softmax rows are distributions
        assert grid.shape == (n, n), key
        torch.testing.assert_close(grid.sum(1), torch.ones(n))
    adjacency = torch.zeros(n, n, dtype=torch.bool)
    adjacency[ns['mol'].edge_index[0], ns['mol'].edge_index[1]] = True
    assert not ns['maps']['diag/6'][~adjacency].any()  # bonds only
    assert not ns['maps']['diag/12'].diagonal().any()  # k != i


def test_tokengt_molecules(run_notebook):
    ns = run_notebook('tokengt_molecules.ipynb')
    assert ns['QUICK']
    n = ns['n']
    for name, gram in ns['gram'].items():  # n <= d_p: orthonormal rows
        torch.testing.assert_close(gram, torch.eye(n), atol=1e-5, rtol=0,
                                   msg=name)
    assert set(ns['results']) == {'predict the training mean',
                                  'TokenGT (Laplacian ids)',
                                  'TokenGT (ORF ids)'}
    check_beats_mean(dict(ns['results']))
