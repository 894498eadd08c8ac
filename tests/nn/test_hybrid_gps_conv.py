import pytest
import torch
from torch_geometric.data import Batch
from torch_geometric.nn import GINEConv, GPSConv
from torch_geometric.utils import to_dense_batch

from torch_geometric_hot.nn import HOTNodeConv, HybridGPSConv, \
    TokenNodeAttention
from torch_geometric_hot.testing import (assert_batch_independent,
                                         assert_gradcheck,
                                         assert_permutation_equivariant,
                                         edge_case_graphs, random_graph)

C, D = 4, 3


class NodeAttention(torch.nn.Module):
    r"""GPSConv's global block (multi-head attention over the nodes of each
    graph) behind the interface HybridGPSConv calls."""
    def __init__(self, attn: torch.nn.MultiheadAttention):
        super().__init__()
        self.attn = attn

    def forward(self, x, edge_index, edge_attr, batch, num_graphs=None):
        h, mask = to_dense_batch(x, batch)
        h, _ = self.attn(h, h, h, key_padding_mask=~mask, need_weights=False)
        return h[mask]


def gine() -> GINEConv:
    return GINEConv(torch.nn.Sequential(torch.nn.Linear(C, C),
                                        torch.nn.ReLU(),
                                        torch.nn.Linear(C, C)), edge_dim=D)


def global_block(name: str, device) -> torch.nn.Module:
    if name == 'hot':
        return HOTNodeConv(C, C, heads=2, edge_dim=D, attention='softmax')
    if name == 'hot-kernel':
        return HOTNodeConv(C, C, heads=2, edge_dim=D, attention='kernel',
                           seed=0)
    return TokenNodeAttention(C, C, heads=2, edge_dim=D, node_id_dim=3)


def layer(name: str, device, norm='batch_norm') -> HybridGPSConv:
    torch.manual_seed(0)
    conv = HybridGPSConv(C, gine(), global_block(name, device), dropout=0.2,
                         norm=norm).double().to(device)
    # non-trivial running statistics for the eval-mode oracles
    batch = Batch.from_data_list(graphs(device))
    conv.train()
    call(conv)(batch)
    return conv.eval()


def graphs(device):
    out = edge_case_graphs(num_features=C, edge_dim=D, device=device)
    gen = torch.Generator().manual_seed(1)
    for g in out:
        g.node_id = torch.randn(g.num_nodes, 3, generator=gen,
                                dtype=torch.float64).to(device)
    return out


def call(conv):
    def run(d):
        kwargs = {'node_id': d.node_id} if isinstance(
            conv.attn, TokenNodeAttention) else {}
        return conv(d.x, d.edge_index, d.batch, d.edge_attr, **kwargs)
    return run


@pytest.mark.parametrize('training', [False, True])
def test_equals_pyg_gpsconv_with_its_attention_as_global_block(training):
    torch.manual_seed(0)
    ref = GPSConv(C, gine(), heads=2, dropout=0.0).double()
    ours = HybridGPSConv(C, gine(), NodeAttention(
        torch.nn.MultiheadAttention(C, 2, batch_first=True)),
        dropout=0.0).double()
    ours.conv.load_state_dict(ref.conv.state_dict())
    ours.attn.attn.load_state_dict(ref.attn.state_dict())
    ours.mlp.load_state_dict(ref.mlp.state_dict())
    for k in (1, 2, 3):
        getattr(ours, f'norm{k}').load_state_dict(
            getattr(ref, f'norm{k}').state_dict())
    batch = Batch.from_data_list(graphs('cpu'))
    ref.train(training), ours.train(training)
    expected = ref(batch.x, batch.edge_index, batch.batch,
                   edge_attr=batch.edge_attr)
    out = ours(batch.x, batch.edge_index, batch.batch, batch.edge_attr)
    torch.testing.assert_close(out, expected)


@pytest.mark.parametrize('name', ['hot', 'hot-kernel', 'tokengt'])
def test_equivariant_and_batch_independent(name, device):
    conv = layer(name, device)
    data = graphs(device)
    assert_permutation_equivariant(call(conv), data[0], 'node')
    assert_batch_independent(call(conv), data, 'node')
    assert torch.isfinite(call(conv)(Batch.from_data_list(data))).all()


def test_without_local_block_or_norm(device):
    torch.manual_seed(0)
    conv = HybridGPSConv(C, None, global_block('hot', device),
                         norm=None).double().to(device)
    data = graphs(device)[0]
    x = data.x
    attn = conv.attn(x, data.edge_index, data.edge_attr)
    h = x + attn
    torch.testing.assert_close(call(conv)(data), h + conv.mlp(h))


@pytest.mark.parametrize('name', ['hot', 'hot-kernel', 'tokengt'])
def test_gradcheck(name, device):
    conv = layer(name, device, norm='layer_norm')
    # 4 nodes, a self-loop and a duplicate edge: key groups of several
    # keys (on 2 nodes every group of HOT's has at most one)
    data = graphs(device)[4]
    x = data.x.clone().requires_grad_()
    e = data.edge_attr.clone().requires_grad_()
    kwargs = {'node_id': data.node_id} if name == 'tokengt' else {}
    assert_gradcheck(lambda x, e: conv(x, data.edge_index, None, e,
                                       **kwargs), (x, e))


def test_clear_errors():
    data = random_graph(5, 6, C, D)
    with pytest.raises(TypeError, match="'attn' must be a torch.nn.Module"):
        HybridGPSConv(C, gine(), 'hot')
    with pytest.raises(ValueError, match="'dropout'"):
        HybridGPSConv(C, gine(), global_block('hot', 'cpu'), dropout=1.0)
    conv = HybridGPSConv(C, gine(), global_block('hot', 'cpu')).double()
    with pytest.raises(ValueError, match="'x' must be floating point"):
        conv(data.x[:, :2], data.edge_index, None, data.edge_attr)
    # checked before the local block, which would fail inside torch
    with pytest.raises(TypeError, match="'x' has dtype torch.float32 but "
                       "the layer's parameters are torch.float64"):
        conv(data.x.float(), data.edge_index, None, data.edge_attr)
    for edge_attr in (data.edge_attr[:4], data.edge_attr.float(),
                      data.edge_attr.long()):
        with pytest.raises(ValueError, match="'edge_attr' must be floating "
                           "point of dtype torch.float64 \\(that of 'x'\\) "
                           "with one row per edge \\(12\\)"):
            conv(data.x, data.edge_index, None, edge_attr)
    wide = HybridGPSConv(C, gine(), HOTNodeConv(C, 2 * C, edge_dim=D))
    with pytest.raises(ValueError, match="'attn' must map node features"):
        wide.double()(data.x, data.edge_index, None, data.edge_attr)


def test_repr():
    conv = HybridGPSConv(C, None, HOTNodeConv(C, C, heads=2, edge_dim=D))
    assert repr(conv) == (
        "HybridGPSConv(4, conv=None, attn=HOTNodeConv(4, 4, heads=2, "
        "attention='kernel', edge_dim=3))")
