r"""Runs every notebook in ``examples/notebooks/`` as a notebook: a real
Jupyter kernel (nbclient + ipykernel, started by this test's Python) executes
its cells top to bottom in the quick setting (``TORCH_GEOMETRIC_HOT_QUICK=1``:
a smaller subset and fewer epochs). One more cell, appended by the test and
run in the same kernel, prints what the notebook computed as a JSON line;
the tests check the notebook's claims on those values."""
import importlib.util
import json
import math
import re
import sys
from pathlib import Path

import pytest
import torch

pytest.importorskip('rdkit')
pytest.importorskip('ogb')
pytest.importorskip('matplotlib')
pytest.importorskip('nbclient')
pytest.importorskip('ipykernel')
nbformat = pytest.importorskip('nbformat')

NOTEBOOKS = Path(__file__).resolve().parents[2] / 'examples' / 'notebooks'
_spec = importlib.util.spec_from_file_location('notebook_execute',
                                               NOTEBOOKS / 'execute.py')
_module = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_module)
execute = _module.execute

MARKER = 'NOTEBOOK VALUES '
PROBE = '''
import json as _json, sys as _sys, torch as _torch
def _plain(value):
    if isinstance(value, _torch.Tensor):
        return value.tolist()
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value
print(%r + _json.dumps(_plain(dict(executable=_sys.executable, %s))))
'''


@pytest.fixture
def run_notebook(tmp_path):
    def run(name: str, **values: str) -> dict:
        r"""Executes the notebook :obj:`name` and returns the values of the
        expressions :obj:`values` (name → Python expression) in its
        kernel."""
        fields = ', '.join(f'{key}={expr}' for key, expr in values.items())
        (tmp_path / 'run').mkdir()
        book, _ = execute(NOTEBOOKS / name, quick=True,
                          data_dir=tmp_path / 'data',
                          work_dir=tmp_path / 'run',
                          extra_code=PROBE % (MARKER, fields), timeout=600)
        lines = [line for output in book.cells[-1].outputs
                 for line in output.get('text', '').splitlines()
                 if line.startswith(MARKER)]
        assert len(lines) == 1, book.cells[-1].outputs
        found = json.loads(lines[0][len(MARKER):])
        assert found.pop('executable') == sys.executable
        return found

    return run


def check_beats_mean(results: dict) -> None:
    baseline = results.pop('predict the training mean')
    assert math.isfinite(baseline) and baseline > 0
    for name, mae in results.items():
        assert math.isfinite(mae), name
        assert mae < baseline, f'{name}: test MAE {mae:.2f} is not below ' \
            f'the mean prediction ({baseline:.2f})'


def test_hot_molecules(run_notebook):
    ns = run_notebook('hot_molecules.ipynb', quick='QUICK', n='n', m='m',
                      num_entries='view.num_entries', results='results',
                      maps='maps', edge_index='mol.edge_index')
    assert ns['quick']
    n, m = ns['n'], ns['m']
    assert ns['num_entries'] == n + m  # both bond directions, no self-loops
    assert set(ns['results']) == {'predict the training mean',
                                  'InvariantMLP', 'HOTGraphModel (kernel)'}
    check_beats_mean(ns['results'])
    maps = {key: torch.tensor(grid) for key, grid in ns['maps'].items()}
    assert set(maps) == {'diag/6', 'diag/12'}
    for key, grid in maps.items():  # softmax rows are distributions
        assert grid.shape == (n, n), key
        torch.testing.assert_close(grid.sum(1), torch.ones(n))
    adjacency = torch.zeros(n, n, dtype=torch.bool)
    adjacency[tuple(torch.tensor(ns['edge_index']))] = True
    assert not maps['diag/6'][~adjacency].any()  # bonds only
    assert not maps['diag/12'].diagonal().any()  # k != i


def test_tokengt_molecules(run_notebook):
    ns = run_notebook('tokengt_molecules.ipynb', quick='QUICK', n='n',
                      gram='gram', results='results')
    assert ns['quick']
    n = ns['n']
    assert set(ns['gram']) == {'ORF', 'Laplacian'}
    for name, gram in ns['gram'].items():  # n <= d_p: orthonormal rows
        torch.testing.assert_close(torch.tensor(gram), torch.eye(n),
                                   atol=1e-5, rtol=0, msg=name)
    assert set(ns['results']) == {'predict the training mean',
                                  'TokenGT (Laplacian ids)',
                                  'TokenGT (ORF ids)'}
    check_beats_mean(ns['results'])


