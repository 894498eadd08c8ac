r"""Token embedding of TokenGT: node, edge, hyperedge and graph tokens with
node and type identifiers."""
from typing import Optional, Tuple

import torch
from torch import Tensor
from torch.nn import Embedding, Linear, ModuleList, Parameter

from torch_geometric_hot.ops.equality_patterns import bell, equality_pattern
from torch_geometric_hot.validation import (check_batch, check_device,
                                            check_edge_index,
                                            check_features,
                                            check_within_graphs,
                                            validating)
from torch_geometric_hot.ops.node_identifiers import (
    batched_laplacian_node_ids, check_dim, orthogonal_node_ids,
    random_node_ids)
from torch_geometric_hot.ops.seeded_generators import SeededGenerators
from torch_geometric_hot.ops.size_buckets import token_positions

NODE_IDS = ('orf', 'laplacian', 'random', None)


class TokenGTEmbedding(torch.nn.Module):
    r"""Builds the flat token list of TokenGT
    (`Kim et al. 2022 <https://arxiv.org/abs/2207.02505>`_, §2):

    .. math::
        z_v &= w^{in} [X_v, P_v, P_v, E^{node}] \\
        z_{(u,v)} &= w^{in} [X_{(u,v)}, P_u, P_v, E^{edge}] \\
        z_{(i_1..i_k)} &= w^{in} [X_{(i_1..i_k)}, P_{i_1}, \dots, P_{i_k},
        E^{\gamma(i_1..i_k)}]

    and a trainable :math:`[\mathrm{graph}]` token per graph. The
    concatenation followed by :math:`w^{in}` is computed as a sum of one
    linear map per slot (node features, edge features, each identifier
    slot) plus a learned vector per type (the type identifier, of width
    :math:`d_e = d` as in the paper) and a shared bias. Hyperedge tokens are
    typed by the equality pattern :math:`\gamma` of their index tuple
    (:math:`\mathrm{bell}(k)` types), so tuples with repeated nodes are
    allowed.

    Node identifiers :math:`P` (:obj:`[n, d_p]`) are passed in (e.g. from
    :class:`~torch_geometric_hot.transforms.AddLaplacianNodeId`) or drawn
    per graph on the fly, on the device of the inputs: ``'orf'`` and
    ``'random'`` are redrawn at every training forward pass (from the
    module's generator of that device, seeded by :obj:`seed`; the device's
    default generator when :obj:`seed` is :obj:`None`) and fixed in eval
    mode (drawn from :obj:`seed`, or 0 when it is :obj:`None`, at every
    call); ``'laplacian'`` is computed per graph with
    :func:`torch.linalg.eigh` on dense per-graph blocks (fine for batches of
    small graphs; for large graphs prefer the transform). Laplacian
    identifiers get, in training only, a random sign per (graph,
    eigenvector) (:obj:`sign_flip`) and eigenvector dropout
    (:obj:`eigvec_dropout`, whole columns per graph, not rescaled so kept
    columns stay unit-norm), drawn from the same generator.

    Args:
        in_channels (int): Node feature width (:obj:`0` for none).
        channels (int): Token width :math:`d`.
        edge_dim (int, optional): Edge feature width. (default: :obj:`None`)
        node_id (str, optional): ``'orf'``, ``'laplacian'``, ``'random'`` or
            :obj:`None`. (default: ``'orf'``)
        node_id_dim (int, optional): :math:`d_p`. (default: :obj:`16`)
        type_id (bool, optional): Add type identifiers.
            (default: :obj:`True`)
        graph_token (bool, optional): Prepend a graph token per graph.
            (default: :obj:`True`)
        eigvec_dropout (float, optional): (default: :obj:`0.`)
        sign_flip (bool, optional): (default: :obj:`False`)
        hyperedge_order (int, optional): Order :math:`k` of hyperedge
            tokens. (default: :obj:`None`)
        hyperedge_dim (int, optional): Hyperedge feature width.
            (default: :obj:`None`)
        seed (int, optional): Seed of on-the-fly identifiers and of the
            Laplacian augmentations. (default: :obj:`None`)
        node_id_scale (float, optional): Factor on the identifiers where
            they enter the token projection. Orthonormal identifiers have
            entries of size about :math:`1/\sqrt{n}`, small beside the
            features; :math:`\sqrt{d_p}` gives them entries of size about
            one on graphs of :math:`d_p` nodes, and their dot products keep
            the pattern (:math:`c^2 P P^\top`). That fits small training
            sets faster but generalised worse on the molecule targets of
            the documentation's results page, so identifiers enter as they
            are by default. (default: :obj:`1.`)
    """
    def __init__(self, in_channels: int, channels: int,
                 edge_dim: Optional[int] = None,
                 node_id: Optional[str] = 'orf', node_id_dim: int = 16,
                 type_id: bool = True, graph_token: bool = True,
                 eigvec_dropout: float = 0.0, sign_flip: bool = False,
                 hyperedge_order: Optional[int] = None,
                 hyperedge_dim: Optional[int] = None,
                 seed: Optional[int] = None,
                 node_id_scale: float = 1.0) -> None:
        super().__init__()
        if node_id not in NODE_IDS:
            raise ValueError(f"'node_id' must be one of {NODE_IDS}, got "
                             f"{node_id!r}")
        check_dim(node_id_dim, 'node_id_dim')
        if not 0.0 <= eigvec_dropout < 1.0:
            raise ValueError(f"'eigvec_dropout' must be in [0, 1), got "
                             f"{eigvec_dropout}")
        if hyperedge_order is not None:
            check_dim(hyperedge_order, 'hyperedge_order')
        self.in_channels = in_channels
        self.channels = channels
        self.edge_dim = edge_dim
        self.node_id = node_id
        self.node_id_dim = node_id_dim
        self.eigvec_dropout = eigvec_dropout
        self.sign_flip = sign_flip
        self.hyperedge_order = hyperedge_order
        self.hyperedge_dim = hyperedge_dim
        self.seed = seed
        if not node_id_scale > 0:
            raise ValueError(f"'node_id_scale' must be positive, got "
                             f"{node_id_scale}")
        self.node_id_scale = float(node_id_scale)
        self.generators = SeededGenerators(seed)

        def lin(width: Optional[int]) -> Optional[Linear]:
            return Linear(width, channels, bias=False) if width else None

        def slots(count: int) -> Optional[ModuleList]:
            if node_id is None:
                return None
            return ModuleList([lin(node_id_dim) for _ in range(count)])

        self.node_lin = lin(in_channels)
        self.edge_lin = lin(edge_dim)
        self.id_lins = slots(2)
        self.type_emb = Embedding(2, channels) if type_id else None
        self.hyper_lin = lin(hyperedge_dim) if hyperedge_order else None
        self.hyper_id_lins = slots(hyperedge_order or 0)
        self.hyper_type_emb = (Embedding(bell(hyperedge_order), channels)
                               if type_id and hyperedge_order else None)
        self.bias = Parameter(torch.empty(channels))
        self.graph_emb = Parameter(
            torch.empty(channels)) if graph_token else None
        self.reset_parameters()

    def reset_parameters(self) -> None:
        r"""Resets all learnable parameters."""
        for module in self.children():
            if hasattr(module, 'reset_parameters'):
                module.reset_parameters()
            else:
                for child in module:
                    child.reset_parameters()
        torch.nn.init.zeros_(self.bias)
        # BERT-style small embeddings: type identifiers must not drown the
        # identifier and feature terms at initialisation.
        for emb in (self.type_emb, self.hyper_type_emb):
            if emb is not None:
                torch.nn.init.normal_(emb.weight, std=0.02)
        if self.graph_emb is not None:
            torch.nn.init.normal_(self.graph_emb, std=0.02)

    def _draw(self, sizes: Tensor, dtype: torch.dtype) -> Tensor:
        device = sizes.device
        if self.training:
            generator = self.generators(device)
        else:  # the same identifiers at every call
            generator = torch.Generator(device=device).manual_seed(self.seed
                                                                   or 0)
        draw = orthogonal_node_ids if self.node_id == 'orf' else (
            random_node_ids)
        return draw(sizes, self.node_id_dim, generator, dtype, device)

    def node_identifiers(self, edge_index: Tensor, batch: Tensor,
                         num_graphs: int, node_id: Optional[Tensor],
                         dtype: torch.dtype) -> Optional[Tensor]:
        r"""The identifiers :math:`P` :obj:`[n, d_p]` used in this forward
        pass (given, or drawn per graph; Laplacian augmentations applied in
        training)."""
        if self.node_id is None:
            return None
        n = batch.numel()
        if node_id is not None:
            if node_id.shape != (n, self.node_id_dim):
                raise ValueError(f"'node_id' must have shape [{n}, "
                                 f"{self.node_id_dim}] (num_nodes, "
                                 f"node_id_dim), got {tuple(node_id.shape)}")
            if node_id.device != batch.device:
                raise ValueError(f"'node_id' is on {node_id.device} but the "
                                 f"nodes are on {batch.device}")
            p = node_id.to(dtype)
        elif self.node_id == 'laplacian':
            p = batched_laplacian_node_ids(edge_index, batch, num_graphs,
                                           self.node_id_dim, dtype)
        else:
            local, sizes = token_positions(batch, num_graphs)
            starts = torch.cumsum(sizes, 0) - sizes
            p = self._draw(sizes, dtype)[starts[batch] + local]
        if self.node_id == 'laplacian' and self.training:
            generator = self.generators(p.device)
            if self.sign_flip:
                signs = torch.randint(0, 2, (num_graphs, self.node_id_dim),
                                      generator=generator, device=p.device)
                p = p * (2 * signs - 1).to(dtype)[batch]
            if self.eigvec_dropout > 0:
                keep = torch.rand(num_graphs, self.node_id_dim,
                                  generator=generator, device=p.device)
                p = p * (keep >= self.eigvec_dropout).to(dtype)[batch]
        return p

    def _check(self, x: Tensor, edge_index: Tensor,
               edge_attr: Optional[Tensor], batch: Tensor,
               hyperedge_index: Optional[Tensor],
               hyperedge_attr: Optional[Tensor]) -> None:
        n = x.size(0)
        if x.dim() != 2 or x.size(1) != (self.in_channels or 0):
            raise ValueError(f"'x' must have shape [num_nodes, "
                             f"{self.in_channels}], got {tuple(x.shape)}")
        if self.node_lin is not None:
            check_features(x, dtype=self.node_lin.weight.dtype)
        check_edge_index(edge_index, n)
        # Host synchronisations below: value checks of the indices, skipped
        # with validation off.
        checking = validating()
        check_within_graphs(edge_index, batch)
        if self.edge_dim and (edge_attr is None or edge_attr.shape !=
                              (edge_index.size(1), self.edge_dim)):
            raise ValueError(f"'edge_attr' must have shape [num_edges, "
                             f"{self.edge_dim}]")
        if self.edge_lin is not None:
            check_features(edge_attr, dtype=self.edge_lin.weight.dtype,
                           name='edge_attr')
        if hyperedge_index is None:
            return
        k = self.hyperedge_order
        if k is None or hyperedge_index.dim() != 2 or (hyperedge_index.size(0)
                                                       != k):
            raise ValueError(f"'hyperedge_index' must have shape [{k}, "
                             f"num_hyperedges] (hyperedge_order={k}), got "
                             f"{tuple(hyperedge_index.shape)}")
        if checking and hyperedge_index.numel() and (
                int(hyperedge_index.min()) < 0
                or int(hyperedge_index.max()) >= n):
            raise ValueError(f"'hyperedge_index' must hold node indices in "
                             f"[0, {n})")
        if checking and bool(
                (batch[hyperedge_index] != batch[hyperedge_index[:1]]).any()):
            raise ValueError("'hyperedge_index' mixes nodes of different "
                             "graphs")
        if self.hyperedge_dim and (hyperedge_attr is None
                                   or hyperedge_attr.shape !=
                                   (hyperedge_index.size(1),
                                    self.hyperedge_dim)):
            raise ValueError(f"'hyperedge_attr' must have shape "
                             f"[num_hyperedges, {self.hyperedge_dim}]")

    def forward(
        self, x: Tensor, edge_index: Tensor,
        edge_attr: Optional[Tensor] = None, batch: Optional[Tensor] = None,
        node_id: Optional[Tensor] = None,
        hyperedge_index: Optional[Tensor] = None,
        hyperedge_attr: Optional[Tensor] = None,
        num_graphs: Optional[int] = None
    ) -> Tuple[Tensor, Tensor, int, Tuple[int, int, int, int]]:
        r"""Returns the tokens :obj:`[T, d]`, their graph :obj:`[T]`, the
        number of graphs :math:`B` and the token counts
        :obj:`(graph, node, edge, hyperedge)`, in that flat order."""
        if not isinstance(x, Tensor) or x.dim() != 2:
            raise ValueError(f"'x' must be a 2-dimensional tensor "
                             f"[num_nodes, {self.in_channels}]")
        check_device(x, self.bias.device, 'x', 'the layer')
        for name, value in (('edge_index', edge_index),
                            ('edge_attr', edge_attr), ('batch', batch),
                            ('node_id', node_id), ('hyperedge_index',
                                                   hyperedge_index),
                            ('hyperedge_attr', hyperedge_attr)):
            check_device(value, x.device, name)
        batch, num_graphs = check_batch(batch, x.size(0), num_graphs,
                                        device=x.device)
        self._check(x, edge_index, edge_attr, batch, hyperedge_index,
                    hyperedge_attr)
        n = x.size(0)
        dtype = self.bias.dtype
        src, dst = edge_index
        node = self.bias.expand(n, -1)
        edge = self.bias.expand(src.numel(), -1)
        if self.node_lin is not None:
            node = node + self.node_lin(x)
        if self.edge_lin is not None:
            edge = edge + self.edge_lin(edge_attr)
        p = self.node_identifiers(edge_index, batch, num_graphs, node_id,
                                  dtype)
        if p is not None:
            p = p * self.node_id_scale
            first, second = self.id_lins[0](p), self.id_lins[1](p)  # [n, d]
            node = node + first + second
            edge = edge + first[src] + second[dst]
        if self.type_emb is not None:
            node = node + self.type_emb.weight[0]
            edge = edge + self.type_emb.weight[1]
        parts = [node, edge]
        batches = [batch, batch[src]]
        if hyperedge_index is not None:
            hyper = self.bias.expand(hyperedge_index.size(1), -1)
            if self.hyper_lin is not None:
                hyper = hyper + self.hyper_lin(hyperedge_attr)
            if p is not None:
                for lin, slot in zip(self.hyper_id_lins, hyperedge_index):
                    hyper = hyper + lin(p)[slot]
            if self.hyper_type_emb is not None:
                hyper = hyper + self.hyper_type_emb(
                    equality_pattern(hyperedge_index))
            parts.append(hyper)
            batches.append(batch[hyperedge_index[0]])
        if self.graph_emb is not None:
            parts.insert(0, self.graph_emb.expand(num_graphs, -1))
            batches.insert(0, torch.arange(num_graphs, device=x.device))
        counts = [part.size(0) for part in parts]
        if self.graph_emb is None:
            counts.insert(0, 0)
        counts += [0] * (4 - len(counts))
        return (torch.cat(parts, dim=0), torch.cat(batches), num_graphs,
                tuple(counts))

    def __repr__(self) -> str:
        return (f'{self.__class__.__name__}({self.in_channels}, '
                f'{self.channels}, edge_dim={self.edge_dim}, '
                f'node_id={self.node_id!r}, node_id_dim={self.node_id_dim}, '
                f'type_id={self.type_emb is not None}, '
                f'graph_token={self.graph_emb is not None}, '
                f'hyperedge_order={self.hyperedge_order})')
