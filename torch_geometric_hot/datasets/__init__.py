r"""datasets."""
from torch_geometric_hot.datasets.nci_tpsa import NCITPSA
from torch_geometric_hot.datasets.synthetic_chains import synthetic_chains

__all__ = [
    'NCITPSA',
    'synthetic_chains',
]
