r"""Mean attention distance of TokenGT in hops, by layer and head (the
attention-distance figure of `Kim et al. 2022
<https://arxiv.org/abs/2207.02505>`_, after the one of Vision
Transformers): how far, on the graph, each head of each layer looks.

Every node token :math:`v` sits at node :math:`v`, every edge token
:math:`(u, v)` at its two endpoints. The distance between two tokens is
the number of hops between their nearest endpoints,

.. math::
    d(t, s) = \min_{a \in \mathrm{ends}(t),\, b \in \mathrm{ends}(s)}
    \mathrm{hops}(a, b),

with hops counted on the undirected graph (so :math:`d = 0` between an
edge and its endpoints, and between the two directions of one bond). A
query token's attention distance is :math:`\sum_s \tilde\alpha^h_{ts}
d(t, s)`, where :math:`\tilde\alpha^h_{t\cdot}` is its attention over the
graph's node and edge tokens (the :math:`[\mathrm{graph}]` token left out,
the weights renormalised; so are tokens in another connected component of
a disconnected graph, which no number of hops reaches). A graph's value
is the mean over its node and edge tokens, and the result the mean over
graphs, per layer and head.
"""
from typing import Callable, Iterable, List, Optional, Tuple

import numpy as np
import scipy.sparse
import scipy.sparse.csgraph
import torch
from torch import Tensor
from torch_geometric.data import Data

from torch_geometric_hot.nn.attention_recorder import AttentionRecorder
from torch_geometric_hot.nn.token_self_attention import AttentionWeights
from torch_geometric_hot.nn.tokengt_encoder import TokenGTEncoder


def hop_distances(edge_index: Tensor, batch: Tensor,
                  num_graphs: int) -> Tuple[Tensor, Tensor]:
    r"""Hop distances between the nodes of every graph of a batch, on the
    undirected graph: :obj:`[B, N, N]` float (:math:`N` the largest graph;
    :obj:`inf` between nodes no path joins, and in the padding), and every
    node's position in its graph, :obj:`[n]`."""
    batch = batch.cpu()
    sizes = torch.bincount(batch, minlength=num_graphs)
    first = torch.cumsum(sizes, 0) - sizes
    local = torch.arange(batch.numel()) - first[batch]
    width = int(sizes.max()) if num_graphs else 0
    out = torch.full((num_graphs, width, width), float('inf'),
                     dtype=torch.float64)
    row, col = edge_index.cpu()
    edge_graph = batch[row]
    order = torch.argsort(edge_graph, stable=True)
    edge_counts = torch.bincount(edge_graph, minlength=num_graphs).tolist()
    rows, cols = local[row[order]].split(edge_counts), \
        local[col[order]].split(edge_counts)
    for g, (r, c) in enumerate(zip(rows, cols)):
        n = int(sizes[g])
        adjacency = scipy.sparse.coo_matrix(
            (np.ones(r.numel()), (r.numpy(), c.numpy())), shape=(n, n))
        out[g, :n, :n] = torch.from_numpy(scipy.sparse.csgraph.shortest_path(
            adjacency.tocsr(), directed=False, unweighted=True))
    return out, local


def token_endpoints(edge_index: Tensor, num_nodes: int, num_graphs: int,
                    graph_tokens: bool) -> Tensor:
    r"""The two endpoints of every token in TokenGT's order
    (:math:`[\mathrm{graph}]` tokens when :obj:`graph_tokens`, then node
    tokens, then edge tokens), :obj:`[T, 2]`: :math:`(v, v)` for node
    :math:`v`, :math:`(u, v)` for edge :math:`(u, v)`, :math:`(-1, -1)` for
    a :math:`[\mathrm{graph}]` token."""
    nodes = torch.arange(num_nodes, device=edge_index.device)
    parts = [torch.stack([nodes, nodes], 1), edge_index.t()]
    if graph_tokens:
        parts.insert(0, nodes.new_full((num_graphs, 2), -1))
    return torch.cat(parts).long()


def batch_attention_distance(weights: AttentionWeights, endpoints: Tensor,
                             token_batch: Tensor, hops: Tensor,
                             local: Tensor) -> Tensor:
    r"""Per graph and head, the mean attention distance of one layer's
    :obj:`weights` (see the module documentation), :obj:`[B, H]`.

    Args:
        weights (AttentionWeights): The layer's weights.
        endpoints (torch.Tensor): :func:`token_endpoints`, :obj:`[T, 2]`.
        token_batch (torch.Tensor): Graph of every token, :obj:`[T]`.
        hops (torch.Tensor): :func:`hop_distances`, :obj:`[B, N, N]`.
        local (torch.Tensor): Every node's position in its graph.
    """
    index, weight = weights.index.cpu(), weights.weight.cpu().double()
    endpoints, token_batch = endpoints.cpu(), token_batch.cpu()
    query, key = index
    graph = token_batch[query]
    ends_q, ends_k = endpoints[query], endpoints[key]
    real = (ends_q[:, 0] >= 0) & (ends_k[:, 0] >= 0)
    distance = torch.full((query.numel(), ), float('inf'),
                          dtype=torch.float64)
    pos_q, pos_k = local[ends_q[real]], local[ends_k[real]]
    g = graph[real]
    for a in range(2):
        for b in range(2):
            distance[real] = torch.minimum(distance[real],
                                           hops[g, pos_q[:, a], pos_k[:, b]])
    keep = torch.isfinite(distance)
    w = weight * keep.unsqueeze(-1)
    num_tokens, num_graphs = token_batch.numel(), hops.size(0)
    total = torch.zeros(num_tokens, w.size(1), dtype=torch.float64)
    total.index_add_(0, query, w)
    weighted = torch.zeros_like(total)
    weighted.index_add_(0, query, w * torch.where(keep, distance,
                                                  0.0).unsqueeze(-1))
    is_query = endpoints[:, 0] >= 0
    per_token = weighted[is_query] / total[is_query]
    graph_of = token_batch[is_query]
    sums = torch.zeros(num_graphs, w.size(1), dtype=torch.float64)
    sums.index_add_(0, graph_of, per_token)
    counts = torch.bincount(graph_of, minlength=num_graphs).clamp(min=1)
    return sums / counts.unsqueeze(-1)


