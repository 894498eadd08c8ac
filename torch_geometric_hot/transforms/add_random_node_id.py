r"""Near-orthonormal random node identifiers as a PyG transform."""
from typing import Optional

from torch_geometric_hot.ops.node_identifiers import random_node_ids
from torch_geometric_hot.transforms.seeded_node_id import SeededNodeId


class AddRandomNodeId(SeededNodeId):
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
    generate = staticmethod(random_node_ids)

    def __init__(self, dim: int, attr_name: str = 'random_node_id',
                 seed: Optional[int] = None) -> None:
        super().__init__(dim, attr_name, seed)
