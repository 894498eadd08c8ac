import pytest
import torch

from torch_geometric_hot.nn import TokenGTLayer, TokenSelfAttention
from torch_geometric_hot.testing import (assert_gradcheck,
                                         dense_class_attention,
                                         dense_softmax_attention_reference)


def tokens(sizes, device, channels=8, seed=0):
    gen = torch.Generator().manual_seed(seed)
    token_batch = torch.cat([
        torch.full((s, ), g, dtype=torch.long) for g, s in enumerate(sizes)
    ])
    x = torch.randn(token_batch.numel(), channels, generator=gen,
                    dtype=torch.float64)
    return x.to(device), token_batch.to(device), len(sizes)


def test_self_attention_matches_reference(device):
    torch.manual_seed(0)
    module = TokenSelfAttention(8, heads=2).double().to(device)
    x, token_batch, num_graphs = tokens([3, 1, 5], device)
    q, k, v = module.qkv(x).view(-1, 3, 2, 4).unbind(1)
    ref = module.out(
        dense_softmax_attention_reference(q, k, v, token_batch,
                                          num_graphs).reshape(-1, 8))
    torch.testing.assert_close(module(x, token_batch, num_graphs), ref)


def test_performer_self_attention_matches_reference(device):
    # phi(q_t)^T sum_s phi(k_s) v_s / phi(q_t)^T sum_s phi(k_s) over the
    # tokens s of t's graph, graph by graph (its keys: one stabiliser)
    torch.manual_seed(0)
    module = TokenSelfAttention(8, heads=2, attention='performer',
                                seed=0).double().to(device).eval()
    x, token_batch, num_graphs = tokens([3, 1, 5], device)
    q, k, v = module.qkv(x).view(-1, 3, 2, 4).unbind(1)
    expected = torch.empty_like(v)
    for g in range(num_graphs):
        mine = token_batch == g
        expected[mine] = dense_class_attention(
            q[mine], k[mine], v[mine], q.new_ones(int(mine.sum()),
                                                  int(mine.sum())),
            lambda t, is_query: module.feature_map(t, is_query=is_query))
    ref = module.out(expected.reshape(-1, 8))
    torch.testing.assert_close(module(x, token_batch, num_graphs), ref)


@pytest.mark.parametrize('attention', ['softmax', 'performer'])
@pytest.mark.parametrize('layer', [TokenSelfAttention, TokenGTLayer])
def test_gradcheck(attention, layer, device):
    torch.manual_seed(0)
    module = layer(4, heads=2, attention=attention,
                   seed=0).double().to(device).eval()
    x, token_batch, num_graphs = tokens([3, 1, 2], device, channels=4)
    assert_gradcheck(lambda x: module(x, token_batch, num_graphs),
                     (x.requires_grad_(), ))


@pytest.mark.parametrize('attention', ['softmax', 'performer'])
def test_layer_token_permutation_and_graph_independence(attention, device):
    torch.manual_seed(0)
    layer = TokenGTLayer(8, heads=2, attention=attention,
                         seed=0).double().to(device)
    layer.eval()
    x, token_batch, num_graphs = tokens([4, 1, 3], device)
    out = layer(x, token_batch, num_graphs)
    perm = torch.randperm(x.size(0)).to(device)
    torch.testing.assert_close(layer(x[perm], token_batch[perm], num_graphs),
                               out[perm])
    alone = layer(x[token_batch == 2],
                  torch.zeros(3, dtype=torch.long, device=device), 1)
    torch.testing.assert_close(alone, out[token_batch == 2])


def test_drop_path_training_only(device):
    torch.manual_seed(0)
    layer = TokenGTLayer(8, drop_path=0.5).double().to(device)
    x, token_batch, num_graphs = tokens([2] * 20, device)
    layer.eval()
    assert torch.equal(layer(x, token_batch, 20), layer(x, token_batch, 20))
    layer.train()
    out = layer(x, token_batch, 20)
    # Some whole graphs skip both branches (output == input), others not.
    same = [torch.equal(out[token_batch == g], x[token_batch == g])
            for g in range(20)]
    assert any(same) and not all(same)


def test_repr_and_errors():
    assert repr(TokenGTLayer(8, heads=2)) == (
        "TokenGTLayer(8, heads=2, attention='softmax')")
    assert repr(TokenSelfAttention(8, 4, 'performer')) == (
        "TokenSelfAttention(8, heads=4, attention='performer')")
    with pytest.raises(ValueError, match="'drop_path'"):
        TokenGTLayer(8, drop_path=1.0)
