"""The API reference covers the public API: every name in every
``__all__`` of the package gets an entry on a generated API page, and has a
docstring."""
import importlib
import sys
from pathlib import Path

import pytest

pytest.importorskip('sphinx.pycode')  # the API pages read docs through it

DOCS = Path(__file__).resolve().parents[2] / 'docs'
sys.path.insert(0, str(DOCS / '_ext'))

import api_pages  # noqa: E402

import torch_geometric_hot  # noqa: E402

SUBPACKAGES = api_pages.subpackages()


def test_every_public_subpackage_has_a_page(tmp_path):
    written = {path.name for path in api_pages.write_pages(tmp_path)}
    for name in torch_geometric_hot.__all__:
        if name.startswith('__'):
            continue
        assert f'{name}.md' in written, f'no API page for {name}'
    index = (tmp_path / 'index.md').read_text()
    assert 'torch_geometric_hot.__version__' in index
    for module_name in SUBPACKAGES:
        assert module_name.split('.')[-1] in index


@pytest.mark.parametrize('module_name', SUBPACKAGES)
def test_every_exported_name_is_on_its_page(module_name):
    module = importlib.import_module(module_name)
    names = getattr(module, '__all__', None)
    assert names, f'{module_name} has no __all__'
    text = api_pages.page_text(module_name)
    for name in names:
        assert f':: {module_name}.{name}\n' in text, \
            f'{module_name}.{name} is missing from its API page'


@pytest.mark.parametrize('module_name', SUBPACKAGES)
def test_every_subpackage_says_what_it_holds(module_name):
    summary = (importlib.import_module(module_name).__doc__ or '').strip()
    short = module_name.split('.')[-1]
    assert summary.rstrip('.') not in ('', short), \
        f'{module_name} needs a docstring that says what it holds'


@pytest.mark.parametrize('module_name', SUBPACKAGES)
def test_every_exported_name_has_a_docstring(module_name):
    missing = [
        f'{entry.module}.{entry.name} ({entry.kind})'
        for entry in api_pages.api_entries(module_name)
        if not (entry.doc or '').strip()
    ]
    assert not missing, f'no docstring: {missing}'


def test_a_name_without_a_docstring_is_reported(monkeypatch):
    module = importlib.import_module('torch_geometric_hot.ops')

    def undocumented():
        pass

    monkeypatch.setattr(module, 'undocumented', undocumented, raising=False)
    monkeypatch.setattr(module, '__all__', module.__all__ + ['undocumented'])
    entries = {e.name: e for e in api_pages.api_entries(module.__name__)}
    assert entries['undocumented'].doc is None
    assert entries['KERNELS'].kind == 'data' and entries['KERNELS'].doc
