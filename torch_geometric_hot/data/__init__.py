r"""Views of a batch that the layers share: the pair view, the node view,
simplex candidate tuples and the plans cached with them."""
from torch_geometric_hot.data.pair_view import (PairView, build_pair_index,
                                                check_edge_index)
from torch_geometric_hot.data.node_view import NodeView
from torch_geometric_hot.ops.plan_cache import PlanCache
from torch_geometric_hot.data.resolve_view import (resolve_node_view,
                                                   resolve_pair_view)

__all__ = ['PairView', 'NodeView', 'PlanCache', 'build_pair_index',
           'check_edge_index', 'resolve_pair_view', 'resolve_node_view']
from torch_geometric_hot.data.simplex_candidates import (
    dense_simplices, neighbour_simplices, walk_simplices)

__all__ += ['dense_simplices', 'neighbour_simplices', 'walk_simplices']
from torch_geometric_hot.data.planned_loader import (ModelPlanner,
                                                     PlannedCollate,
                                                     PlannedLoader)

__all__ += ['ModelPlanner', 'PlannedCollate', 'PlannedLoader']

from torch_geometric_hot.data.adjacency import resolve_adjacency

__all__ += ['resolve_adjacency']
from torch_geometric_hot.data.padding import (PadToBuckets, bucket,
                                              real_graphs)

__all__ += ['PadToBuckets', 'bucket', 'real_graphs']
from torch_geometric_hot.data.collate import collate_graphs

__all__ += ['collate_graphs']
