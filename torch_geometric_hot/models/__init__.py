r"""models."""
from torch_geometric_hot.models.invariant_mlp import InvariantMLP

__all__ = ['InvariantMLP']
