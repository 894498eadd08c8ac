r"""The N-simplicial attention layer."""
from typing import Optional, Tuple

import torch
from torch import Tensor
from torch.nn import Linear
from torch_geometric.utils import subgraph

from torch_geometric_hot.data.simplex_candidates import (dense_simplices,
                                                         neighbour_simplices,
                                                         walk_simplices)
from torch_geometric_hot.nn.expert_choice_router import ExpertChoiceRouter
from torch_geometric_hot.nn.simplex_indexer import SimplexIndexer
from torch_geometric_hot.ops.rope import apply_rotary
from torch_geometric_hot.ops.simplicial_attention import (
    FORMS, check_simplex_index, indexer_distillation_loss,
    simplicial_attention)
from torch_geometric_hot.validation import (check_batch,
                                            check_edge_index,
                                            check_features, check_rows,
                                            check_within_graphs)

CANDIDATES = ('dense', 'neighbours', 'walks', 'indexer')
INDEXER_LOSSES = (None, 'kl', 'mse')
Pairs = Tuple[Tensor, Tensor]  # indexer pair_index [2, P], pair_score [P]


class SimplicialAttention(torch.nn.Module):
    r"""N-simplicial attention (`Dussolle & Liò 2025
    <https://arxiv.org/abs/2511.04624>`_) over candidate tuples
    :math:`t = (q, k_1, \dots, k_N)` of nodes of the same graph:

    .. math::
        x_q' = x_q + W_O \Big\Vert_{h=1}^{H} \sum_{t : t_0 = q}
        \alpha_{th}\, V^{(1)}_{k_1 h} \odot \cdots \odot V^{(N)}_{k_N h},
        \qquad \alpha_{\cdot h} = \mathrm{softmax}_{t : t_0 = q}
        (\ell_{th}),

    with the multilinear logit :math:`\ell_t = \frac{1}{\sqrt d}\sum_a
    Q_{qa} K^{(1)}_{k_1 a} \cdots K^{(N)}_{k_N a}` or the determinant logit
    (sum of :math:`(N+1) \times (N+1)` determinants over channel chunks,
    rotation invariant, so it accepts RoPE positions :obj:`pos`).
    :math:`N = 1` is ordinary softmax attention restricted to the tuples. A
    node with no tuple is left unchanged (:math:`W_O` has no bias).

    Tuples (:obj:`candidates`), built per graph from the batch:
    ``'dense'`` (all :math:`n_g^{N+1}`), ``'neighbours'`` (:math:`k_a \in
    \mathcal{N}(q)`), ``'walks'`` (paths :math:`q \to k_1 \to \dots \to
    k_N`), ``'indexer'`` (Simplicial Path Sparse Attention,
    :class:`SimplexIndexer`, :math:`n k^N` tuples); or pass
    :obj:`simplex_index` to :meth:`forward`.

    With :obj:`capacity`, an :class:`ExpertChoiceRouter` picks the top
    nodes of each graph; tuples are built among them only and their update
    is gated by the router score.

    Args:
        in_channels (int): Node feature width :math:`C`.
        heads (int, optional): Number of heads :math:`H`. (default: 1)
        head_channels (int, optional): Width :math:`d` per head (a multiple
            of :math:`N+1` for the determinant form).
            (default: :obj:`in_channels // heads`)
        order (int, optional): Number of key slots :math:`N \geq 1`.
            (default: 2)
        form (str, optional): ``'multilinear'`` or ``'determinant'``.
            (default: ``'multilinear'``)
        candidates (str, optional): ``'dense'``, ``'neighbours'``,
            ``'walks'`` or ``'indexer'``. (default: ``'dense'``)
        k (int, optional): Indexer pairs per node (itself included),
            clamped to the graph size. (default: 8)
        include_self (bool, optional): For ``'neighbours'``/``'walks'``,
            count every node as its own neighbour. (default: :obj:`False`)
        indexer_heads (int, optional): Indexer heads. (default: 4)
        indexer_channels (int, optional): Indexer width per head.
            (default: 16)
        indexer_loss (str, optional): ``'kl'`` or ``'mse'``: after each
            forward, :attr:`aux_loss` holds the indexer's distillation loss
            to the (detached) attention, to be added to the training loss;
            :obj:`None`: the indexer is not trained. (default: :obj:`None`)
        capacity (float, optional): Expert-choice routing capacity in
            :math:`(0, 1]`; :obj:`None` routes every node.
            (default: :obj:`None`)
        rope_base (float, optional): RoPE frequency base. (default: 10000)
        chunk_size (int, optional): Tuples per chunk of the attention
            (memory bound; see
            :func:`~torch_geometric_hot.ops.simplicial_attention`).
            (default: automatic)

    Shapes:
        - **input:** :obj:`x [n, C]`, :obj:`edge_index [2, m]` (optional),
          :obj:`batch [n]` (optional, sorted), :obj:`simplex_index
          [N+1, T]` (optional), :obj:`pos [n]` (optional, integer)
        - **output:** :obj:`[n, C]`
    """
    def __init__(self, in_channels: int, heads: int = 1,
                 head_channels: Optional[int] = None, order: int = 2,
                 form: str = 'multilinear', candidates: str = 'dense',
                 k: int = 8, include_self: bool = False,
                 indexer_heads: int = 4, indexer_channels: int = 16,
                 indexer_loss: Optional[str] = None,
                 capacity: Optional[float] = None,
                 rope_base: float = 10000.0,
                 chunk_size: Optional[int] = None) -> None:
        super().__init__()
        head_channels = head_channels or in_channels // heads
        if not isinstance(order, int) or order < 1:
            raise ValueError(f"'order' (N) must be an integer >= 1, got "
                             f"{order!r}")
        if form not in FORMS:
            raise ValueError(f"'form' must be one of {FORMS}, got {form!r}")
        if candidates not in CANDIDATES:
            raise ValueError(f"'candidates' must be one of {CANDIDATES}, "
                             f"got {candidates!r}")
        if indexer_loss not in INDEXER_LOSSES:
            raise ValueError(f"'indexer_loss' must be one of "
                             f"{INDEXER_LOSSES}, got {indexer_loss!r}")
        if head_channels < 1 or (form == 'determinant'
                                 and head_channels % (order + 1)):
            raise ValueError(f"'head_channels' must be a positive multiple "
                             f"of N+1 = {order + 1} for the {form} form, "
                             f"got {head_channels}")
        self.in_channels = in_channels
        self.heads = heads
        self.head_channels = head_channels
        self.order = order
        self.form = form
        self.candidates = candidates
        self.include_self = include_self
        self.indexer_loss = indexer_loss
        self.rope_base = rope_base
        self.chunk_size = chunk_size
        width = heads * head_channels
        self.lin_qkv = Linear(in_channels, (1 + 2 * order) * width)
        self.lin_out = Linear(width, in_channels, bias=False)
        self.indexer = SimplexIndexer(in_channels, k, indexer_heads,
                                      indexer_channels) if (
                                          candidates == 'indexer') else None
        self.router = ExpertChoiceRouter(in_channels, capacity) if (
            capacity is not None) else None
        self.aux_loss: Optional[Tensor] = None
        self.reset_parameters()

    def reset_parameters(self) -> None:
        self.lin_qkv.reset_parameters()
        self.lin_out.reset_parameters()
        for module in (self.indexer, self.router):
            if module is not None:
                module.reset_parameters()

    def forward(self, x: Tensor, edge_index: Optional[Tensor] = None,
                batch: Optional[Tensor] = None,
                simplex_index: Optional[Tensor] = None,
                pos: Optional[Tensor] = None) -> Tensor:
        r"""Runs the layer (see the class docstring for the shapes).

        Args:
            x (torch.Tensor): Node features.
            edge_index (torch.Tensor, optional): Edges, needed by
                ``'neighbours'`` and ``'walks'``.
            batch (torch.Tensor, optional): Sorted graph id per node.
            simplex_index (torch.Tensor, optional): Given tuples; they
                replace the :obj:`candidates` generator.
            pos (torch.Tensor, optional): Integer positions for RoPE
                (determinant form only).
        """
        check_features(x, self.in_channels, self.lin_qkv.weight.dtype)
        n = x.size(0)
        batch, _ = check_batch(batch, n, sorted=True, device=x.device)
        if edge_index is not None:  # the router restricts it first
            check_edge_index(edge_index, n)
            check_within_graphs(edge_index, batch)
        if pos is not None and self.form != 'determinant':
            raise ValueError("'pos' (RoPE) needs form='determinant': the "
                             "multilinear form is not rotation invariant")
        if pos is not None:
            check_rows(pos, n, 'pos', 'node')
        if simplex_index is not None:
            check_simplex_index(simplex_index, self.order, n)
        self.aux_loss = None
        if self.router is None:
            return x + self._update(x, edge_index, batch, simplex_index, pos)
        index, gate = self.router(x, batch)
        edge_index, simplex_index = _restrict(index, n, edge_index,
                                              simplex_index)
        update = self._update(x[index], edge_index, batch[index],
                              simplex_index,
                              None if pos is None else pos[index])
        return self.router.combine(x, index, gate, update)

    def _tuples(self, x: Tensor, edge_index: Optional[Tensor],
                batch: Tensor) -> Tuple[Tensor, Optional[Pairs]]:
        n = x.size(0)
        if self.candidates == 'dense':
            return dense_simplices(n, self.order, batch), None
        if self.candidates == 'indexer':
            simplex_index, pair_index, pair_score = self.indexer(
                x, self.order, batch)
            return simplex_index, (pair_index, pair_score)
        if edge_index is None:
            raise ValueError(f"candidates={self.candidates!r} needs "
                             f"'edge_index'")
        generate = (neighbour_simplices
                    if self.candidates == 'neighbours' else walk_simplices)
        return generate(edge_index, n, self.order, self.include_self), None

    def _update(self, x: Tensor, edge_index: Optional[Tensor],
                batch: Tensor, simplex_index: Optional[Tensor],
                pos: Optional[Tensor]) -> Tensor:
        n, order = x.size(0), self.order
        pairs = None
        if simplex_index is None:
            simplex_index, pairs = self._tuples(x, edge_index, batch)
        projected = self.lin_qkv(x).view(n, 1 + 2 * order, self.heads,
                                         self.head_channels)
        query, *rest = projected.unbind(1)  # each [n, H, d]
        keys, values = rest[:order], rest[order:]
        if pos is not None:
            query, *keys = [
                apply_rotary(t, pos, order + 1, self.rope_base)
                for t in [query, *keys]
            ]
        out, alpha = simplicial_attention(query, keys, values, simplex_index,
                                          self.form, self.chunk_size,
                                          return_alpha=True)
        if pairs is not None and self.indexer_loss is not None:
            self.aux_loss = indexer_distillation_loss(
                pairs[1], pairs[0], alpha, simplex_index, n,
                self.indexer_loss)
        return self.lin_out(out.reshape(n, self.heads * self.head_channels))

    def __repr__(self) -> str:
        extra = f', capacity={self.router.capacity}' if self.router else ''
        if self.indexer is not None:
            extra += f', k={self.indexer.k}'
        return (f'{self.__class__.__name__}({self.in_channels}, '
                f'heads={self.heads}, order={self.order}, '
                f'form={self.form!r}, candidates={self.candidates!r}'
                f'{extra})')


def _restrict(index: Tensor, num_nodes: int, edge_index: Optional[Tensor],
              simplex_index: Optional[Tensor]
              ) -> Tuple[Optional[Tensor], Optional[Tensor]]:
    r"""Edges and tuples among the routed nodes :obj:`index`, relabelled
    to :obj:`0 .. len(index) - 1`."""
    if edge_index is not None:
        edge_index, _ = subgraph(index, edge_index, relabel_nodes=True,
                                 num_nodes=num_nodes)
    if simplex_index is not None:
        new_id = torch.full((num_nodes, ), -1, dtype=torch.long,
                            device=index.device)
        new_id[index] = torch.arange(index.numel(), device=index.device)
        relabelled = new_id[simplex_index]
        simplex_index = relabelled[:, (relabelled >= 0).all(0)]
    return edge_index, simplex_index
