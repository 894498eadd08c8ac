import pytest
import torch

from torch_geometric_hot.models import TokenGT
from torch_geometric_hot.nn import (AttentionRecorder, TokenGTEncoder,
                                    TokenSelfAttention)
from torch_geometric_hot.nn.token_self_attention import same_graph_pairs


def _batch(seed=0):
    gen = torch.Generator().manual_seed(seed)
    sizes = [3, 5, 1, 4]
    edges, batch, start = [], [], 0
    for g, n in enumerate(sizes):
        for i in range(n - 1):  # a path, both directions
            edges += [(start + i, start + i + 1), (start + i + 1, start + i)]
        batch += [g] * n
        start += n
    edge_index = torch.tensor(edges).t()
    x = torch.randn(start, 6, generator=gen, dtype=torch.float64)
    edge_attr = torch.randn(edge_index.size(1), 3, generator=gen,
                            dtype=torch.float64)
    return x, edge_index, edge_attr, torch.tensor(batch), len(sizes)


def _model(attention):
    torch.manual_seed(0)
    return TokenGT(6, 16, 1, 2, heads=4, edge_dim=3, attention=attention,
                   node_id='laplacian', seed=0).double().eval()


def _inputs_and_outputs(model):
    seen = []
    handles = [m.register_forward_hook(
        lambda mod, args, out: seen.append((mod, args, out)))
        for m in model.modules() if isinstance(m, TokenSelfAttention)]
    return seen, handles


def test_pairs_are_every_ordered_pair_within_a_graph():
    token_batch = torch.tensor([1, 0, 1, 2, 0, 1])
    index = same_graph_pairs(token_batch, 3)
    expected = {(t, s) for t in range(6) for s in range(6)
                if token_batch[t] == token_batch[s]}
    assert set(map(tuple, index.t().tolist())) == expected
    assert index.size(1) == len(expected)
    assert bool((index[0][1:] >= index[0][:-1]).all())  # grouped by query


@pytest.mark.parametrize('attention', ['softmax', 'performer'])
def test_recorded_weights_are_the_attention_the_forward_pass_applies(
        attention):
    model = _model(attention)
    x, edge_index, edge_attr, batch, num_graphs = _batch()
    seen, handles = _inputs_and_outputs(model)
    with AttentionRecorder(model) as recorder:
        model(x, edge_index, edge_attr, batch, num_graphs=num_graphs)
    for h in handles:
        h.remove()
    assert [name for name, _ in recorder.records] == recorder.layers == [
        'encoder.layers.0.attn', 'encoder.layers.1.attn']
    for (name, weights), (module, args, out) in zip(recorder.records, seen):
        tokens, token_batch, _ = args[:3]
        heads, d = module.heads, module.channels // module.heads
        q, k, v = module.qkv(tokens).view(-1, 3, heads, d).unbind(1)
        query, key = weights.index
        # per head, the weights of a query sum to one
        sums = torch.zeros(tokens.size(0), heads, dtype=torch.float64)
        sums.index_add_(0, query, weights.weight)
        assert torch.allclose(sums, torch.ones_like(sums))
        # the weights times the values, through the output projection, are
        # the layer's output
        mixed = torch.zeros(tokens.size(0), heads, d, dtype=torch.float64)
        mixed.index_add_(0, query, weights.weight.unsqueeze(-1) * v[key])
        assert torch.allclose(module.out(mixed.reshape(tokens.size(0), -1)),
                              out, atol=1e-10), name
        if attention != 'softmax':
            continue
        # a dense reference: softmax(q k^T / sqrt(d)) graph by graph
        for g in range(int(token_batch.max()) + 1):
            mine = (token_batch == g).nonzero().view(-1)
            dense = torch.softmax(torch.einsum('thd,shd->hts', q[mine],
                                               k[mine]) / d**0.5, dim=-1)
            got = torch.zeros_like(dense)
            pick = token_batch[query] == g
            where = {int(t): i for i, t in enumerate(mine)}
            rows = torch.tensor([where[int(t)] for t in query[pick]])
            cols = torch.tensor([where[int(s)] for s in key[pick]])
            got[:, rows, cols] = weights.weight[pick].t()
            assert torch.allclose(got, dense, atol=1e-12), (name, g)


def test_no_hook_outside_the_context_and_clear_errors():
    model = _model('softmax')
    layers = [m for m in model.modules()
              if isinstance(m, TokenSelfAttention)]
    recorder = AttentionRecorder(model)
    with recorder:
        assert all(len(m._forward_hooks) == 1 for m in layers)
    assert all(len(m._forward_hooks) == 0 for m in layers)
    x, edge_index, edge_attr, batch, num_graphs = _batch()
    model(x, edge_index, edge_attr, batch, num_graphs=num_graphs)
    assert recorder.records == []
    with pytest.raises(ValueError, match='no TokenSelfAttention'):
        AttentionRecorder(torch.nn.Linear(2, 2))


def test_recording_leaves_the_output_unchanged():
    encoder = TokenGTEncoder(6, 16, 2, heads=2, edge_dim=3, seed=0,
                             node_id='laplacian').double().eval()
    x, edge_index, edge_attr, batch, num_graphs = _batch(1)
    plain = encoder(x, edge_index, edge_attr, batch, num_graphs=num_graphs)
    with AttentionRecorder(encoder) as recorder:
        again = encoder(x, edge_index, edge_attr, batch,
                        num_graphs=num_graphs)
    assert torch.equal(plain.graph, again.graph)
    assert len(recorder.records) == 2