def _default_forward(model: torch.nn.Module) -> Callable[[Data], object]:
    def forward(batch: Data):
        node_id = None
        for name in ('lap_node_id', 'orf_node_id', 'random_node_id'):
            if name in batch:
                node_id = batch[name]
                break
        return model(batch.x, batch.edge_index, batch.get('edge_attr'),
                     batch.batch, num_graphs=batch.num_graphs,
                     node_id=node_id)
    return forward


def _encoder(model: torch.nn.Module) -> TokenGTEncoder:
    encoders = [m for m in model.modules() if isinstance(m, TokenGTEncoder)]
    if len(encoders) != 1:
        raise ValueError(f"'model' must hold one TokenGTEncoder, found "
                         f"{len(encoders)} in {type(model).__name__}")
    return encoders[0]


@torch.no_grad()
def mean_attention_distance(model: torch.nn.Module, batches: Iterable[Data],
                            forward: Optional[Callable[[Data], object]] = None,
                            device: Optional[torch.device] = None
                            ) -> Tensor:
    r"""The mean attention distance in hops of every head of every layer of
    a TokenGT :obj:`model` over the graphs of :obj:`batches` (see the
    module documentation), :obj:`[layers, heads]`, in evaluation mode.

    Args:
        model (torch.nn.Module): A :class:`~torch_geometric_hot.models.TokenGT`
            (or any module holding one
            :class:`~torch_geometric_hot.nn.TokenGTEncoder` without
            hyperedge tokens).
        batches (iterable): Batches of graphs (e.g. a
            :class:`~torch_geometric.loader.DataLoader`).
        forward (callable, optional): Runs :obj:`model` on a batch
            (default: ``model(x, edge_index, edge_attr, batch,
            num_graphs=..., node_id=...)`` with the batch's
            ``lap_node_id``, ``orf_node_id`` or ``random_node_id``).
        device (torch.device, optional): Where the batches go (default:
            the model's device).
    """
    encoder = _encoder(model)
    graph_tokens = encoder.embedding.graph_emb is not None
    forward = forward or _default_forward(model)
    device = device or next(model.parameters()).device
    was_training = model.training
    model.eval()
    sums: Optional[Tensor] = None
    count = 0
    recorder = AttentionRecorder(encoder)
    try:
        for batch in batches:
            batch = batch.to(device)
            recorder.clear()
            with recorder:
                forward(batch)
            num_graphs = int(batch.num_graphs)
            endpoints = token_endpoints(batch.edge_index, batch.num_nodes,
                                        num_graphs, graph_tokens)
            token_batch = torch.cat(([torch.arange(num_graphs)]
                                     if graph_tokens else []) +
                                    [batch.batch.cpu(),
                                     batch.batch.cpu()[batch.edge_index[0]
                                                       .cpu()]])
            hops, local = hop_distances(batch.edge_index, batch.batch,
                                        num_graphs)
            layers: List[Tensor] = []
            for _, weights in recorder.records:
                if int(weights.index.max()) + 1 > endpoints.size(0):
                    raise ValueError("the model has tokens beyond nodes and "
                                     "edges (hyperedges): not supported")
                layers.append(batch_attention_distance(
                    weights, endpoints, token_batch, hops, local).sum(0))
            step = torch.stack(layers)
            sums = step if sums is None else sums + step
            count += num_graphs
    finally:
        model.train(was_training)
    if sums is None:
        raise ValueError("'batches' holds no graph")
    return sums / count


def plot_attention_distance(distance: Tensor, path: str,
                            title: str = '') -> None:
    r"""The figure: one dot per head at every layer (network depth on the
    horizontal axis, mean attention distance in hops on the vertical),
    written to :obj:`path`.

    Args:
        distance (torch.Tensor): :func:`mean_attention_distance`,
            :obj:`[layers, heads]`.
        path (str): The image file.
        title (str, optional): The figure's title.
    """
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    fig, ax = plot_attention_distance_axes(distance, title)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_attention_distance_axes(distance: Tensor, title: str = ''):
    r"""The figure of :func:`plot_attention_distance`, returned as
    ``(figure, axes)`` (to show it in a notebook)."""
    import matplotlib.pyplot as plt
    distance = torch.as_tensor(distance, dtype=torch.float64)
    num_layers, num_heads = distance.shape
    fig, ax = plt.subplots(figsize=(4.8, 3.6))
    cmap = plt.get_cmap('viridis', max(num_heads, 2))
    for h in range(num_heads):
        ax.scatter(np.arange(1, num_layers + 1), distance[:, h].numpy(),
                   color=cmap(h), s=22, label=f'head {h + 1}')
    ax.set(xlabel='network depth (layer)',
           ylabel='mean attention distance (hops)',
           title=title or 'attention distance by head and depth')
    ax.set_xticks(np.arange(1, num_layers + 1))
    ax.grid(alpha=0.3)
    if num_heads <= 8:
        ax.legend(fontsize=7)
    fig.tight_layout()
    return fig, ax
