r"""Orthogonal-random-feature node identifiers as a PyG transform."""
from typing import Optional

from torch_geometric_hot.ops.node_identifiers import orthogonal_node_ids
from torch_geometric_hot.transforms.seeded_node_id import SeededNodeId


class AddOrthogonalNodeId(SeededNodeId):
    r"""Adds orthogonal random features (ORF) as node identifiers for
    TokenGT (`Kim et al. 2022 <https://arxiv.org/abs/2207.02505>`_, §2):
    rows of a random orthogonal :math:`n \times n` matrix (QR of a Gaussian),
    zero-padded to :obj:`dim` columns when :math:`n \le d_p` (then
    :math:`P P^\top = I`), a random subset of :obj:`dim` columns when
    :math:`n > d_p` (then :math:`P^\top P = I`), see
    :func:`~torch_geometric_hot.ops.node_identifiers.orthogonal_node_ids`.

    Used as a :obj:`transform`, every access draws fresh identifiers (the
    resampling TokenGT trains with); as a :obj:`pre_transform` they are
    fixed. :class:`~torch_geometric_hot.nn.TokenGTEncoder` can also draw
    them on the fly.

    Args:
        dim (int): Identifier dimension :math:`d_p`.
        attr_name (str): Node attribute to write, shape :obj:`[n, dim]`.
            (default: :obj:`"orf_node_id"`)
        seed (int, optional): Seed of the transform's own generator; the
            sequence of graphs it sees then gets a reproducible sequence of
            identifiers. (default: :obj:`None`, the global generator)
    """
    generate = staticmethod(orthogonal_node_ids)

    def __init__(self, dim: int, attr_name: str = 'orf_node_id',
                 seed: Optional[int] = None) -> None:
        super().__init__(dim, attr_name, seed)
