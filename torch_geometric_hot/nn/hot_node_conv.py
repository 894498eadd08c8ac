import math
from typing import Optional

import torch
from torch import Tensor
from torch_geometric.typing import Adj

from torch_geometric_hot.data import (PairView, resolve_adjacency,
                                      resolve_pair_view)
from torch_geometric_hot.nn.hot_conv import HOTConv
from torch_geometric_hot.validation import (autocast_enabled, check_device,
                                            check_parameter_dtype)


class HOTNodeConv(torch.nn.Module):
    r"""A node-to-node Higher-Order Transformer layer that drops into any
    message-passing stack like
    :class:`~torch_geometric.nn.conv.TransformerConv`
    (`HOT <https://arxiv.org/abs/2110.14416>`_): it lifts node features onto
    the diagonal of the graph's pair view and edge features onto its edges,
    then applies second-order-to-first-order attention
    :math:`\mathrm{Attn}_{2 \to 1}` (:class:`HOTConv` with
    :obj:`in_order=2, out_order=1`), which reads, for every node :math:`i`,
    its own entry, its outgoing and incoming edges and the graph's global
    summaries, each class through its own attention:

    .. math::
        \mathbf{A} = \mathrm{lift}(\mathbf{x} \mathbf{W}_x,
        \mathbf{e} \mathbf{W}_e), \qquad
        \mathbf{x}'_i = \mathrm{Attn}_{2 \to 1}(\mathbf{A})_i

    The pair view is built from :obj:`edge_index` on each call (self-loops
    and duplicate edges handled as :class:`~torch_geometric_hot.data.PairView`
    documents), or reused when passed as :obj:`view` (e.g. one
    :meth:`PairView.from_data` shared by every layer of a model).

    Args:
        in_channels (int): Node feature width.
        out_channels (int): Output width.
        heads (int, optional): Attention heads. (default: :obj:`4`)
        edge_dim (int, optional): Edge feature width; :obj:`None` ignores
            edge features. (default: :obj:`None`)
        attention (str, optional): ``'kernel'`` (linear in the graph size)
            or ``'softmax'``. (default: ``'kernel'``)
        **kwargs: Further :class:`HOTConv` arguments (``kernel``,
            ``classes``, ``dropout``, ``seed``, ...).

    Shapes:
        - **input:** node features :math:`(n, F_{in})`, edge indices
          :math:`(2, m)` or sparse adjacency :math:`(n, n)`, edge features
          :math:`(m, D)` (optional), batch vector :math:`(n)` (optional)
        - **output:** node features :math:`(n, F_{out})`
    """
    def __init__(self, in_channels: int, out_channels: int, heads: int = 4,
                 edge_dim: Optional[int] = None, attention: str = 'kernel',
                 **kwargs) -> None:
        super().__init__()
        self.in_channels, self.out_channels = in_channels, out_channels
        self.edge_dim = edge_dim
        self.lin_node = torch.nn.Linear(in_channels, out_channels)
        self.lin_edge = (torch.nn.Linear(edge_dim, out_channels, bias=False)
                         if edge_dim is not None else None)
        self.conv = HOTConv(out_channels, out_channels, 2, 1, heads,
                            attention=attention, **kwargs)

    def reset_parameters(self) -> None:
        for module in (self.lin_node, self.lin_edge, self.conv):
            if module is not None:
                module.reset_parameters()

    def forward(self, x: Tensor, edge_index: Adj,
                edge_attr: Optional[Tensor] = None,
                batch: Optional[Tensor] = None, *,
                num_graphs: Optional[int] = None,
                view: Optional[PairView] = None) -> Tensor:
        r"""
        Args:
            x (torch.Tensor): Node features :obj:`[n, in_channels]`.
            edge_index (torch.Tensor or SparseTensor): Edges :obj:`[2, m]`
                (also an :class:`~torch_geometric.EdgeIndex`), or the
                transposed adjacency as a :class:`torch_sparse.SparseTensor`
                or :class:`torch.sparse.Tensor`
                (:func:`~torch_geometric_hot.data.resolve_adjacency`).
            edge_attr (torch.Tensor, optional): Edge features
                :obj:`[m, edge_dim]` (needs :obj:`edge_dim`), in the order
                of a sparse adjacency's nonzeros; default: its values.
            batch (torch.Tensor, optional): Graph of every node :obj:`[n]`.
            num_graphs (int, optional): Number of graphs.
            view (PairView, optional): The batch's pair view, reused
                instead of built.
        """
        if not x.is_floating_point() or x.dim() != 2 or \
                x.size(1) != self.in_channels:
            raise ValueError(f"'x' must be floating point of shape "
                             f"[n, {self.in_channels}], got {x.dtype} "
                             f"{list(x.shape)}")
        check_parameter_dtype(x, self.lin_node.weight.dtype)
        autocast = autocast_enabled(x.device.type)
        edge_index, edge_attr = resolve_adjacency(edge_index, edge_attr,
                                                  x.size(0))
        if edge_attr is not None:
            if self.lin_edge is None:
                raise ValueError("'edge_attr' was given but the layer was "
                                 "built without 'edge_dim'")
            width = math.prod(edge_attr.shape[1:])
            if not edge_attr.is_floating_point() or edge_attr.size(0) != \
                    edge_index.size(1) or width != self.edge_dim or \
                    edge_attr.dtype != x.dtype and not autocast:
                raise ValueError(f"'edge_attr' must be floating point of "
                                 f"dtype {x.dtype} (that of 'x') and "
                                 f"shape [{edge_index.size(1)}, "
                                 f"{self.edge_dim}], got {edge_attr.dtype} "
                                 f"{list(edge_attr.shape)}")
            check_device(edge_attr, x.device, 'edge_attr')
        view = resolve_pair_view(x, edge_index, batch, num_graphs, view)
        e = None if edge_attr is None else self.lin_edge(
            edge_attr.reshape(edge_attr.size(0), self.edge_dim))
        return self.conv(view.lift(self.lin_node(x), e), view)

    def __repr__(self) -> str:
        return (f'{self.__class__.__name__}({self.in_channels}, '
                f'{self.out_channels}, heads={self.conv.heads}, '
                f'attention={self.conv.attention!r}, '
                f'edge_dim={self.edge_dim})')
