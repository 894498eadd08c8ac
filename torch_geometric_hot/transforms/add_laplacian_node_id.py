r"""Laplacian-eigenvector node identifiers as a PyG transform."""
from torch_geometric.data import Data
from torch_geometric.transforms import BaseTransform

from torch_geometric_hot.ops.node_identifiers import (check_dim,
                                                      laplacian_node_ids)
from torch_geometric_hot.transforms.data_device import edge_index_or_empty


class AddLaplacianNodeId(BaseTransform):
    r"""Adds the :obj:`k` eigenvectors of the symmetric normalised Laplacian
    with the smallest eigenvalues as node identifiers for TokenGT
    (`Kim et al. 2022 <https://arxiv.org/abs/2207.02505>`_, App. A.3):

    .. math::
        \Delta = I - D^{-1/2} A D^{-1/2} = U \Lambda U^\top, \qquad
        P = U_{:, 1:k}

    The graph is treated as undirected and simple; isolated nodes have a
    zero row in :math:`D^{-1/2} A D^{-1/2}`. The trivial eigenvector is
    kept; columns are zero-padded when :math:`n < k` (1-, 2- and 3-node
    graphs are fine). The result is deterministic: dense ``eigh`` for
    graphs with at most :obj:`dense_threshold` nodes, ARPACK with a fixed
    start vector above, and every column's sign fixed so that its entry of
    largest magnitude is positive. Random sign flips (a training-time
    augmentation) belong in the model, see
    :class:`~torch_geometric_hot.nn.TokenGTEncoder`.

    Args:
        k (int): Number of eigenvectors :math:`d_p`.
        attr_name (str): Node attribute to write, shape :obj:`[n, k]`.
            (default: :obj:`"lap_node_id"`)
        dense_threshold (int): Largest graph solved densely.
            (default: :obj:`1000`)
    """
    def __init__(self, k: int, attr_name: str = 'lap_node_id',
                 dense_threshold: int = 1000) -> None:
        check_dim(k, 'k')
        if not isinstance(dense_threshold, int) or dense_threshold < 0:
            raise ValueError(f"'dense_threshold' must be a non-negative "
                             f"integer, got {dense_threshold!r}")
        self.k = k
        self.attr_name = attr_name
        self.dense_threshold = dense_threshold

    def forward(self, data: Data) -> Data:
        ids = laplacian_node_ids(edge_index_or_empty(data), data.num_nodes,
                                 self.k, self.dense_threshold)
        data[self.attr_name] = ids
        return data

    def __repr__(self) -> str:
        return (f'{self.__class__.__name__}(k={self.k}, '
                f'attr_name={self.attr_name!r}, '
                f'dense_threshold={self.dense_threshold})')
