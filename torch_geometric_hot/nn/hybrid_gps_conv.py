r"""A GPS layer whose global block is a graph-aware attention layer."""
import inspect
from typing import Any, Dict, Optional

import torch
import torch.nn.functional as F
from torch import Tensor
from torch.nn import Dropout, Linear, Sequential
from torch_geometric.nn.inits import reset
from torch_geometric.nn.resolver import (activation_resolver,
                                         normalization_resolver)
from torch_geometric.typing import Adj

from torch_geometric_hot.data.adjacency import resolve_adjacency
from torch_geometric_hot.validation import (autocast_enabled,
                                            check_parameter_dtype)


class HybridGPSConv(torch.nn.Module):
    r"""The GPS layer of `"Recipe for a General, Powerful, Scalable Graph
    Transformer" <https://arxiv.org/abs/2205.12454>`_ (Rampášek et al.
    2022) with any global block that reads the graph: a local
    message-passing layer (e.g. :class:`~torch_geometric.nn.conv.GINEConv`)
    and the global block run side by side, each with dropout, a residual
    and a normalisation, their sum then goes through a two-layer MLP with a
    residual and a normalisation:

    .. math::
        \mathbf{h}_L &= \mathrm{Norm}_1(\mathbf{x} + \mathrm{Dropout}(
        \mathrm{MPNN}(\mathbf{x}, \mathbf{A}, \mathbf{e}))) \\
        \mathbf{h}_G &= \mathrm{Norm}_2(\mathbf{x} + \mathrm{Dropout}(
        \mathrm{GlobalAttn}(\mathbf{x}, \mathbf{A}, \mathbf{e}))) \\
        \mathbf{x}' &= \mathrm{Norm}_3(\mathbf{h} + \mathrm{MLP}(\mathbf{h})),
        \qquad \mathbf{h} = \mathbf{h}_L + \mathbf{h}_G

    as :class:`~torch_geometric.nn.conv.GPSConv` computes it, whose global
    block is plain multi-head attention over the nodes. Here the global
    block sees the edges and their features too:
    :class:`~torch_geometric_hot.nn.HOTNodeConv` (HOT's pair attention
    :math:`\mathrm{Attn}_{2 \to 1}` on the graph's pair view) or
    :class:`~torch_geometric_hot.nn.TokenNodeAttention` (TokenGT's attention
    over node and edge tokens), or any module called as
    ``attn(x, edge_index, edge_attr, batch, num_graphs=..., **attn_kwargs)``
    that returns :obj:`[n, channels]`.

    Args:
        channels (int): Width of the input and output node features.
        conv (torch.nn.Module, optional): The local message-passing layer,
            called as ``conv(x, edge_index)`` or, when edge features are
            given, ``conv(x, edge_index, edge_attr=edge_attr)``;
            :obj:`None` for a global block only.
        attn (torch.nn.Module): The global block (see above).
        dropout (float, optional): Dropout of both blocks' outputs and in
            the MLP. (default: :obj:`0.`)
        act (str or Callable, optional): The MLP's activation.
            (default: ``'relu'``)
        act_kwargs (dict, optional): Its arguments.
        norm (str or Callable, optional): The normalisation, as PyG's
            resolver names it, or :obj:`None`.
            (default: ``'batch_norm'``)
        norm_kwargs (dict, optional): Its arguments.

    Shapes:
        - **input:** node features :math:`(n, C)`, edge indices
          :math:`(2, m)` or a sparse adjacency :math:`(n, n)`
          (:func:`~torch_geometric_hot.data.resolve_adjacency`, read once
          for both blocks), batch vector :math:`(n)` (optional), edge
          features :math:`(m, D)` (optional)
        - **output:** node features :math:`(n, C)`
    """
    def __init__(self, channels: int, conv: Optional[torch.nn.Module],
                 attn: torch.nn.Module, dropout: float = 0.0,
                 act: str = 'relu',
                 act_kwargs: Optional[Dict[str, Any]] = None,
                 norm: Optional[str] = 'batch_norm',
                 norm_kwargs: Optional[Dict[str, Any]] = None) -> None:
        super().__init__()
        if not isinstance(attn, torch.nn.Module):
            raise TypeError(f"'attn' must be a torch.nn.Module (the global "
                            f"block), got {type(attn).__name__}")
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"'dropout' must be in [0, 1), got {dropout}")
        self.channels = channels
        self.conv = conv
        self.attn = attn
        self.dropout = dropout
        self.mlp = Sequential(
            Linear(channels, 2 * channels),
            activation_resolver(act, **(act_kwargs or {})),
            Dropout(dropout),
            Linear(2 * channels, channels),
            Dropout(dropout),
        )
        norm_kwargs = norm_kwargs or {}
        self.norm1 = normalization_resolver(norm, channels, **norm_kwargs)
        self.norm2 = normalization_resolver(norm, channels, **norm_kwargs)
        self.norm3 = normalization_resolver(norm, channels, **norm_kwargs)
        self.norm_with_batch = self.norm1 is not None and 'batch' in \
            inspect.signature(self.norm1.forward).parameters

    def reset_parameters(self) -> None:
        r"""Resets all learnable parameters."""
        for module in (self.conv, self.attn, self.mlp, self.norm1,
                       self.norm2, self.norm3):
            if module is not None:
                reset(module)

    def _norm(self, norm, h: Tensor, batch: Optional[Tensor]) -> Tensor:
        if norm is None:
            return h
        return norm(h, batch=batch) if self.norm_with_batch else norm(h)

    def _check(self, name: str, out: Tensor, x: Tensor) -> Tensor:
        if not isinstance(out, Tensor) or out.shape != x.shape:
            raise ValueError(f"'{name}' must map node features "
                             f"{list(x.shape)} to the same shape, got "
                             f"{list(getattr(out, 'shape', []))}")
        return out

    def forward(self, x: Tensor, edge_index: Adj,
                batch: Optional[Tensor] = None,
                edge_attr: Optional[Tensor] = None, *,
                num_graphs: Optional[int] = None, **attn_kwargs) -> Tensor:
        r"""
        Args:
            x (torch.Tensor): Node features :obj:`[n, channels]`.
            edge_index (torch.Tensor or SparseTensor): Edges :obj:`[2, m]`
                (also an :class:`~torch_geometric.EdgeIndex`), or the
                transposed adjacency as a :class:`torch_sparse.SparseTensor`
                or :class:`torch.sparse.Tensor`.
            batch (torch.Tensor, optional): Graph of every node :obj:`[n]`.
            edge_attr (torch.Tensor, optional): Edge features :obj:`[m, *]`
                (in the order of a sparse adjacency's nonzeros; default:
                its values).
            num_graphs (int, optional): Number of graphs.
            **attn_kwargs: Further arguments of the global block (a
                :class:`~torch_geometric_hot.data.PairView` :obj:`view`,
                node identifiers :obj:`node_id`).
        """
        if not isinstance(x, Tensor) or not x.is_floating_point() or \
                x.dim() != 2 or x.size(1) != self.channels:
            raise ValueError(f"'x' must be floating point of shape "
                             f"[n, {self.channels}], got "
                             f"{getattr(x, 'dtype', type(x).__name__)} "
                             f"{list(getattr(x, 'shape', []))}")
        # before the local block, which would fail deep inside torch
        check_parameter_dtype(x, next(self.mlp.parameters()).dtype)
        autocast = autocast_enabled(x.device.type)
        edge_index, edge_attr = resolve_adjacency(edge_index, edge_attr,
                                                  x.size(0))
        if edge_attr is not None and (
                not edge_attr.is_floating_point() or edge_attr.dim() == 0
                or edge_attr.size(0) != edge_index.size(1)
                or edge_attr.dtype != x.dtype and not autocast):
            raise ValueError(f"'edge_attr' must be floating point of dtype "
                             f"{x.dtype} (that of 'x') with one row per "
                             f"edge ({edge_index.size(1)}), got "
                             f"{edge_attr.dtype} {list(edge_attr.shape)}")
        hs = []
        if self.conv is not None:
            kwargs = {} if edge_attr is None else {'edge_attr': edge_attr}
            h = self._check('conv', self.conv(x, edge_index, **kwargs), x)
            h = F.dropout(h, self.dropout, self.training)
            hs.append(self._norm(self.norm1, x + h, batch))
        h = self._check('attn', self.attn(x, edge_index, edge_attr, batch,
                                          num_graphs=num_graphs,
                                          **attn_kwargs), x)
        h = F.dropout(h, self.dropout, self.training)
        hs.append(self._norm(self.norm2, x + h, batch))
        out = sum(hs)
        return self._norm(self.norm3, out + self.mlp(out), batch)

    def __repr__(self) -> str:
        return (f'{self.__class__.__name__}({self.channels}, '
                f'conv={self.conv}, attn={self.attn})')
