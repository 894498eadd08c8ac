import pytest
import torch
from torch_geometric.data import Batch

from torch_geometric_hot.testing import chain_molecule
from torch_geometric_hot.train.gated_gcn import GatedGCNConv

pytest.importorskip('ogb')

from torch_geometric_hot.train.zoo import MODELS, Settings  # noqa: E402


def _dense_gated(conv, x, edge_index, edge_attr):
    # the formula, one node and one edge at a time
    a, b, c, d, e = (conv.lin_a, conv.lin_b, conv.lin_c, conv.lin_d,
                     conv.lin_e)
    out = []
    for i in range(x.size(0)):
        num = torch.zeros(x.size(1), dtype=x.dtype)
        den = torch.zeros(x.size(1), dtype=x.dtype)
        for k in range(edge_index.size(1)):
            j, t = edge_index[:, k].tolist()
            if t != i:
                continue
            gate = torch.sigmoid(d(x[i]) + e(x[j]) + c(edge_attr[k]))
            num, den = num + gate * b(x[j]), den + gate
        out.append(a(x[i]) + num / (den + conv.eps))
    return torch.stack(out)


def test_gated_gcn_matches_its_formula_and_is_equivariant():
    torch.manual_seed(0)
    conv = GatedGCNConv(6).double()
    x = torch.randn(5, 6, dtype=torch.double)
    edge_index = torch.tensor([[0, 1, 1, 2, 3, 4, 0], [1, 0, 2, 1, 4, 3, 2]])
    edge_attr = torch.randn(7, 6, dtype=torch.double)
    out = conv(x, edge_index, edge_attr)
    assert torch.allclose(out, _dense_gated(conv, x, edge_index, edge_attr))
    perm = torch.randperm(5)
    inverse = perm.argsort()
    permuted = conv(x[perm], inverse[edge_index], edge_attr)
    assert torch.allclose(permuted, out[perm])
    with pytest.raises(ValueError, match="'edge_attr'"):
        conv(x, edge_index, edge_attr[:3])


@pytest.mark.parametrize('model,options', [
    ('gin', (('pooling', 'sum'), ('virtual_node', True))),
    ('gps', (('attention_dropout', 0.1), ('conv', 'gatedgcn'),
             ('head_layers', 2))),
])
def test_preset_options_keep_graphs_independent(model, options):
    # OGB's virtual node and GraphGPS's blocks: in evaluation mode a
    # molecule's prediction does not depend on the others of its batch
    torch.manual_seed(0)
    net = MODELS[model].build(Settings(16, 3, 1, 0.1, 0, 4, 16, options))
    net.eval()
    graphs = [chain_molecule(n, n) for n in (3, 5, 4)]
    batch = Batch.from_data_list(graphs)
    together = net(batch.x, batch.edge_index, batch.edge_attr, batch.batch,
                   num_graphs=3)
    for k, g in enumerate(graphs):
        alone = net(g.x, g.edge_index, g.edge_attr,
                    torch.zeros(g.num_nodes, dtype=torch.long), num_graphs=1)
        assert torch.allclose(alone, together[k:k + 1], atol=1e-5)


def test_hot_final_block_heads_and_tokengt_options():
    hot = MODELS['hot-kernel'].build(Settings(
        32, 2, 1, 0.0, 0, 4, 16, (('head_channels', 8), ('last_heads', 6),
                                  ('last_head_channels', 4))))
    assert [(layer.attn.heads, layer.attn.head_channels)
            for layer in hot.layers] == [(4, 8), (4, 8), (6, 4)]
    options = (('norm', 'layer'), ('readout_norm', 'layer'),
               ('size_scaler', 'log'))
    variant = MODELS['hot-softmax'].build(Settings(16, 1, 1, 0.0, 0, 4, 16,
                                                   options))
    assert isinstance(variant.norm, torch.nn.LayerNorm)
    assert all(layer.norm == 'layer' and layer.attn.size_scaler == 'log'
               for layer in variant.layers)
    tokengt = MODELS['tokengt-lap'].build(Settings(
        32, 2, 1, 0.0, 0, 8, 16, (('drop_path', 0.1), ('ffn_ratio', 1.0),
                                  ('feature_vocabulary', 512))))
    layer = tokengt.encoder.layers[-1]
    assert layer.ffn_in.out_features == 32 and layer.drop_path == 0.1
    assert tokengt.node_encoder.cardinalities == [512] * 9
