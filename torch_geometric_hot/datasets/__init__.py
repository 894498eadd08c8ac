r"""datasets."""
from torch_geometric_hot.datasets.nci_tpsa import NCITPSA

__all__ = [
    'NCITPSA',
]
