r"""Transforms that attach views and node identifiers to each graph, as
``pre_transform`` or ``transform`` of a dataset."""
from torch_geometric_hot.transforms.add_second_order_view import \
    AddSecondOrderView

from torch_geometric_hot.transforms.add_hyperedge_view import \
    AddHyperedgeView

__all__ = ['AddSecondOrderView', 'AddHyperedgeView']
from torch_geometric_hot.transforms.add_laplacian_node_id import (
    AddLaplacianNodeId)
from torch_geometric_hot.transforms.add_orthogonal_node_id import (
    AddOrthogonalNodeId)
from torch_geometric_hot.transforms.add_random_node_id import (
    AddRandomNodeId)

__all__ += ['AddLaplacianNodeId', 'AddOrthogonalNodeId', 'AddRandomNodeId']
from torch_geometric_hot.transforms.add_simplex_view import AddSimplexView

__all__ += ['AddSimplexView']
