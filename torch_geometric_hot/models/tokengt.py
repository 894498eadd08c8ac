r"""Ready TokenGT models for graph-, node- and edge-level prediction."""
from typing import Optional

import torch
from torch import Tensor
from torch_geometric.typing import Adj

from torch_geometric_hot.data.adjacency import resolve_adjacency
from torch_geometric_hot.nn.tokengt_encoder import TokenGTEncoder
from torch_geometric_hot.ops.plan_cache import PlanCache

TASKS = ('graph', 'node', 'edge')


class TokenGT(torch.nn.Module):
    r"""Tokenized Graph Transformer
    (`Kim et al. 2022 <https://arxiv.org/abs/2207.02505>`_): optional
    feature encoders, a :class:`~torch_geometric_hot.nn.TokenGTEncoder` and
    a linear head on the :math:`[\mathrm{graph}]` token (``task='graph'``,
    regression or classification), on the node tokens (``'node'``, e.g.
    transductive node classification on one large graph: use
    ``attention='performer'``, ``node_id='laplacian'`` or ``'random'`` and
    ``seb=True`` as in TokenGT App. C.3, and ``sign_flip=False``: on one
    graph the Laplacian transform fixes each eigenvector's sign for train
    and test nodes alike, and random flips hide the positions a few-label
    classifier relies on) or on the edge tokens (``'edge'``).

    .. math::
        \hat y = W_{out}\, \mathrm{TokenGT}(X, E)_{[\mathrm{graph}] |
        v | (u,v)} + b_{out}

    Args:
        in_channels (int): Node feature width (after :obj:`node_encoder`,
            if given, it is :obj:`hidden_channels`).
        hidden_channels (int): Token width.
        out_channels (int): Output width (targets or classes).
        num_layers (int): Number of Transformer blocks.
        task (str, optional): ``'graph'``, ``'node'`` or ``'edge'``.
            (default: ``'graph'``)
        node_encoder (torch.nn.Module, optional): Maps :obj:`x` to
            :obj:`[n, hidden_channels]` (e.g. categorical atom features).
        edge_encoder (torch.nn.Module, optional): Maps :obj:`edge_attr` to
            :obj:`[m, hidden_channels]`.
        edge_dim (int, optional): Raw edge feature width when there is no
            :obj:`edge_encoder`. (default: :obj:`None`)
        **kwargs: Further :class:`TokenGTEncoder` options (:obj:`heads`,
            :obj:`node_id`, :obj:`node_id_dim`, :obj:`attention`,
            :obj:`seb`, :obj:`dropout`, ...).

    Shapes:
        - **input:** as :class:`TokenGTEncoder`
        - **output:** :math:`(B, \text{out})`, :math:`(n, \text{out})` or
          :math:`(m, \text{out})`
    """
    def __init__(self, in_channels: int, hidden_channels: int,
                 out_channels: int, num_layers: int, task: str = 'graph',
                 node_encoder: Optional[torch.nn.Module] = None,
                 edge_encoder: Optional[torch.nn.Module] = None,
                 edge_dim: Optional[int] = None, **kwargs) -> None:
        super().__init__()
        if task not in TASKS:
            raise ValueError(f"'task' must be one of {TASKS}, got {task!r}")
        if task == 'graph' and not kwargs.get('graph_token', True):
            raise ValueError("task='graph' reads the graph token: "
                             "'graph_token' must be True")
        self.task = task
        self.node_encoder = node_encoder
        self.edge_encoder = edge_encoder
        if node_encoder is not None:
            in_channels = hidden_channels
        if edge_encoder is not None:
            edge_dim = hidden_channels
        self.encoder = TokenGTEncoder(in_channels, hidden_channels,
                                      num_layers, edge_dim=edge_dim,
                                      **kwargs)
        self.head = torch.nn.Linear(hidden_channels, out_channels)

    def reset_parameters(self) -> None:
        r"""Resets all learnable parameters."""
        for module in (self.node_encoder, self.edge_encoder, self.encoder,
                       self.head):
            if module is not None and hasattr(module, 'reset_parameters'):
                module.reset_parameters()

    def forward(self, x: Tensor, edge_index: Adj,
                edge_attr: Optional[Tensor] = None,
                batch: Optional[Tensor] = None, *,
                num_graphs: Optional[int] = None,
                node_id: Optional[Tensor] = None,
                plans: Optional[PlanCache] = None) -> Tensor:
        r"""Predictions per graph, node or edge (see :obj:`task`).

        Args:
            x (torch.Tensor): Node features :obj:`[n, *]`.
            edge_index (torch.Tensor or SparseTensor): Directed edges
                :obj:`[2, m]` (also an :class:`~torch_geometric.EdgeIndex`),
                or the transposed adjacency as a
                :class:`torch_sparse.SparseTensor` or
                :class:`torch.sparse.Tensor`
                (:func:`~torch_geometric_hot.data.resolve_adjacency`; edge
                tokens, and ``task='edge'`` outputs, then follow the order
                of its nonzeros).
            edge_attr (torch.Tensor, optional): Edge features
                :obj:`[m, *]` (in the order of a sparse adjacency's
                nonzeros; default: its values).
            batch (torch.Tensor, optional): Graph of every node :obj:`[n]`.
            num_graphs (int, optional): Number of graphs.
            node_id (torch.Tensor, optional): Node identifiers
                :obj:`[n, node_id_dim]` precomputed by a transform:
                ``data.lap_node_id``
                (:class:`~torch_geometric_hot.transforms.AddLaplacianNodeId`),
                ``data.orf_node_id``
                (:class:`~torch_geometric_hot.transforms.AddOrthogonalNodeId`)
                or ``data.random_node_id``
                (:class:`~torch_geometric_hot.transforms.AddRandomNodeId`);
                computed on the fly when omitted.
            plans (PlanCache, optional): The batch's plan cache
                (:class:`~torch_geometric_hot.nn.TokenGTEncoder`).
        """
        if isinstance(x, Tensor):
            edge_index, edge_attr = resolve_adjacency(edge_index, edge_attr,
                                                      x.size(0))
        if self.node_encoder is not None:
            x = self.node_encoder(x)
        elif not x.is_floating_point():
            raise ValueError(
                f"'x' has dtype {x.dtype} and TokenGT has no node_encoder: "
                f"pass floating-point features or a node_encoder (for OGB's "
                f"integer atom features, CategoricalEncoder("
                f"get_atom_feature_dims(), hidden_channels))")
        if edge_attr is not None:
            if self.edge_encoder is not None:
                edge_attr = self.edge_encoder(edge_attr)
            elif not edge_attr.is_floating_point():
                raise ValueError(
                    f"'edge_attr' has dtype {edge_attr.dtype} and TokenGT "
                    f"has no edge_encoder: pass floating-point features or "
                    f"an edge_encoder")
        out = self.encoder(x, edge_index, edge_attr, batch, node_id,
                           num_graphs=num_graphs, plans=plans)
        return self.head(getattr(out, self.task))

    def __repr__(self) -> str:
        return (f'{self.__class__.__name__}(task={self.task!r}, '
                f'{self.encoder}, out_channels={self.head.out_features})')
