r"""The TokenGT encoder: a pure Transformer on node and edge tokens."""
from typing import List, NamedTuple, Optional

import torch
from torch import Tensor
from torch.nn import LayerNorm, ModuleList
from torch_geometric.typing import Adj

from torch_geometric_hot.data.adjacency import resolve_adjacency
from torch_geometric_hot.nn.tokengt_embedding import TokenGTEmbedding
from torch_geometric_hot.nn.tokengt_layer import TokenGTLayer
from torch_geometric_hot.ops.node_identifiers import check_dim
from torch_geometric_hot.ops.scatter import scatter_sum
from torch_geometric_hot.ops.plan_cache import PlanCache, view_plan
from torch_geometric_hot.ops.attention.tokens import token_layout
from torch_geometric_hot.validation import check_features, \
    on_checked_features


class TokenGTOutput(NamedTuple):
    r"""Encoder outputs, aligned with the inputs: :obj:`graph` :obj:`[B, d]`
    (:obj:`None` without graph token), :obj:`node` :obj:`[n, d]`,
    :obj:`edge` :obj:`[m, d]` (columns of :obj:`edge_index`),
    :obj:`hyperedge` :obj:`[h, d]` (:obj:`None` without hyperedges)."""
    graph: Optional[Tensor]
    node: Tensor
    edge: Tensor
    hyperedge: Optional[Tensor]


