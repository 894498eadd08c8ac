r"""Near-orthonormal random node identifiers as a PyG transform."""
from typing import Optional

import torch
from torch_geometric.data import Data
from torch_geometric.transforms import BaseTransform

from torch_geometric_hot.ops.node_identifiers import (check_dim,
                                                      random_node_ids)


class AddRandomNodeId(BaseTransform):
    r"""Adds near-orthonormal random node identifiers for TokenGT on large
    graphs (`Kim et al. 2022 <https://arxiv.org/abs/2207.02505>`_, App. C.3,
    "Near-ORF"): every entry is :math:`\pm 1/\sqrt{d_p}` by a fair coin, so
    rows have unit norm and distinct rows are nearly orthogonal
    (inner products of standard deviation :math:`1/\sqrt{d_p}`), for any
    number of nodes at O(n d_p) cost.

    Args:
        dim (int): Identifier dimension :math:`d_p`.
        attr_name (str): Node attribute to write, shape :obj:`[n, dim]`.
            (default: :obj:`"random_node_id"`)
        seed (int, optional): Seed of the transform's own generator.
            (default: :obj:`None`, the global generator)
    """
    def __init__(self, dim: int, attr_name: str = 'random_node_id',
                 seed: Optional[int] = None) -> None:
        check_dim(dim)
        self.dim = dim
        self.attr_name = attr_name
        self.seed = seed
        self.generator = None
        if seed is not None:
            self.generator = torch.Generator().manual_seed(seed)

    def forward(self, data: Data) -> Data:
        data[self.attr_name] = random_node_ids(data.num_nodes, self.dim,
                                               self.generator)
        return data

    def __repr__(self) -> str:
        return (f'{self.__class__.__name__}(dim={self.dim}, '
                f'attr_name={self.attr_name!r}, seed={self.seed})')
