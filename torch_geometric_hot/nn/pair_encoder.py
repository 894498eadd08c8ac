from typing import Optional

import torch
from torch import Tensor


class PairEncoder(torch.nn.Module):
    r"""Encodes a graph's node and edge features onto its pair view: node
    features (through :obj:`node_encoder`) on the diagonal entries, edge
    features (through :obj:`edge_encoder`) on the edges, as HOT feeds
    second-order models (DESIGN §3.2). With :obj:`order=1` only the node
    features are encoded.

    Args:
        node_encoder (torch.nn.Module, optional): :obj:`data.x` →
            :obj:`[n, d]` (default: :obj:`data.x` as is).
        edge_encoder (torch.nn.Module, optional): :obj:`data.edge_attr` →
            :obj:`[m, d]` (default: edges enter as zeros).
        order (int, optional): 2 (pair entries) or 1 (nodes).
            (default: :obj:`2`)

    Shapes:
        - **input:** a (batched) :class:`~torch_geometric.data.Data` and its
          :class:`~torch_geometric_hot.data.PairView`
        - **output:** :math:`(P, d)` (order 2) or :math:`(n, d)` (order 1)
    """
    def __init__(self, node_encoder: Optional[torch.nn.Module] = None,
                 edge_encoder: Optional[torch.nn.Module] = None,
                 order: int = 2) -> None:
        super().__init__()
        if order not in (1, 2):
            raise ValueError(f"'order' must be 1 or 2, got {order}")
        self.node_encoder, self.edge_encoder = node_encoder, edge_encoder
        self.order = order

    def reset_parameters(self) -> None:
        for module in (self.node_encoder, self.edge_encoder):
            if module is not None and hasattr(module, 'reset_parameters'):
                module.reset_parameters()

    def forward(self, data, view=None) -> Tensor:
        x = self.node_encoder(data.x) if self.node_encoder is not None \
            else data.x
        if self.order == 1:
            return x
        edge_attr = getattr(data, 'edge_attr', None)
        e = self.edge_encoder(edge_attr) if (
            self.edge_encoder is not None and edge_attr is not None) else None
        return view.lift(x, e)
