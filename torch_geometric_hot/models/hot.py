r"""Ready Higher-Order Transformer models (HOT App. A.2, Table 6): a stack
of :class:`~torch_geometric_hot.nn.HOTLayer` blocks of one order, a final
block that changes the order, layer norm and a head."""
from typing import Optional


import torch
from torch import Tensor
from torch.utils.checkpoint import checkpoint
from torch_geometric.typing import Adj

from torch_geometric_hot.data import (PairView, resolve_adjacency,
                                      resolve_node_view, resolve_pair_view)
from torch_geometric_hot.nn.hot_layer import HOTLayer, norm_layer
from torch_geometric_hot.nn.pair_encoder import PairEncoder
from torch_geometric_hot.validation import \
    on_checked_features


class HOTModel(torch.nn.Module):
    r"""Base of the HOT models: :math:`[\mathrm{Enc}_{k \to k}]_{\times L} -
    \mathrm{Enc}_{k \to l} - \mathrm{LN} - \text{head}`.

    Models take PyG's tensors, like PyG's own models:
    ``model(x, edge_index, edge_attr, batch)``. Order-2 models read the
    pair view of the batch: pass ``view=PairView.from_data(batch)`` to reuse
    the one :class:`~torch_geometric_hot.transforms.AddSecondOrderView`
    attached to the dataset, or leave it out to build it from
    :obj:`edge_index` on the fly. Node features enter on the diagonal, edge
    features on the edges. The graph may be any adjacency PyG's
    convolutions take: an :obj:`edge_index` tensor or
    :class:`~torch_geometric.EdgeIndex`, or the transposed adjacency as a
    :class:`torch_sparse.SparseTensor` or :class:`torch.sparse.Tensor`
    (edge features then in the order of its nonzeros, by default its
    values; see :func:`~torch_geometric_hot.data.resolve_adjacency`).

    Args:
        hidden_channels (int): Width :math:`d`.
        out_channels (int): Output width.
        in_order (int): Order of the stack (1 or 2).
        out_order (int): Order of the output.
        num_layers (int, optional): Blocks :math:`L` before the last one.
            (default: :obj:`4`)
        heads (int, optional): Attention heads. (default: :obj:`4`)
        node_encoder (torch.nn.Module, optional): :obj:`x` →
            :obj:`[n, d]` (default: :obj:`x` is used as is and must be
            float of width :math:`d`).
        edge_encoder (torch.nn.Module, optional): :obj:`edge_attr` →
            :obj:`[m, d]` (order 2; default: :obj:`edge_attr` as is; edges
            enter as zeros when no :obj:`edge_attr` is passed).
        head_layers (int, optional): Hidden layers of the output MLP
            (0: one linear layer). (default: :obj:`0`)
        checkpoint (bool, optional): Recompute each block in the backward
            pass (activation checkpointing) to save memory.
            (default: :obj:`False`)
        readout_norm (str, optional): The normalisation before the head:
            ``'layer'`` (layer norm of every output row, as in HOT) or
            ``'batch'`` (batch norm of every channel over the rows of the
            batch, :class:`~torch_geometric_hot.nn.RowBatchNorm`;
            running statistics in evaluation). A graph model's last block
            outputs averages over whole graphs, which share a large
            component across graphs; layer norm keeps it, batch norm takes
            it out and scales the differences between graphs to unit
            variance for the head. (default: :obj:`'layer'`)
        **kwargs: :class:`HOTLayer` / :class:`HOTConv` arguments
            (``attention``, ``kernel``, ``classes``, ``dropout``, ``norm``,
            ``size_scaler``, ...).
    """
    def __init__(self, hidden_channels: int, out_channels: int,
                 in_order: int, out_order: int, num_layers: int = 4,
                 heads: int = 4,
                 node_encoder: Optional[torch.nn.Module] = None,
                 edge_encoder: Optional[torch.nn.Module] = None,
                 head_layers: int = 0, checkpoint: bool = False,
                 readout_norm: str = 'layer', **kwargs) -> None:
        super().__init__()
        if readout_norm not in ('layer', 'batch'):
            raise ValueError(f"'readout_norm' must be 'layer' or 'batch', "
                             f"got {readout_norm!r}")
        self.readout_norm = readout_norm
        self.in_order, self.out_order = in_order, out_order
        self.hidden_channels = hidden_channels
        self.encoder = PairEncoder(hidden_channels, node_encoder,
                                   edge_encoder,
                                   order=2 if in_order == 2 else 1)
        self.checkpoint = checkpoint
        self.layers = torch.nn.ModuleList([
            HOTLayer(hidden_channels, in_order, in_order, heads, **kwargs)
            for _ in range(num_layers)
        ])
        self.layers.append(
            HOTLayer(hidden_channels, in_order, out_order, heads, **kwargs))
        self.norm = norm_layer(readout_norm, hidden_channels)
        mlp = []
        for _ in range(head_layers):
            mlp += [torch.nn.Linear(hidden_channels, hidden_channels),
                    torch.nn.ReLU()]
        self.head = torch.nn.Sequential(
            *mlp, torch.nn.Linear(hidden_channels, out_channels))

    def reset_parameters(self) -> None:
        for module in self.modules():
            if module is not self and hasattr(module, 'reset_parameters'):
                module.reset_parameters()

    def redraw_projection(self) -> None:
        r"""Redraws the random features of every kernel-attention block."""
        for layer in self.layers:
            layer.redraw_projection()

    def _run(self, x: Tensor, edge_index: Tensor,
             edge_attr: Optional[Tensor], batch: Optional[Tensor],
             num_graphs: Optional[int], view,
             hyperedge_index: Optional[Tensor]) -> Tensor:
        if self.in_order == 2 or self.out_order == 2:
            view = resolve_pair_view(x, edge_index, batch, num_graphs, view)
        else:
            view = resolve_node_view(x, batch, num_graphs, view)
        h = self.encoder(x, edge_attr, view)  # checks x and edge_attr
        h = on_checked_features(self._layers, h, view, hyperedge_index)
        return self.head(self.norm(h))

    def _layers(self, h: Tensor, view,
                hyperedge_index: Optional[Tensor]) -> Tensor:
        for layer in self.layers:
            if self.checkpoint and torch.is_grad_enabled():
                h = checkpoint(layer, h, view, hyperedge_index,
                               use_reentrant=False)
            else:
                h = layer(h, view, hyperedge_index)
        return h

    def forward(self, x: Tensor, edge_index: Adj,
                edge_attr: Optional[Tensor] = None,
                batch: Optional[Tensor] = None, *,
                num_graphs: Optional[int] = None,
                view: Optional[PairView] = None) -> Tensor:
        r"""
        Args:
            x (torch.Tensor): Node features :obj:`[n, *]`.
            edge_index (torch.Tensor or SparseTensor): Edges :obj:`[2, m]`
                or a sparse adjacency (see above).
            edge_attr (torch.Tensor, optional): Edge features
                :obj:`[m, *]`.
            batch (torch.Tensor, optional): Graph of every node :obj:`[n]`.
            num_graphs (int, optional): Number of graphs (saves a
                synchronisation on GPU).
            view (PairView, optional): The batch's pair view (see above).
        """
        edge_index, edge_attr = resolve_adjacency(edge_index, edge_attr,
                                                  x.size(0))
        return self._run(x, edge_index, edge_attr, batch, num_graphs, view,
                         None)

    def __repr__(self) -> str:
        return (f'{self.__class__.__name__}({self.hidden_channels}, '
                f'num_layers={len(self.layers)}, order={self.in_order}->'
                f'{self.out_order}, '
                f'attention={self.layers[0].attn.attention!r})')


