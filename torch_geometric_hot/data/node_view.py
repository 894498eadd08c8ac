r"""The per-batch index bundle of first-order (node) data."""
from typing import Optional, Union

import torch
from torch import Tensor

from torch_geometric_hot.ops.plan_cache import PlanCache
from torch_geometric_hot.ops.scatter import segment_counts
from torch_geometric_hot.validation import check_batch


class NodeView(PlanCache):
    r"""Graph membership of the nodes of a batch: what order-1 layers need
    (:class:`~torch_geometric_hot.data.PairView` offers the same fields),
    and the plans they derive from it
    (:class:`~torch_geometric_hot.data.PlanCache`).

    Args:
        num_nodes (int): Number of nodes.
        batch (torch.Tensor, optional): Graph of every node, :obj:`[n]`
            (default: one graph).
        num_graphs (int, optional): Number of graphs.
    """
    def __init__(self, num_nodes: int, batch: Optional[Tensor] = None,
                 num_graphs: Optional[int] = None,
                 device: Optional[torch.device] = None) -> None:
        batch, num_graphs = check_batch(batch, num_nodes, num_graphs,
                                        device=device)
        self.num_nodes = num_nodes
        self.batch = batch
        self.num_graphs = num_graphs
        self.nodes_per_graph = segment_counts(self.batch, num_graphs)

    @classmethod
    def resolve(cls, view: Union['NodeView', Tensor, None],
                x: Tensor) -> 'NodeView':
        r"""Accepts a view (:class:`NodeView` or :class:`PairView`), a
        :obj:`batch` vector or :obj:`None` (one graph) for node data
        :obj:`x`."""
        if view is None or isinstance(view, Tensor):
            return cls(x.size(0), view, device=x.device)
        if view.num_nodes != x.size(0):
            raise ValueError(f"'x' has {x.size(0)} rows but the view has "
                             f"{view.num_nodes} nodes")
        return view

    def __repr__(self) -> str:
        return (f'{self.__class__.__name__}(num_nodes={self.num_nodes}, '
                f'num_graphs={self.num_graphs})')
