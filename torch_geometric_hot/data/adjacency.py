r"""PyG's adjacency types as the edge list the layers compute on.

PyG's convolutions take the graph as an :obj:`edge_index` tensor (a plain
:obj:`[2, m]` tensor or a :class:`torch_geometric.EdgeIndex`), a
:class:`torch_sparse.SparseTensor` or a :class:`torch.sparse.Tensor`
(COO, CSR or CSC). A sparse adjacency is the *transposed* one,
:obj:`adj_t[i, j] != 0` for an edge :math:`j \to i`, as
:class:`~torch_geometric.transforms.ToSparseTensor` writes it. Its edge
features are, as in :class:`~torch_geometric.nn.conv.MessagePassing`, the
:obj:`edge_attr` passed with it, ordered like the adjacency's nonzeros
(:func:`torch_geometric.utils.to_edge_index`), or else its values: always
for a :class:`SparseTensor`, and for a :class:`torch.sparse.Tensor` only
feature rows (values of shape :obj:`[nnz, D]`; one value per edge is an
edge weight, which the attention layers do not use)."""
from typing import Any, Optional, Tuple

import torch
from torch import Tensor
from torch_geometric import EdgeIndex
from torch_geometric.utils import is_sparse, is_torch_sparse_tensor, \
    to_edge_index

TORCH_SPARSE_LAYOUTS = (torch.sparse_coo, torch.sparse_csr, torch.sparse_csc)


def _check_square(size: Tuple[int, int], num_nodes: int, name: str) -> None:
    if tuple(size) != (num_nodes, num_nodes):
        raise ValueError(f"'{name}' must be a square adjacency of the "
                         f"{num_nodes} nodes, [{num_nodes}, {num_nodes}], "
                         f"got {list(size)}")


def resolve_adjacency(edge_index: Any, edge_attr: Optional[Tensor],
                      num_nodes: int, name: str = 'edge_index'
                      ) -> Tuple[Tensor, Optional[Tensor]]:
    r"""The edge list :obj:`[2, m]` (sources, targets) and the edge
    features :obj:`[m, *]` in its column order, from any adjacency PyG's
    convolutions accept (see the module's description).

    Args:
        edge_index (torch.Tensor, EdgeIndex, SparseTensor or
            torch.sparse.Tensor): The graph.
        edge_attr (torch.Tensor, optional): Edge features, in the column
            order of :obj:`edge_index`, or in the order of a sparse
            adjacency's nonzeros.
        num_nodes (int): Number of nodes :math:`n`; a sparse adjacency or
            an :class:`EdgeIndex` with sizes must be :math:`n \times n`.
        name (str, optional): The argument's name in error messages.
            (default: ``'edge_index'``)
    """
    if isinstance(edge_index, EdgeIndex):
        rows, cols = edge_index.sparse_size()
        for size in (rows, cols):
            if size is not None and size != num_nodes:
                raise ValueError(
                    f"'{name}' is an EdgeIndex of sparse size "
                    f"{list(edge_index.sparse_size())} but the graph has "
                    f"{num_nodes} nodes")
        return edge_index.as_tensor(), edge_attr
    if not is_sparse(edge_index):
        return edge_index, edge_attr  # a tensor, checked by the caller
    if is_torch_sparse_tensor(edge_index):
        if edge_index.layout not in TORCH_SPARSE_LAYOUTS:
            raise ValueError(f"'{name}' must be a sparse COO, CSR or CSC "
                             f"tensor, got layout {edge_index.layout}")
        if edge_index.sparse_dim() != 2:
            raise ValueError(f"'{name}' must have 2 sparse dimensions "
                             f"(rows, columns), got "
                             f"{edge_index.sparse_dim()}")
        _check_square(edge_index.shape[:2], num_nodes, name)
        indices, values = to_edge_index(edge_index)
        if edge_attr is None and values.dim() > 1:
            edge_attr = values
    else:  # torch_sparse.SparseTensor
        _check_square(edge_index.sparse_sizes(), num_nodes, name)
        indices, _ = to_edge_index(edge_index)
        if edge_attr is None:
            edge_attr = edge_index.storage.value()
    if edge_attr is not None and (not isinstance(edge_attr, Tensor) or
                                  edge_attr.size(0) != indices.size(1)):
        raise ValueError(
            f"'edge_attr' must have one row per nonzero of the sparse "
            f"'{name}' ({indices.size(1)}), in the order of its nonzeros, "
            f"got {list(getattr(edge_attr, 'shape', []))}")
    # adj_t[i, j] holds the edge j -> i: sources are the columns
    return indices.flip(0), edge_attr


__all__ = ['resolve_adjacency']