class TokenGTEncoder(torch.nn.Module):
    r"""Tokenized Graph Transformer encoder (TokenGT,
    `Kim et al. 2022 <https://arxiv.org/abs/2207.02505>`_): every node and
    every edge (and, optionally, every order-:math:`k` hyperedge) is a
    token, augmented with node identifiers :math:`P` and type identifiers
    :math:`E` (:class:`TokenGTEmbedding`), and processed by a standard
    pre-LayerNorm Transformer (:class:`TokenGTLayer`) in which tokens attend
    within their own graph only:

    .. math::
        Z^{(0)} = [X_{[\mathrm{graph}]}; X^{in} w^{in}], \qquad
        Z^{(\ell)} = \mathrm{Block}_\ell(Z^{(\ell-1)}), \qquad
        \mathrm{out} = \mathrm{LN}(Z^{(L)})

    With :obj:`seb=True` (sparse equivariant basis, TokenGT App. C.3) every
    node token additionally receives the sum of the tokens of its outgoing
    edges after each block, :math:`z_i \leftarrow z_i + \sum_{(i,j) \in E,
    j \neq i} z_{ij}`.

    Attention is ``'softmax'`` (exact; fused per-graph blocks, memory
    linear in the tokens) or ``'performer'`` (FAVOR+, time and memory
    :math:`O(n + m)` on the flat token list).

    Args:
        in_channels (int): Node feature width (:obj:`0` for none).
        hidden_channels (int): Token width :math:`d`.
        num_layers (int): Number of Transformer blocks.
        heads (int, optional): Attention heads. (default: :obj:`1`)
        edge_dim (int, optional): Edge feature width. (default: :obj:`None`)
        node_id (str, optional): ``'orf'``, ``'laplacian'``, ``'random'`` or
            :obj:`None`. (default: ``'orf'``)
        node_id_dim (int, optional): :math:`d_p`. (default: :obj:`16`)
        type_id (bool, optional): Type identifiers. (default: :obj:`True`)
        graph_token (bool, optional): A :math:`[\mathrm{graph}]` token per
            graph. (default: :obj:`True`)
        attention (str, optional): ``'softmax'`` or ``'performer'``.
            (default: ``'softmax'``)
        num_features (int, optional): Performer random features.
        redraw_interval (int, optional): Performer redraw interval (training
            forward passes). (default: :obj:`None`)
        dropout (float, optional): Dropout on the input tokens and on every
            residual branch. (default: :obj:`0.`)
        attention_dropout (float, optional): Dropout on softmax attention
            weights. (default: :obj:`0.`)
        drop_path (float, optional): Stochastic depth per graph, rising
            linearly from 0 (first block) to this value (last block).
            (default: :obj:`0.`)
        eigvec_dropout (float, optional): Laplacian eigenvector dropout
            (training only). (default: :obj:`0.`)
        sign_flip (bool, optional): Random Laplacian sign flips (training
            only), the paper's regulariser. Off by default: the identifiers
            already have a deterministic sign (largest entry positive, see
            :class:`~torch_geometric_hot.transforms.AddLaplacianNodeId`),
            and on small molecule sets the flips keep TokenGT from fitting
            structure-dependent targets (the ablation in the documentation's
            results page). (default: :obj:`False`)
        seb (bool, optional): Sparse equivariant basis after every block.
            (default: :obj:`False`)
        ffn_channels (int, optional): Feed-forward width.
            (default: :obj:`2 * hidden_channels`)
        hyperedge_order (int, optional): Order :math:`k` of hyperedge
            tokens. (default: :obj:`None`)
        hyperedge_dim (int, optional): Hyperedge feature width.
        seed (int, optional): Seed of on-the-fly node identifiers and of
            the Performer projections. (default: :obj:`None`)
        node_id_scale (float, optional): Factor on the identifiers in the
            token projection (see :class:`TokenGTEmbedding`).
            (default: :obj:`1.`)

    Shapes:
        - **input:** node features :math:`(n, C)`, edge indices
          :math:`(2, m)`, edge features :math:`(m, C_e)`, batch vector
          :math:`(n)`, node identifiers :math:`(n, d_p)` (optional),
          hyperedge indices :math:`(k, h)` (optional)
        - **output:** :class:`TokenGTOutput` of graph :math:`(B, d)`, node
          :math:`(n, d)`, edge :math:`(m, d)` and hyperedge :math:`(h, d)`
          tokens
    """
    def __init__(self, in_channels: int, hidden_channels: int,
                 num_layers: int, heads: int = 1,
                 edge_dim: Optional[int] = None,
                 node_id: Optional[str] = 'orf', node_id_dim: int = 16,
                 type_id: bool = True, graph_token: bool = True,
                 attention: str = 'softmax',
                 num_features: Optional[int] = None,
                 redraw_interval: Optional[int] = None, dropout: float = 0.0,
                 attention_dropout: float = 0.0, drop_path: float = 0.0,
                 eigvec_dropout: float = 0.0, sign_flip: bool = False,
                 seb: bool = False, ffn_channels: Optional[int] = None,
                 hyperedge_order: Optional[int] = None,
                 hyperedge_dim: Optional[int] = None,
                 seed: Optional[int] = None,
                 node_id_scale: float = 1.0) -> None:
        super().__init__()
        check_dim(num_layers, 'num_layers')
        self.in_channels = in_channels
        self.hidden_channels = hidden_channels
        self.num_layers = num_layers
        self.dropout = dropout
        self.seb = seb
        self.attention = attention
        self.embedding = TokenGTEmbedding(
            in_channels, hidden_channels, edge_dim, node_id, node_id_dim,
            type_id, graph_token, eigvec_dropout, sign_flip, hyperedge_order,
            hyperedge_dim, seed, node_id_scale)
        self.layers = ModuleList([
            TokenGTLayer(
                hidden_channels, heads, ffn_channels, dropout,
                drop_path * i / max(num_layers - 1, 1), attention=attention,
                attention_dropout=attention_dropout,
                num_features=num_features, redraw_interval=redraw_interval,
                seed=None if seed is None else seed + i)
            for i in range(num_layers)
        ])
        self.norm = LayerNorm(hidden_channels)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        r"""Resets all learnable parameters."""
        self.embedding.reset_parameters()
        for layer in self.layers:
            layer.reset_parameters()
        self.norm.reset_parameters()

    def redraw_projection(self) -> None:
        r"""Draws new Performer random features in every layer."""
        for layer in self.layers:
            layer.attn.redraw_projection()

    def _seb(self, x: Tensor, edge_index: Tensor, start: int, n: int
             ) -> Tensor:
        src, dst = edge_index
        keep = (src != dst).nonzero().view(-1)
        edges = x[start + n:start + n + src.numel()]
        add = scatter_sum(edges[keep], src[keep], n)  # [n, d]
        return torch.cat([x[:start], x[start:start + n] + add,
                          x[start + n:]])

    def _layers(self, tokens: Tensor, token_batch: Tensor, num_graphs: int,
                layout, edge_index: Tensor, counts: List[int]) -> Tensor:
        for layer in self.layers:
            tokens = layer(tokens, token_batch, num_graphs, layout)
            if self.seb:
                tokens = self._seb(tokens, edge_index, counts[0], counts[1])
        return tokens

    def forward(self, x: Tensor, edge_index: Adj,
                edge_attr: Optional[Tensor] = None,
                batch: Optional[Tensor] = None,
                node_id: Optional[Tensor] = None,
                hyperedge_index: Optional[Tensor] = None,
                hyperedge_attr: Optional[Tensor] = None,
                num_graphs: Optional[int] = None,
                plans: Optional[PlanCache] = None) -> TokenGTOutput:
        r"""
        Args:
            x (torch.Tensor): Node features :obj:`[n, in_channels]`.
            edge_index (torch.Tensor or SparseTensor): Directed edges
                :obj:`[2, m]` (an undirected edge gives two tokens, as in
                the paper), an :class:`~torch_geometric.EdgeIndex`, or the
                transposed adjacency as a
                :class:`torch_sparse.SparseTensor` or
                :class:`torch.sparse.Tensor` (edge tokens then in the
                order of its nonzeros; see
                :func:`~torch_geometric_hot.data.resolve_adjacency`).
            edge_attr (torch.Tensor, optional): Edge features (default for
                a sparse adjacency: its values).
            batch (torch.Tensor, optional): Graph of every node.
            node_id (torch.Tensor, optional): Node identifiers
                :obj:`[n, node_id_dim]`, e.g. :obj:`data.lap_node_id`;
                drawn on the fly when omitted.
            hyperedge_index (torch.Tensor, optional): Order-:math:`k`
                tuples :obj:`[k, h]` (repeated nodes allowed).
            hyperedge_attr (torch.Tensor, optional): Their features.
            num_graphs (int, optional): Number of graphs (default: from
                :obj:`batch`).
            plans (PlanCache, optional): The batch's plan cache (e.g.
                :obj:`batch.plans` from
                :class:`~torch_geometric_hot.data.PlannedLoader`): softmax
                attention's token layout is taken from it, or made there
                once for every later pass on the batch.
        """
        if isinstance(x, Tensor):
            edge_index, edge_attr = resolve_adjacency(edge_index, edge_attr,
                                                      x.size(0))
        tokens, token_batch, num_graphs, counts = self.embedding(
            x, edge_index, edge_attr, batch, node_id, hyperedge_index,
            hyperedge_attr, num_graphs)
        tokens = torch.nn.functional.dropout(tokens, self.dropout,
                                             self.training)
        layout = None
        if self.attention == 'softmax':
            layout = view_plan(plans, ('token_layout', num_graphs,
                                       token_batch.numel()),
                               lambda: token_layout(token_batch, num_graphs))
        check_features(tokens)  # once: the layers get tokens computed from it
        tokens = on_checked_features(self._layers, tokens, token_batch,
                                     num_graphs, layout, edge_index, counts)
        graph, node, edge, hyper = self.norm(tokens).split(list(counts))
        return TokenGTOutput(graph if counts[0] else None, node, edge,
                             hyper if hyperedge_index is not None else None)

    def __repr__(self) -> str:
        return (f'{self.__class__.__name__}({self.in_channels}, '
                f'{self.hidden_channels}, num_layers={self.num_layers}, '
                f'heads={self.layers[0].attn.heads}, '
                f'attention={self.attention!r}, '
                f'node_id={self.embedding.node_id!r}, '
                f'node_id_dim={self.embedding.node_id_dim}, '
                f'seb={self.seb})')
