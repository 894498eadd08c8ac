r"""GPS models whose global block is HOT's pair attention or TokenGT's token
attention, beside GINE message passing."""
from typing import Any, Dict, Optional

import torch
from torch import Tensor
from torch.nn import BatchNorm1d, Linear, ReLU, Sequential
from torch_geometric.nn import GINConv, GINEConv, global_mean_pool
from torch_geometric.typing import Adj

from torch_geometric_hot.data import (PairView, resolve_adjacency,
                                      resolve_pair_view)
from torch_geometric_hot.nn.hot_node_conv import HOTNodeConv
from torch_geometric_hot.nn.hybrid_gps_conv import HybridGPSConv
from torch_geometric_hot.nn.token_node_attention import TokenNodeAttention
from torch_geometric_hot.ops.node_identifiers import \
    batched_laplacian_node_ids
from torch_geometric_hot.validation import check_batch

GLOBAL_BLOCKS = ('hot', 'tokengt')
TASKS = ('graph', 'node')


class HybridGPS(torch.nn.Module):
    r"""A GPS model (`Rampášek et al. 2022
    <https://arxiv.org/abs/2205.12454>`_) that keeps message passing's
    local inductive bias and adds a global attention that reads the graph:
    optional feature encoders, :obj:`num_layers`
    :class:`~torch_geometric_hot.nn.HybridGPSConv` layers, each a
    :class:`~torch_geometric.nn.conv.GINEConv` block beside a global block,
    and a linear head on the mean of the node features (``task='graph'``)
    or on every node (``'node'``):

    .. math::
        \mathbf{x}^{(\ell)} = \mathrm{GPS}_\ell(\mathbf{x}^{(\ell-1)},
        \mathbf{A}, \mathbf{e}), \qquad
        \hat y = W \, \mathrm{mean}_v\, \mathbf{x}^{(L)}_v + b

    The global block is

    * ``'hot'``: :class:`~torch_geometric_hot.nn.HOTNodeConv`, HOT's
      second-to-first-order attention (`Kim et al. 2021
      <https://arxiv.org/abs/2110.14416>`_) on the graph's pair view (built
      once per batch, or passed as :obj:`view`);
    * ``'tokengt'``: :class:`~torch_geometric_hot.nn.TokenNodeAttention`,
      TokenGT's attention over node and edge tokens (`Kim et al. 2022
      <https://arxiv.org/abs/2207.02505>`_), with node identifiers passed
      as :obj:`node_id` or computed once per batch.

    On small and medium datasets this keeps what makes GINE and GPS fit
    (message passing along the bonds, batch normalisation, residuals)
    and lets the attention see the edges and their features.

    Args:
        hidden_channels (int): Width :math:`d`.
        out_channels (int): Output width.
        num_layers (int, optional): GPS layers. (default: :obj:`4`)
        global_block (str, optional): ``'hot'`` or ``'tokengt'``.
            (default: ``'hot'``)
        heads (int, optional): Attention heads. (default: :obj:`4`)
        task (str, optional): ``'graph'`` or ``'node'``.
            (default: ``'graph'``)
        in_channels (int, optional): Node feature width without a
            :obj:`node_encoder` (default: :obj:`hidden_channels`).
        node_encoder (torch.nn.Module, optional): :obj:`x` →
            :obj:`[n, d]` (e.g. OGB's categorical atom features).
        edge_encoder (torch.nn.Module, optional): :obj:`edge_attr` →
            :obj:`[m, d]`.
        edge_dim (int, optional): Raw edge feature width without an
            :obj:`edge_encoder`; with neither, the model uses no edge
            features (and :class:`~torch_geometric.nn.conv.GINConv`).
        dropout (float, optional): Dropout of the GPS layers.
            (default: :obj:`0.`)
        norm (str, optional): Normalisation of the GPS layers.
            (default: ``'batch_norm'``)
        attn_kwargs (dict, optional): Further arguments of the global
            block (``attention``, ``kernel``, ``node_id``,
            ``node_id_dim``, ...); the HOT block defaults to
            ``attention='softmax'``, the TokenGT block to Laplacian
            identifiers of width 16.
        seed (int, optional): Seed of random features and identifiers
            (each layer its own, from this one).

    Shapes:
        - **input:** node features :math:`(n, *)`, edge indices
          :math:`(2, m)` or a sparse adjacency :math:`(n, n)`, edge
          features :math:`(m, *)`, batch vector :math:`(n)`
        - **output:** :math:`(B, \text{out})` or :math:`(n, \text{out})`
    """
    def __init__(self, hidden_channels: int, out_channels: int,
                 num_layers: int = 4, global_block: str = 'hot',
                 heads: int = 4, task: str = 'graph',
                 in_channels: Optional[int] = None,
                 node_encoder: Optional[torch.nn.Module] = None,
                 edge_encoder: Optional[torch.nn.Module] = None,
                 edge_dim: Optional[int] = None, dropout: float = 0.0,
                 norm: Optional[str] = 'batch_norm',
                 attn_kwargs: Optional[Dict[str, Any]] = None,
                 seed: Optional[int] = None) -> None:
        super().__init__()
        if global_block not in GLOBAL_BLOCKS:
            raise ValueError(f"'global_block' must be one of "
                             f"{GLOBAL_BLOCKS}, got {global_block!r}")
        if task not in TASKS:
            raise ValueError(f"'task' must be one of {TASKS}, got {task!r}")
        if num_layers < 1:
            raise ValueError(f"'num_layers' must be positive, got "
                             f"{num_layers}")
        d = hidden_channels
        self.hidden_channels, self.global_block, self.task = d, \
            global_block, task
        self.node_encoder, self.edge_encoder = node_encoder, edge_encoder
        self.lin_in = None
        if node_encoder is None and in_channels not in (None, d):
            self.lin_in = Linear(in_channels, d)
        if edge_encoder is not None:
            edge_dim = d
        self.edge_dim = edge_dim
        attn_kwargs = dict(attn_kwargs or {})
        if global_block == 'hot':
            attn_kwargs.setdefault('attention', 'softmax')
        else:
            attn_kwargs.setdefault('node_id', 'laplacian')
            attn_kwargs.setdefault('node_id_dim', 16)
        self.node_id = attn_kwargs.get('node_id')
        self.node_id_dim = attn_kwargs.get('node_id_dim')
        self.layers = torch.nn.ModuleList()
        for i in range(num_layers):
            layer_seed = None if seed is None else seed + i
            if global_block == 'hot':
                attn = HOTNodeConv(d, d, heads, edge_dim=edge_dim,
                                   seed=layer_seed, **attn_kwargs)
            else:
                attn = TokenNodeAttention(d, d, heads, edge_dim=edge_dim,
                                          seed=layer_seed, **attn_kwargs)
            mlp = Sequential(Linear(d, d), BatchNorm1d(d), ReLU(),
                             Linear(d, d))
            conv = GINEConv(mlp, train_eps=True, edge_dim=(
                None if edge_dim in (None, d) else edge_dim)) \
                if edge_dim is not None else GINConv(mlp, train_eps=True)
            self.layers.append(HybridGPSConv(d, conv, attn, dropout,
                                             norm=norm))
        self.head = Linear(d, out_channels)

    def reset_parameters(self) -> None:
        r"""Resets all learnable parameters."""
        for module in (self.node_encoder, self.edge_encoder, self.lin_in,
                       *self.layers, self.head):
            if module is not None and hasattr(module, 'reset_parameters'):
                module.reset_parameters()

    def _extras(self, x: Tensor, edge_index: Tensor,
                batch: Optional[Tensor], num_graphs: Optional[int],
                view: Optional[PairView],
                node_id: Optional[Tensor]) -> Dict[str, Any]:
        r"""What every layer's global block reads, computed once."""
        if self.global_block == 'hot':
            return {'view': resolve_pair_view(x, edge_index, batch,
                                              num_graphs, view)}
        if node_id is None and self.node_id == 'laplacian':
            batch, num_graphs = check_batch(batch, x.size(0), num_graphs,
                                            device=x.device)
            node_id = batched_laplacian_node_ids(edge_index, batch,
                                                 num_graphs,
                                                 self.node_id_dim, x.dtype)
        return {'node_id': node_id}

    def forward(self, x: Tensor, edge_index: Adj,
                edge_attr: Optional[Tensor] = None,
                batch: Optional[Tensor] = None, *,
                num_graphs: Optional[int] = None,
                view: Optional[PairView] = None,
                node_id: Optional[Tensor] = None) -> Tensor:
        r"""
        Args:
            x (torch.Tensor): Node features :obj:`[n, *]`.
            edge_index (torch.Tensor or SparseTensor): Edges :obj:`[2, m]`
                (also an :class:`~torch_geometric.EdgeIndex`), or the
                transposed adjacency as a :class:`torch_sparse.SparseTensor`
                or :class:`torch.sparse.Tensor`
                (:func:`~torch_geometric_hot.data.resolve_adjacency`).
            edge_attr (torch.Tensor, optional): Edge features
                :obj:`[m, *]` (needed when the model has edge features).
            batch (torch.Tensor, optional): Graph of every node :obj:`[n]`.
            num_graphs (int, optional): Number of graphs.
            view (PairView, optional): The batch's pair view (``'hot'``;
                e.g. :meth:`PairView.from_data`), built when omitted.
            node_id (torch.Tensor, optional): Node identifiers
                :obj:`[n, node_id_dim]` (``'tokengt'``; e.g.
                :obj:`data.lap_node_id`), computed when omitted.
        """
        if not isinstance(x, Tensor):
            raise TypeError(f"'x' must be a torch.Tensor, got "
                            f"{type(x).__name__}")
        if self.edge_dim is None and edge_attr is not None:
            raise ValueError("'edge_attr' was given but the model was built "
                             "without edge features (no 'edge_dim' or "
                             "'edge_encoder')")
        edge_index, edge_attr = resolve_adjacency(edge_index, edge_attr,
                                                  x.size(0))
        if self.node_encoder is not None:
            x = self.node_encoder(x)
        elif self.lin_in is not None:
            x = self.lin_in(x)
        if self.edge_dim is None:  # a sparse adjacency's values unused
            edge_attr = None
        elif edge_attr is None:
            raise ValueError(f"'edge_attr' is needed: the model was built "
                             f"with edge features (edge_dim="
                             f"{self.edge_dim} or an edge_encoder)")
        elif self.edge_encoder is not None:
            edge_attr = self.edge_encoder(edge_attr)
        extras = self._extras(x, edge_index, batch, num_graphs, view,
                              node_id)
        for layer in self.layers:
            x = layer(x, edge_index, batch, edge_attr,
                      num_graphs=num_graphs, **extras)
        if self.task == 'node':
            return self.head(x)
        batch, num_graphs = check_batch(batch, x.size(0), num_graphs,
                                        device=x.device)
        return self.head(global_mean_pool(x, batch, num_graphs))

    def __repr__(self) -> str:
        return (f'{self.__class__.__name__}({self.hidden_channels}, '
                f'num_layers={len(self.layers)}, '
                f'global_block={self.global_block!r}, task={self.task!r}, '
                f'attn={self.layers[0].attn})')
