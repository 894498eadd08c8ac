r"""TokenGT's token attention as a node-to-node layer."""
from typing import Optional

import torch
from torch import Tensor
from torch.nn import Linear
from torch_geometric.typing import Adj

from torch_geometric_hot.data.adjacency import resolve_adjacency
from torch_geometric_hot.nn.token_self_attention import TokenSelfAttention
from torch_geometric_hot.nn.tokengt_embedding import TokenGTEmbedding
from torch_geometric_hot.ops.attention.tokens import token_layout


class TokenNodeAttention(torch.nn.Module):
    r"""The token attention of TokenGT
    (`Kim et al. 2022 <https://arxiv.org/abs/2207.02505>`_) as a layer that
    maps node features to node features, e.g. the global block of a
    GPS layer (:class:`~torch_geometric_hot.nn.HybridGPSConv`): every node
    and every edge of a graph becomes a token
    (:class:`~torch_geometric_hot.nn.TokenGTEmbedding`: features, node
    identifiers :math:`P`, type identifiers :math:`E`), an edge token also
    reads the current features of its two ends, all tokens of a graph attend
    to each other (:class:`~torch_geometric_hot.nn.TokenSelfAttention`) and
    the node tokens are returned:

    .. math::
        z_v &= W_x \mathbf{x}_v + W_1 P_v + W_2 P_v + E^{node} \\
        z_{(u,v)} &= W_e \mathbf{e}_{uv} + W_s \mathbf{x}_u +
        W_t \mathbf{x}_v + W_1 P_u + W_2 P_v + E^{edge} \\
        \mathbf{x}'_v &= \mathrm{MSA}(Z)_v

    The identifiers let a node's query find the edge tokens that hold it,
    so the attention sees the graph's structure. Pass them as
    :obj:`node_id` (e.g. :obj:`data.lap_node_id` from
    :class:`~torch_geometric_hot.transforms.AddLaplacianNodeId`, computed
    once for every layer of a model) or let the layer draw them
    (:obj:`node_id` of :class:`TokenGTEmbedding`).

    Args:
        in_channels (int): Node feature width.
        out_channels (int): Token and output width.
        heads (int, optional): Attention heads (must divide
            :obj:`out_channels`). (default: :obj:`4`)
        edge_dim (int, optional): Edge feature width; :obj:`None` builds
            edge tokens without edge features. (default: :obj:`None`)
        node_id (str, optional): Identifiers drawn when none are passed:
            ``'laplacian'``, ``'orf'``, ``'random'``, or :obj:`None` for no
            identifiers. (default: ``'laplacian'``)
        node_id_dim (int, optional): Identifier width :math:`d_p`.
            (default: :obj:`16`)
        attention (str, optional): ``'softmax'`` or ``'performer'``.
            (default: ``'softmax'``)
        attention_dropout (float, optional): Dropout on the softmax
            attention weights. (default: :obj:`0.`)
        seed (int, optional): Seed of drawn identifiers and Performer
            features. (default: :obj:`None`)
        **kwargs: Further :class:`TokenGTEmbedding` options
            (:obj:`type_id`, :obj:`sign_flip`, :obj:`eigvec_dropout`).

    Shapes:
        - **input:** node features :math:`(n, F_{in})`, edge indices
          :math:`(2, m)` or sparse adjacency :math:`(n, n)`, edge features
          :math:`(m, D)` (optional), batch vector :math:`(n)` (optional),
          node identifiers :math:`(n, d_p)` (optional)
        - **output:** node features :math:`(n, F_{out})`
    """
    def __init__(self, in_channels: int, out_channels: int, heads: int = 4,
                 edge_dim: Optional[int] = None,
                 node_id: Optional[str] = 'laplacian', node_id_dim: int = 16,
                 attention: str = 'softmax', attention_dropout: float = 0.0,
                 seed: Optional[int] = None, **kwargs) -> None:
        super().__init__()
        self.in_channels, self.out_channels = in_channels, out_channels
        self.edge_dim = edge_dim
        self.embedding = TokenGTEmbedding(in_channels, out_channels,
                                          edge_dim, node_id, node_id_dim,
                                          graph_token=False, seed=seed,
                                          **kwargs)
        self.lin_src = Linear(in_channels, out_channels, bias=False)
        self.lin_dst = Linear(in_channels, out_channels, bias=False)
        self.attn = TokenSelfAttention(out_channels, heads, attention,
                                       attention_dropout, seed=seed)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        r"""Resets all learnable parameters."""
        for module in (self.embedding, self.lin_src, self.lin_dst,
                       self.attn):
            module.reset_parameters()

    def redraw_projection(self) -> None:
        r"""Draws new Performer random features (no-op for softmax)."""
        self.attn.redraw_projection()

    def forward(self, x: Tensor, edge_index: Adj,
                edge_attr: Optional[Tensor] = None,
                batch: Optional[Tensor] = None, *,
                num_graphs: Optional[int] = None,
                node_id: Optional[Tensor] = None) -> Tensor:
        r"""
        Args:
            x (torch.Tensor): Node features :obj:`[n, in_channels]`.
            edge_index (torch.Tensor or SparseTensor): Edges :obj:`[2, m]`
                (also an :class:`~torch_geometric.EdgeIndex`), or the
                transposed adjacency as a :class:`torch_sparse.SparseTensor`
                or :class:`torch.sparse.Tensor`
                (:func:`~torch_geometric_hot.data.resolve_adjacency`).
            edge_attr (torch.Tensor, optional): Edge features
                :obj:`[m, edge_dim]` (needed with :obj:`edge_dim`).
            batch (torch.Tensor, optional): Graph of every node :obj:`[n]`.
            num_graphs (int, optional): Number of graphs.
            node_id (torch.Tensor, optional): Node identifiers
                :obj:`[n, node_id_dim]`; drawn when omitted.
        """
        if isinstance(x, Tensor):
            edge_index, edge_attr = resolve_adjacency(edge_index, edge_attr,
                                                      x.size(0))
        tokens, token_batch, num_graphs, counts = self.embedding(
            x, edge_index, edge_attr, batch, node_id, num_graphs=num_graphs)
        n = counts[1]
        src, dst = edge_index
        ends = self.lin_src(x)[src] + self.lin_dst(x)[dst]
        tokens = torch.cat([tokens[:n], tokens[n:] + ends])
        layout = token_layout(token_batch, num_graphs) \
            if self.attn.attention == 'softmax' else None
        return self.attn(tokens, token_batch, num_graphs, layout)[:n]

    def __repr__(self) -> str:
        return (f'{self.__class__.__name__}({self.in_channels}, '
                f'{self.out_channels}, heads={self.attn.heads}, '
                f'edge_dim={self.edge_dim}, '
                f'node_id={self.embedding.node_id!r}, '
                f'attention={self.attn.attention!r})')
