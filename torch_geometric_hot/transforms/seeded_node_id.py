r"""The shared machinery of transforms that draw random node identifiers."""
from typing import Callable, Optional

from torch import Tensor
from torch_geometric.data import Data
from torch_geometric.transforms import BaseTransform

from torch_geometric_hot.ops.node_identifiers import check_dim
from torch_geometric_hot.ops.seeded_generators import SeededGenerators
from torch_geometric_hot.transforms.data_device import data_device


class SeededNodeId(BaseTransform):
    r"""Writes :obj:`generate(num_nodes, dim, generator, device=device)`
    to the node attribute :obj:`attr_name`, drawn on the graph's device
    from the transform's own generator of that device, seeded with
    :obj:`seed` (or the device's default generator when :obj:`seed` is
    :obj:`None`). Subclasses set :obj:`generate`.

    Args:
        dim (int): Identifier dimension :math:`d_p`.
        attr_name (str): Node attribute to write, shape :obj:`[n, dim]`.
        seed (int, optional): Seed of the transform's own generator; the
            sequence of graphs it sees then gets a reproducible sequence of
            identifiers. (default: :obj:`None`, the global generator)
    """
    generate: Callable[..., Tensor]

    def __init__(self, dim: int, attr_name: str,
                 seed: Optional[int] = None) -> None:
        check_dim(dim)
        self.dim = dim
        self.attr_name = attr_name
        self.seed = seed
        self.generators = SeededGenerators(seed)

    def forward(self, data: Data) -> Data:
        device = data_device(data)
        data[self.attr_name] = type(self).generate(
            data.num_nodes, self.dim, self.generators(device), device=device)
        return data

    def __repr__(self) -> str:
        return (f'{self.__class__.__name__}(dim={self.dim}, '
                f'attr_name={self.attr_name!r}, seed={self.seed})')