class HOTGraphModel(HOTModel):
    r"""Graph-level prediction: :math:`[\mathrm{Enc}_{2\to 2}]_{\times L} -
    \mathrm{Enc}_{2\to 0} - \mathrm{Norm} - \mathrm{Linear}` (HOT Table
    6a/c). Returns :obj:`[num_graphs, out_channels]`.

    Unlike HOT, which normalises by layer norm, the blocks normalise by
    batch norm by default (:obj:`norm='batch'`): with layer norm in the
    blocks the model barely fits targets that depend on which
    substructures a molecule has on sets of a thousand molecules (its graph
    vectors share most of their value across molecules). Before the head it
    normalises by layer norm (:obj:`readout_norm='layer'`): batch norm
    there normalises each batch's few graph vectors by their own
    statistics in training, and that noise dominates the training loss on
    targets that need precise graph vectors (``docs/results.md``). Every
    class's attention output is scaled by :math:`\log(1 + c)`, :math:`c`
    the size of the key group it averages over (:obj:`size_scaler='log'`,
    PNA's amplification): attention and readout average, so without it
    the model sees fractions, not counts, and its error on targets that
    add up over atoms (TPSA, logP, complexity, ring counts) is up to three
    times higher; on averages over atoms and on targets set by which
    substructures are present the scaling costs about 5 %
    (``size_scaler='none'`` there). Pass
    :obj:`norm='layer'` and :obj:`size_scaler='none'` for HOT's
    architecture (the paper presets do).

    Args:
        hidden_channels (int): Width :math:`d`.
        out_channels (int): Output width.
        norm (str, optional): The blocks' normalisation (see
            :class:`~torch_geometric_hot.nn.HOTLayer`).
            (default: ``'batch'``)
        readout_norm (str, optional): The normalisation before the head
            (see :class:`HOTModel`). (default: ``'layer'``)
        size_scaler (str, optional): The blocks' scaling of every class's
            output by its key group's size (see
            :class:`~torch_geometric_hot.nn.HOTConv`).
            (default: ``'log'``)
        **kwargs: Further :class:`HOTModel` arguments.
    """
    def __init__(self, hidden_channels: int, out_channels: int,
                 norm: str = 'batch', readout_norm: str = 'layer',
                 size_scaler: str = 'log', **kwargs):
        super().__init__(hidden_channels, out_channels, 2, 0, norm=norm,
                         readout_norm=readout_norm, size_scaler=size_scaler,
                         **kwargs)


