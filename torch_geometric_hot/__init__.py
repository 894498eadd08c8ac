r"""torch_geometric_hot: higher-order attention for PyTorch Geometric.

Data flows one way: :mod:`~torch_geometric_hot.transforms` attach views and
node identifiers, :mod:`~torch_geometric_hot.data` bundles their indices per
batch, :mod:`~torch_geometric_hot.ops` holds the pure sparse kernels,
:mod:`~torch_geometric_hot.nn` the layers and
:mod:`~torch_geometric_hot.models` ready models;
:mod:`~torch_geometric_hot.analysis` measures how smoothing a stack is.
:mod:`~torch_geometric_hot.validation` holds the input checks and the size
limit that all of them share.
"""
from torch_geometric_hot import validation
from torch_geometric_hot import data, ops, transforms, nn, models, datasets
from torch_geometric_hot import testing, analysis

#: The package version (``pyproject.toml`` reads it from here).
__version__ = '0.1.0'

__all__ = [
    'data', 'ops', 'transforms', 'nn', 'models', 'datasets', 'testing',
    'analysis', 'validation', '__version__'
]
