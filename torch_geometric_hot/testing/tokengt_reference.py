r"""A dense, per-graph reference of
:class:`~torch_geometric_hot.nn.TokenGTEncoder` (the oracle its tests use).

It reads the encoder's parameters but recomputes everything the naive way,
one graph at a time: the paper's concatenated token features
:math:`[X, P_u, P_v, E]` multiplied by one input matrix :math:`w^{in}`,
then every block with an explicit :math:`\mathrm{softmax}(QK^\top/\sqrt d)`
per head (no padding, masks or fused kernels), the sparse equivariant basis
by a Python loop over edges. Eval mode, identifiers passed in.
"""
from typing import Dict, List, Optional, Tuple

import torch
import torch.nn.functional as F
from torch import Tensor

from torch_geometric_hot.ops.equality_patterns import \
    restricted_growth_strings


def _pattern(column: List[int]) -> Tuple[int, ...]:
    first: Dict[int, int] = {}
    return tuple(first.setdefault(v, len(first)) for v in column)


def _input_matrix(emb) -> Tuple[Tensor, Dict[str, slice]]:
    r"""Concatenates every input map of the embedding into one
    :math:`w^{in}` and returns the column ranges of each slot."""
    d = emb.channels
    blocks, names = [], []

    def add(name: str, weight: Optional[Tensor]) -> None:
        if weight is not None:
            blocks.append(weight)
            names.append((name, weight.size(1)))

    add('x', emb.node_lin.weight if emb.node_lin is not None else None)
    add('e', emb.edge_lin.weight if emb.edge_lin is not None else None)
    add('h', emb.hyper_lin.weight if emb.hyper_lin is not None else None)
    if emb.id_lins is not None:
        add('p0', emb.id_lins[0].weight)
        add('p1', emb.id_lins[1].weight)
        for a, lin in enumerate(emb.hyper_id_lins):
            add(f'hp{a}', lin.weight)
    if emb.type_emb is not None:
        add('type', emb.type_emb.weight.t())
    if emb.hyper_type_emb is not None:
        add('pattern', emb.hyper_type_emb.weight.t())
    slots, start = {}, 0
    for name, width in names:
        slots[name] = slice(start, start + width)
        start += width
    weight = torch.cat(blocks, dim=1) if blocks else emb.bias.new_zeros(d, 0)
    return weight, slots


def _block(layer, z: Tensor) -> Tensor:
    attn = layer.attn
    heads, d = attn.heads, attn.channels // attn.heads
    h = F.layer_norm(z, (z.size(1), ), layer.attn_norm.weight,
                     layer.attn_norm.bias, layer.attn_norm.eps)
    q, k, v = (h @ attn.qkv.weight.t() + attn.qkv.bias).split(
        attn.channels, dim=1)
    outs = []
    for a in range(heads):
        cols = slice(a * d, (a + 1) * d)
        scores = q[:, cols] @ k[:, cols].t() / d**0.5
        outs.append(torch.softmax(scores, dim=1) @ v[:, cols])
    z = z + torch.cat(outs, dim=1) @ attn.out.weight.t() + attn.out.bias
    h = F.layer_norm(z, (z.size(1), ), layer.ffn_norm.weight,
                     layer.ffn_norm.bias, layer.ffn_norm.eps)
    h = F.gelu(h @ layer.ffn_in.weight.t() + layer.ffn_in.bias)
    return z + h @ layer.ffn_out.weight.t() + layer.ffn_out.bias


def dense_tokengt_reference(encoder, x: Tensor, edge_index: Tensor,
                            edge_attr: Optional[Tensor], batch: Tensor,
                            node_id: Optional[Tensor],
                            hyperedge_index: Optional[Tensor] = None,
                            hyperedge_attr: Optional[Tensor] = None
                            ) -> Tuple[Tensor, Tensor, Tensor, Tensor]:
    r"""Graph, node, edge and hyperedge outputs of :obj:`encoder` (softmax
    attention, eval mode), computed graph by graph. Missing graph or
    hyperedge outputs are empty tensors."""
    emb = encoder.embedding
    weight, slots = _input_matrix(emb)
    if node_id is not None:
        node_id = node_id * emb.node_id_scale
    d = emb.channels
    num_graphs = int(batch.max()) + 1 if batch.numel() else 1
    if hyperedge_index is None:
        hyperedge_index = edge_index.new_zeros(emb.hyperedge_order or 1, 0)
    k = hyperedge_index.size(0)
    outs = {key: x.new_zeros(count, d) for key, count in (
        ('graph', num_graphs if emb.graph_emb is not None else 0),
        ('node', x.size(0)), ('edge', edge_index.size(1)),
        ('hyper', hyperedge_index.size(1)))}
    patterns = {}
    if emb.hyper_type_emb is not None:
        patterns = {rgs: i for i, rgs in enumerate(
            restricted_growth_strings(k))}
    for g in range(num_graphs):
        nodes = (batch == g).nonzero().view(-1).tolist()
        edges = (batch[edge_index[0]] == g).nonzero().view(-1).tolist()
        hypers = (batch[hyperedge_index[0]] == g).nonzero().view(-1).tolist(
        ) if hyperedge_index.numel() else []
        rows = []  # one concatenated input row per token

        def row() -> Tensor:
            return x.new_zeros(weight.size(1))

        for v in nodes:
            r = row()
            if 'x' in slots:
                r[slots['x']] = x[v]
            if 'p0' in slots:
                r[slots['p0']] = node_id[v]
                r[slots['p1']] = node_id[v]
            if 'type' in slots:
                r[slots['type'].start] = 1.0
            rows.append(r)
        for e in edges:
            r = row()
            u, w = edge_index[:, e].tolist()
            if 'e' in slots:
                r[slots['e']] = edge_attr[e]
            if 'p0' in slots:
                r[slots['p0']] = node_id[u]
                r[slots['p1']] = node_id[w]
            if 'type' in slots:
                r[slots['type'].start + 1] = 1.0
            rows.append(r)
        for t in hypers:
            r = row()
            column = hyperedge_index[:, t].tolist()
            if 'h' in slots:
                r[slots['h']] = hyperedge_attr[t]
            for a, v in enumerate(column):
                if f'hp{a}' in slots:
                    r[slots[f'hp{a}']] = node_id[v]
            if 'pattern' in slots:
                r[slots['pattern'].start + patterns[_pattern(column)]] = 1.0
            rows.append(r)
        z = x.new_zeros(0, d)
        if rows:
            z = torch.stack(rows) @ weight.t() + emb.bias
        has_graph = emb.graph_emb is not None
        if has_graph:
            z = torch.cat([emb.graph_emb.view(1, d), z])
        offset = int(has_graph)
        for layer in encoder.layers:
            z = _block(layer, z)
            if encoder.seb:
                z = z.clone()
                for a, e in enumerate(edges):
                    u, w = edge_index[:, e].tolist()
                    if u != w:
                        z[offset + nodes.index(u)] += z[offset + len(nodes) +
                                                        a]
        z = F.layer_norm(z, (d, ), encoder.norm.weight, encoder.norm.bias,
                         encoder.norm.eps)
        if has_graph:
            outs['graph'][g] = z[0]
        pos = offset
        for key, ids in (('node', nodes), ('edge', edges), ('hyper', hypers)):
            if ids:
                outs[key][ids] = z[pos:pos + len(ids)]
            pos += len(ids)
    return outs['graph'], outs['node'], outs['edge'], outs['hyper']
