from typing import Optional

import torch
from torch import Tensor
from torch_geometric.typing import Adj

from torch_geometric_hot.data import (PairView, resolve_adjacency,
                                      resolve_pair_view)
from torch_geometric_hot.nn.equivariant_linear import EquivariantLinear
from torch_geometric_hot.nn.pair_encoder import PairEncoder
from torch_geometric_hot.validation import \
    on_checked_features


class InvariantMLP(torch.nn.Module):
    r"""The invariant MLP :math:`\mathrm{MLP}_\pi` of `Higher-Order
    Transformers <https://arxiv.org/abs/2111.00862>`_ (Table 6):
    :math:`[L_{2\to 2} - \mathrm{ReLU}]_{\times L} - L_{2\to 0} -
    \mathrm{Linear}` on the sparse pair view, for graph-level prediction.

    Node features enter on the diagonal entries and edge features on the
    off-diagonal entries (:meth:`PairView.lift`), each through its own
    encoder.

    Args:
        hidden_channels (int): Width of every layer.
        out_channels (int): Output width.
        num_layers (int, optional): Number of :math:`L_{2\to 2}` layers.
            (default: :obj:`4`)
        node_encoder (torch.nn.Module, optional): Maps :obj:`x` to
            :obj:`[n, hidden_channels]`; without it :obj:`x` must
            already be float of width :obj:`hidden_channels`.
        edge_encoder (torch.nn.Module, optional): Maps :obj:`edge_attr`
            to :obj:`[m, hidden_channels]` (default: :obj:`edge_attr` as
            is; edges enter as zeros when no :obj:`edge_attr` is passed).
        normalize (str, optional): ``'sum'`` or ``'mean'`` class
            normalisation. (default: ``'mean'``)
        dropout (float, optional): Dropout after every ReLU.
            (default: :obj:`0.0`)
    """
    def __init__(self, hidden_channels: int, out_channels: int,
                 num_layers: int = 4,
                 node_encoder: Optional[torch.nn.Module] = None,
                 edge_encoder: Optional[torch.nn.Module] = None,
                 normalize: str = 'mean', dropout: float = 0.0) -> None:
        super().__init__()
        self.hidden_channels = hidden_channels
        self.encoder = PairEncoder(hidden_channels, node_encoder, edge_encoder)
        self.dropout = torch.nn.Dropout(dropout)
        self.layers = torch.nn.ModuleList([
            EquivariantLinear(hidden_channels, hidden_channels, 2, 2,
                              normalize=normalize) for _ in range(num_layers)
        ])
        self.readout = EquivariantLinear(hidden_channels, hidden_channels, 2,
                                         0, normalize=normalize)
        self.head = torch.nn.Linear(hidden_channels, out_channels)

    def reset_parameters(self) -> None:
        for module in [self.encoder, self.head, self.readout, *self.layers]:
            module.reset_parameters()

    def forward(self, x: Tensor, edge_index: Adj,
                edge_attr: Optional[Tensor] = None,
                batch: Optional[Tensor] = None, *,
                num_graphs: Optional[int] = None,
                view: Optional[PairView] = None) -> Tensor:
        r"""Returns :obj:`[num_graphs, out_channels]`.

        Args:
            x (torch.Tensor): Node features :obj:`[n, *]`.
            edge_index (torch.Tensor or SparseTensor): Edges :obj:`[2, m]`
                (also an :class:`~torch_geometric.EdgeIndex`), or the
                transposed adjacency as a :class:`torch_sparse.SparseTensor`
                or :class:`torch.sparse.Tensor`
                (:func:`~torch_geometric_hot.data.resolve_adjacency`).
            edge_attr (torch.Tensor, optional): Edge features :obj:`[m, *]`
                (in the order of a sparse adjacency's nonzeros; default:
                its values).
            batch (torch.Tensor, optional): Graph of every node :obj:`[n]`.
            num_graphs (int, optional): Number of graphs.
            view (PairView, optional): The batch's pair view
                (:meth:`PairView.from_data`); built from :obj:`edge_index`
                when omitted.
        """
        edge_index, edge_attr = resolve_adjacency(edge_index, edge_attr,
                                                  x.size(0))
        view = resolve_pair_view(x, edge_index, batch, num_graphs, view)
        h = self.encoder(x, edge_attr, view)  # checks x and edge_attr
        h = on_checked_features(self._layers, h, view)
        return self.head(self.readout(h, view).relu())

    def _layers(self, h: Tensor, view) -> Tensor:
        for layer in self.layers:
            h = self.dropout(layer(h, view).relu())
        return h

    def __repr__(self) -> str:
        return (f'{self.__class__.__name__}({self.hidden_channels}, '
                f'num_layers={len(self.layers)})')
