"""One version, defined in the package and read by the packaging metadata."""
import importlib.metadata
import re
from pathlib import Path

import pytest

import torch_geometric_hot

tomllib = pytest.importorskip('tomllib')  # Python 3.11+

PYPROJECT = Path(__file__).resolve().parents[2] / 'pyproject.toml'


def test_version_is_a_release_number():
    assert re.fullmatch(r'\d+\.\d+\.\d+', torch_geometric_hot.__version__)


def test_pyproject_reads_the_version_from_the_package():
    config = tomllib.loads(PYPROJECT.read_text())
    assert 'version' not in config['project']
    assert 'version' in config['project']['dynamic']
    dynamic = config['tool']['setuptools']['dynamic']['version']
    assert dynamic == {'attr': 'torch_geometric_hot.__version__'}


def test_installed_metadata_agrees_with_the_package():
    try:
        installed = importlib.metadata.version('torch_geometric_hot')
    except importlib.metadata.PackageNotFoundError:
        pytest.skip('torch_geometric_hot is imported from a source tree, '
                    'not installed')
    assert installed == torch_geometric_hot.__version__