def test_ogb_molecules(run_notebook, tmp_path):
    ns = run_notebook('ogb_molecules.ipynb', quick='QUICK',
                      molecules='MOLECULES', epochs='EPOCHS',
                      folder='bench.folder', split='bench.split',
                      test_y='test_y', mean='mean', results='results',
                      histories='histories', summaries='summaries',
                      distance='distance', run_dir='run_dir')
    assert ns['quick']
    # the attention distance of the command's TokenGT run: 2 layers x the
    # zoo's 4 heads, in hops, with its figures in the run folder
    hops = torch.tensor(ns['distance']['mean_distance_hops'])
    assert hops.shape == (2, 4) and bool(torch.isfinite(hops).all())
    assert bool((hops >= 0).all())
    for figure in ('attention_distance.png', 'curve.png'):
        assert (Path(ns['run_dir']) / figure).is_file(), figure
    # the offline fixture in PCQM4Mv2's layout, read by OGB's loader
    folder = Path(ns['folder'])
    assert folder.is_relative_to(tmp_path / 'data')
    for file in ('raw/data.csv.gz', 'split_dict.pt',
                 'processed/geometric_data_processed.pt'):
        assert (folder / file).is_file(), file
    split = {part: set(index) for part, index in ns['split'].items()}
    assert set(split) == {'train', 'valid', 'test'}
    assert not (split['train'] & split['valid'] or split['train']
                & split['test'] or split['valid'] & split['test'])
    assert sum(map(len, split.values())) <= ns['molecules']
    # the evaluator's MAE of the mean prediction, recomputed
    test_y = torch.tensor(ns['test_y'], dtype=torch.float64)
    assert test_y.shape == (len(split['test']), 1)
    baseline = float((test_y - ns['mean']).abs().mean())
    assert ns['results']['predict the training mean'] == \
        pytest.approx(baseline, rel=1e-6)
    assert set(ns['results']) == {'predict the training mean',
                                  'HOT (kernel)', 'TokenGT (Laplacian)',
                                  'GIN (baseline)'}
    check_beats_mean(ns['results'])
    assert set(ns['histories']) == {'hot-kernel', 'tokengt-lap', 'gin'}
    for name, history in ns['histories'].items():
        assert [row['epoch'] for row in history] == \
            list(range(1, ns['epochs'] + 1)), name
        best = min(history, key=lambda row: row['valid'])
        assert ns['summaries'][name]['best epoch'] == best['epoch'], name
        assert all(math.isfinite(row['train loss']) for row in history)


@pytest.mark.parametrize('path', sorted(NOTEBOOKS.glob('*.ipynb')),
                         ids=lambda path: path.name)
def test_stored_outputs_come_from_one_run(path):
    # every code cell ran once, in order, in one kernel, without an error
    book = nbformat.read(path, as_version=4)
    code = [cell for cell in book.cells if cell.cell_type == 'code']
    assert [cell.execution_count for cell in code] == \
        list(range(1, len(code) + 1)), path.name
    for cell in code:
        assert not any(out.output_type == 'error' for out in cell.outputs)


def _stored_text(book) -> str:
    return ''.join(out.get('text', '') for cell in book.cells
                   if cell.cell_type == 'code' for out in cell.outputs)


@pytest.mark.parametrize('path', sorted(NOTEBOOKS.glob('*.ipynb')),
                         ids=lambda path: path.name)
def test_stated_numbers_are_stored_outputs(path):
    # every two-decimal number the notebook's Markdown or its row of the
    # folder's README states is one its stored outputs print
    book = nbformat.read(path, as_version=4)
    stated = ''.join(cell.source for cell in book.cells
                     if cell.cell_type == 'markdown')
    rows = [line for line in
            (NOTEBOOKS / 'README.md').read_text(encoding='utf-8').splitlines()
            if line.startswith(f'| [{path.name}]')]
    assert len(rows) == 1, f'README.md has no row for {path.name}'
    numbers = set(re.findall(r'\b\d+\.\d\d\b', stated + rows[0]))
    printed = set(re.findall(r'\b\d+\.\d\d\b', _stored_text(book)))
    assert numbers <= printed, f'{path.name}: stated but not in the ' \
        f'stored outputs: {sorted(numbers - printed)}'
