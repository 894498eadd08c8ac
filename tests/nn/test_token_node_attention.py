import pytest
import torch
from torch_geometric.data import Batch

from torch_geometric_hot.nn import TokenNodeAttention
from torch_geometric_hot.testing import (assert_batch_independent,
                                         assert_gradcheck,
                                         assert_permutation_equivariant,
                                         edge_case_graphs, random_graph)

P = 5  # identifier width


def layer(device, attention='softmax', edge_dim=3, node_id='laplacian'):
    torch.manual_seed(0)
    return TokenNodeAttention(4, 8, heads=2, edge_dim=edge_dim,
                              node_id=node_id, node_id_dim=P,
                              attention=attention,
                              seed=0).double().to(device).eval()


def with_ids(graphs):
    gen = torch.Generator().manual_seed(1)
    for g in graphs:
        g.node_id = torch.randn(g.num_nodes, P, generator=gen,
                                dtype=torch.float64).to(g.x.device)
    return graphs


def on_graph(conv):
    return lambda d: conv(d.x, d.edge_index, d.edge_attr, d.batch,
                          node_id=d.node_id)


def dense_reference(conv, x, edge_index, edge_attr, node_id):
    r"""One graph: its node and edge tokens written out from the weights,
    then plain multi-head softmax attention over all of them."""
    emb = conv.embedding
    src, dst = edge_index
    node_id = node_id * emb.node_id_scale
    first, second = emb.id_lins[0](node_id), emb.id_lins[1](node_id)
    node = emb.node_lin(x) + first + second + emb.type_emb.weight[0] + \
        emb.bias
    edge = emb.edge_lin(edge_attr) + conv.lin_src(x)[src] + \
        conv.lin_dst(x)[dst] + first[src] + second[dst] + \
        emb.type_emb.weight[1] + emb.bias
    z = torch.cat([node, edge])
    T, H, C = z.size(0), conv.attn.heads, conv.out_channels
    q, k, v = conv.attn.qkv(z).view(T, 3, H, C // H).unbind(1)
    scores = torch.einsum('thd,shd->hts', q, k) / (C // H)**0.5
    out = torch.einsum('hts,shd->thd', scores.softmax(-1), v)
    return conv.attn.out(out.reshape(T, C))[:x.size(0)]


def test_equals_dense_token_attention(device):
    conv = layer(device)
    graphs = with_ids([
        random_graph(6, 8, edge_dim=3, device=device),
        random_graph(4, 5, edge_dim=3, seed=2, undirected=False,
                     device=device)
    ])
    batch = Batch.from_data_list(graphs)
    out = on_graph(conv)(batch)
    expected = torch.cat([
        dense_reference(conv, g.x, g.edge_index, g.edge_attr, g.node_id)
        for g in graphs
    ])
    torch.testing.assert_close(out, expected)


@pytest.mark.parametrize('attention', ['softmax', 'performer'])
def test_equivariant_and_batch_independent(attention, device):
    conv = layer(device, attention)
    graphs = with_ids(edge_case_graphs(edge_dim=3, device=device))
    assert_permutation_equivariant(on_graph(conv), graphs[0], 'node')
    assert_batch_independent(on_graph(conv), graphs, 'node')
    assert torch.isfinite(on_graph(conv)(Batch.from_data_list(graphs))).all()


def test_laplacian_identifiers_drawn_when_not_passed(device):
    conv = layer(device)
    data = random_graph(6, 8, edge_dim=3, device=device)
    alone = conv(data.x, data.edge_index, data.edge_attr)
    assert alone.shape == (6, 8) and torch.isfinite(alone).all()
    bare = layer(device, edge_dim=None, node_id=None)
    out = bare(data.x, data.edge_index)
    assert out.shape == (6, 8)


def test_structure_reaches_the_nodes(device):
    # the same node features on two graphs of different structure give
    # different outputs: the edge tokens carry the graph
    conv = layer(device, edge_dim=None)
    x = torch.randn(4, 4, dtype=torch.float64, device=device)
    ids = torch.randn(4, P, dtype=torch.float64, device=device)
    path = torch.tensor([[0, 1, 1, 2, 2, 3], [1, 0, 2, 1, 3, 2]],
                        device=device)
    star = torch.tensor([[0, 1, 0, 2, 0, 3], [1, 0, 2, 0, 3, 0]],
                        device=device)
    assert not torch.allclose(conv(x, path, node_id=ids),
                              conv(x, star, node_id=ids))


def test_gradcheck(device):
    conv = layer(device)
    data = with_ids([random_graph(4, 4, edge_dim=3, device=device)])[0]
    x = data.x.clone().requires_grad_()
    e = data.edge_attr.clone().requires_grad_()
    assert_gradcheck(lambda x, e: conv(x, data.edge_index, e,
                                       node_id=data.node_id), (x, e))


def test_clear_errors():
    conv = layer('cpu')
    data = with_ids([random_graph(5, 6, edge_dim=3)])[0]
    with pytest.raises(ValueError, match="'x' must have shape"):
        conv(data.x[:, :3], data.edge_index, data.edge_attr)
    with pytest.raises(ValueError, match="'edge_attr' must have shape"):
        conv(data.x, data.edge_index)
    with pytest.raises(ValueError, match="'node_id' must have shape"):
        conv(data.x, data.edge_index, data.edge_attr,
             node_id=data.node_id[:, :2])
    with pytest.raises(ValueError, match="'heads'"):
        TokenNodeAttention(4, 6, heads=4)


def test_repr():
    assert repr(TokenNodeAttention(4, 8, heads=2, edge_dim=3)) == (
        "TokenNodeAttention(4, 8, heads=2, edge_dim=3, node_id='laplacian', "
        "attention='softmax')")
