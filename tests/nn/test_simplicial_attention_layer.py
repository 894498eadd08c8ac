import pytest
import torch
from torch_geometric.data import Batch

from torch_geometric_hot.nn import SimplicialAttention
from torch_geometric_hot.testing import (assert_batch_independent,
                                         assert_gradcheck,
                                         assert_permutation_equivariant,
                                         edge_case_graphs, random_graph)
from torch_geometric_hot.testing.simplicial_reference import (
    dense_simplicial_attention)

CANDIDATES = ['dense', 'neighbours', 'walks', 'indexer']


def layer(device=None, **kwargs):
    torch.manual_seed(0)
    options = dict(heads=2, head_channels=6, order=2, k=3)
    options.update(kwargs)
    return SimplicialAttention(8, **options).double().to(device)


def run(module):
    def fn(data):
        return module(data.x, data.edge_index, data.get('batch'),
                      pos=data.get('pos'))

    return fn


@pytest.mark.parametrize('order', [1, 2, 3])
@pytest.mark.parametrize('form', ['multilinear', 'determinant'])
def test_dense_layer_matches_reference(order, form, device):
    module = layer(device, order=order, form=form,
                   head_channels=2 * (order + 1))
    batch = Batch.from_data_list(edge_case_graphs(8, device=device)[:3])
    out = module(batch.x, batch=batch.batch)
    for g in range(batch.num_graphs):
        x = batch.get_example(g).x
        projected = module.lin_qkv(x).view(x.size(0), 1 + 2 * order, 2, -1)
        q, *rest = projected.unbind(1)
        attn = dense_simplicial_attention(q, rest[:order], rest[order:],
                                          form)
        expected = x + module.lin_out(attn.reshape(x.size(0), -1))
        torch.testing.assert_close(out[batch.batch == g], expected)


@pytest.mark.parametrize('candidates', CANDIDATES)
@pytest.mark.parametrize('capacity', [None, 0.6])
def test_permutation_equivariant_and_batch_independent(candidates, capacity,
                                                       device):
    module = layer(device, candidates=candidates, capacity=capacity, k=7)
    data = random_graph(7, 10, num_features=8, seed=3, device=device)
    assert_permutation_equivariant(run(module), data)
    assert_batch_independent(run(module), edge_case_graphs(8, device=device))


def test_indexer_with_few_pairs_is_equivariant_on_tie_free_scores(device):
    module = layer(device, candidates='indexer', k=3)
    with torch.no_grad():  # positive projections: no ReLU ties at zero
        module.indexer.lin.weight.abs_()
        module.indexer.lin.bias.abs_()
    data = random_graph(7, 10, num_features=8, seed=3, device=device)
    data.x = data.x.abs() + 0.1
    assert_permutation_equivariant(run(module), data)


def test_rope_positions_are_used_and_equivariant(device):
    module = layer(device, form='determinant', head_channels=6)
    data = random_graph(6, 8, num_features=8, seed=2, device=device)
    data.pos = torch.tensor([3, 0, 5, 1, 4, 2], device=device)
    assert_permutation_equivariant(run(module), data)
    shifted = module(data.x, pos=data.pos + 11)
    torch.testing.assert_close(shifted, module(data.x, pos=data.pos))
    assert not torch.allclose(shifted, module(data.x))


def test_gradcheck(device):
    module = layer(device, heads=1, head_channels=3, candidates='walks')
    data = random_graph(4, 4, num_features=8, seed=1, device=device)
    x = data.x.clone().requires_grad_()
    assert_gradcheck(lambda x: module(x, data.edge_index), (x, ))


def test_nodes_without_tuples_are_unchanged(device):
    module = layer(device, candidates='neighbours')
    graph = edge_case_graphs(8, device=device)[0]  # node 6 is isolated
    out = module(graph.x, graph.edge_index)
    isolated = torch.tensor([6], device=device)
    torch.testing.assert_close(out[isolated], graph.x[isolated])
    assert torch.isfinite(out).all()


@pytest.mark.parametrize('candidates', CANDIDATES)
def test_empty_input(candidates, device):
    module = layer(device, candidates=candidates, capacity=0.5,
                   indexer_loss='kl')
    x = torch.empty(0, 8, dtype=torch.float64, device=device)
    out = module(x, torch.empty(2, 0, dtype=torch.long, device=device))
    assert out.shape == (0, 8)


@pytest.mark.parametrize('kind', [None, 'kl', 'mse'])
def test_indexer_is_trained_only_by_its_auxiliary_loss(kind, device):
    module = layer(device, candidates='indexer', indexer_loss=kind)
    data = random_graph(6, 8, num_features=8, device=device)
    out = module(data.x)
    loss = out.sum() + (module.aux_loss if kind else 0.0)
    loss.backward()
    grad = module.indexer.lin.weight.grad
    if kind is None:
        assert module.aux_loss is None and grad is None
    else:
        assert module.aux_loss.dim() == 0 and grad.abs().sum() > 0


def test_given_simplex_index_and_routing_restricts_tuples(device):
    module = layer(device, capacity=0.5)
    data = random_graph(6, 8, num_features=8, device=device)
    index = torch.tensor([[0, 1, 2, 5], [1, 2, 3, 4], [2, 0, 1, 3]],
                         device=device)
    out = module(data.x, simplex_index=index)
    routed, _ = module.router(data.x)
    untouched = torch.ones(6, dtype=torch.bool, device=device)
    untouched[routed] = False
    torch.testing.assert_close(out[untouched], data.x[untouched])
    assert routed.numel() == 3


def test_bad_input_and_repr():
    module = layer(candidates='walks', capacity=0.5)
    x = torch.randn(4, 8, dtype=torch.float64)
    assert repr(module) == ("SimplicialAttention(8, heads=2, order=2, "
                            "form='multilinear', candidates='walks', "
                            "capacity=0.5)")
    with pytest.raises(ValueError, match="needs 'edge_index'"):
        module(x)
    with pytest.raises(ValueError, match="'x' must have 8 channels"):
        module(x[:, :3])
    with pytest.raises(ValueError, match="'simplex_index'.*\\[0, 4\\)"):
        module(x, simplex_index=torch.tensor([[0], [1], [4]]))
    with pytest.raises(ValueError, match="'pos'.*determinant"):
        module(x, torch.empty(2, 0, dtype=torch.long), pos=torch.arange(4))
    with pytest.raises(ValueError, match='multiple of N\\+1 = 3'):
        SimplicialAttention(8, heads=2, form='determinant')
    with pytest.raises(ValueError, match="'candidates'"):
        SimplicialAttention(8, candidates='all')
    with pytest.raises(ValueError, match="'order'"):
        SimplicialAttention(8, order=0)