class HOTNodeModel(HOTModel):
    r"""Node-level prediction: :math:`[\mathrm{Enc}_{2\to 2}]_{\times L} -
    \mathrm{Enc}_{2\to 1} - \mathrm{LN} - \mathrm{Linear}` (HOT Table 6b).
    Returns :obj:`[num_nodes, out_channels]`."""
    def __init__(self, hidden_channels: int, out_channels: int, **kwargs):
        super().__init__(hidden_channels, out_channels, 2, 1, **kwargs)


class HOTSetToGraph(HOTModel):
    r"""Set-to-graph prediction: :math:`[\mathrm{Enc}_{1\to 1}]_{\times L}
    - \mathrm{Enc}_{1\to 2} - \mathrm{MLP}` (HOT Table 6d). Scores every
    entry of the pair view :obj:`[P, out_channels]` (use
    :obj:`PairView.off_pos` for the edges)."""
    def __init__(self, hidden_channels: int, out_channels: int, **kwargs):
        kwargs.setdefault('head_layers', 1)
        super().__init__(hidden_channels, out_channels, 1, 2, **kwargs)

    def forward(self, x: Tensor, edge_index: Adj,
                batch: Optional[Tensor] = None, *,
                num_graphs: Optional[int] = None,
                view: Optional[PairView] = None) -> Tensor:
        r"""
        Args:
            x (torch.Tensor): Element features :obj:`[n, *]`.
            edge_index (torch.Tensor or SparseTensor): The pairs to score
                :obj:`[2, m]` (all pairs of a set, or a candidate subset),
                or their transposed sparse adjacency (its values unused).
            batch (torch.Tensor, optional): Set of every element :obj:`[n]`.
            num_graphs (int, optional): Number of sets.
            view (PairView, optional): The pair view of :obj:`edge_index`.
        """
        edge_index, _ = resolve_adjacency(edge_index, None, x.size(0))
        return self._run(x, edge_index, None, batch, num_graphs, view, None)


class HOTHyperedgeModel(HOTModel):
    r"""k-uniform hyperedge scoring: :math:`[\mathrm{Enc}_{1\to 1}]_{\times
    L} - \mathrm{Enc}_{1\to k} - \mathrm{MLP}` (HOT Table 6e). Scores the
    columns of :obj:`data.hyperedge_index` :obj:`[h, out_channels]` (see
    :class:`~torch_geometric_hot.transforms.AddHyperedgeView`)."""
    def __init__(self, hidden_channels: int, out_channels: int, k: int = 3,
                 **kwargs):
        kwargs.setdefault('head_layers', 1)
        super().__init__(hidden_channels, out_channels, 1, k, **kwargs)

    def forward(self, x: Tensor, hyperedge_index: Tensor,
                batch: Optional[Tensor] = None, *,
                num_graphs: Optional[int] = None) -> Tensor:
        r"""
        Args:
            x (torch.Tensor): Node features :obj:`[n, *]`.
            hyperedge_index (torch.Tensor): The :math:`k`-tuples to score,
                :obj:`[k, h]`.
            batch (torch.Tensor, optional): Graph of every node :obj:`[n]`.
            num_graphs (int, optional): Number of graphs.
        """
        return self._run(x, None, None, batch, num_graphs, None,
                         hyperedge_index)
