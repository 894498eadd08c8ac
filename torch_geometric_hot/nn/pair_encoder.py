from typing import Optional

import torch
from torch import Tensor

from torch_geometric_hot.validation import autocast_enabled, check_features


class PairEncoder(torch.nn.Module):
    r"""Encodes a graph's node and edge features onto its pair view: node
    features (through :obj:`node_encoder`) on the diagonal entries, edge
    features (through :obj:`edge_encoder`) on the edges, as HOT feeds
    second-order models (see :meth:`~torch_geometric_hot.data.PairView.lift`).
    With :obj:`order=1` only the node features are encoded.

    Without an encoder, the features enter as they are and must already be
    floating point of width :obj:`channels` (OGB's categorical atom and bond
    features need a :class:`~torch_geometric_hot.nn.CategoricalEncoder`).

    Args:
        channels (int): Width :math:`d` every encoded feature must have.
        node_encoder (torch.nn.Module, optional): :obj:`x` →
            :obj:`[n, d]` (default: :obj:`x` as is).
        edge_encoder (torch.nn.Module, optional): :obj:`edge_attr` →
            :obj:`[m, d]` (default: :obj:`edge_attr` as is; without
            :obj:`edge_attr` the edges enter as zeros).
        order (int, optional): 2 (pair entries) or 1 (nodes).
            (default: :obj:`2`)

    Shapes:
        - **input:** node features :math:`(n, *)`, edge features
          :math:`(m, *)` (optional), the
          :class:`~torch_geometric_hot.data.PairView` (order 2)
        - **output:** :math:`(P, d)` (order 2) or :math:`(n, d)` (order 1)
    """
    def __init__(self, channels: int,
                 node_encoder: Optional[torch.nn.Module] = None,
                 edge_encoder: Optional[torch.nn.Module] = None,
                 order: int = 2) -> None:
        super().__init__()
        if order not in (1, 2):
            raise ValueError(f"'order' must be 1 or 2, got {order}")
        self.channels = channels
        self.node_encoder, self.edge_encoder = node_encoder, edge_encoder
        self.order = order

    def reset_parameters(self) -> None:
        for module in (self.node_encoder, self.edge_encoder):
            if module is not None and hasattr(module, 'reset_parameters'):
                module.reset_parameters()

    def _encode(self, encoder: Optional[torch.nn.Module], value: Tensor,
                name: str) -> Tensor:
        if encoder is not None:
            value = encoder(value)
            origin = f"'{name}' after its encoder"
        else:
            argument = 'node_encoder' if name == 'x' else 'edge_encoder'
            origin = f"'{name}' (no {argument} given)"
            if not value.is_floating_point():
                raise ValueError(
                    f"{origin} has dtype {value.dtype}: pass floating-point "
                    f"features of width {self.channels}, or an encoder (for "
                    f"OGB's integer features, CategoricalEncoder("
                    f"get_{'atom' if name == 'x' else 'bond'}_feature_dims(),"
                    f" {self.channels}))")
        if value.dim() != 2 or value.size(1) != self.channels:
            raise ValueError(f"{origin} must have shape [*, {self.channels}]"
                             f", got {list(value.shape)}")
        check_features(value, name=name)  # NaN and infinity, by argument
        return value

    def forward(self, x: Tensor, edge_attr: Optional[Tensor] = None,
                view=None) -> Tensor:
        r"""Encodes :obj:`x` (and :obj:`edge_attr`) and, for order 2, lifts
        them onto :obj:`view`."""
        x = self._encode(self.node_encoder, x, 'x')
        if self.order == 1:
            return x
        if view is None:
            raise ValueError("'view' is required for order=2: pass the "
                             "batch's PairView (PairView.from_data(data) or "
                             "PairView.build(edge_index, num_nodes, batch))")
        if edge_attr is None:
            return view.lift(x)
        e = self._encode(self.edge_encoder, edge_attr, 'edge_attr')
        if e.dtype != x.dtype and not autocast_enabled(x.device.type):
            raise TypeError(f"'edge_attr' is {e.dtype} but 'x' is "
                            f"{x.dtype} (after their encoders): pass both "
                            f"in one dtype")
        edges = view.edge_entry.numel()
        if e.size(0) != edges:
            raise ValueError(f"'edge_attr' has {e.size(0)} rows but the "
                             f"view has {edges} edges: pass one row per "
                             f"column of 'edge_index'")
        return view.lift(x, e)

    def __repr__(self) -> str:
        return (f'{self.__class__.__name__}({self.channels}, '
                f'order={self.order})')
