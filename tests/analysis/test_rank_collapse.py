import pytest
import torch

from torch_geometric_hot.analysis import (WithoutResidual,
                                          layerwise_token_residual,
                                          token_residual)
from torch_geometric_hot.nn import SimplicialAttention

NORMS = ['fro', '1,inf']


@pytest.mark.parametrize('norm', NORMS)
def test_zero_exactly_on_equal_tokens(norm):
    row = torch.randn(1, 5, dtype=torch.double)
    other = torch.randn(1, 5, dtype=torch.double)
    x = torch.cat([row.repeat(4, 1), other.repeat(3, 1)])
    batch = torch.tensor([0] * 4 + [1] * 3)
    assert token_residual(x, batch, norm).abs().max() == 0
    assert token_residual(x, None, norm) > 0.1  # two distinct rows
    assert token_residual(x, batch, norm, relative=True).abs().max() == 0


def test_frobenius_is_the_distance_to_the_closest_equal_rows():
    torch.manual_seed(0)
    x = torch.randn(6, 3, dtype=torch.double)
    # min_u ||X - 1 u^T||_F by least squares on the stacked columns.
    ones = torch.ones(6, 1, dtype=torch.double)
    u = torch.linalg.lstsq(ones, x).solution
    expected = torch.linalg.matrix_norm(x - ones @ u)
    assert torch.allclose(token_residual(x), expected.view(1))
    shifted = x.clone()
    shifted[0] += 1.0
    assert token_residual(shifted) > 0


def test_one_inf_is_an_upper_bound_close_to_the_minimum():
    torch.manual_seed(1)
    x = torch.randn(5, 3, dtype=torch.double)

    value = token_residual(x, norm='1,inf')
    grid = torch.stack(torch.meshgrid(*[torch.linspace(-2, 2, 41)] * 3,
                                      indexing='ij'), -1).view(-1, 1, 3)
    m = (x - grid.double()).abs()  # [grid, 5, 3]
    best = float((m.sum(1).amax(1) * m.sum(2).amax(1)).sqrt().min())
    assert best - 1e-12 <= float(value) <= 1.5 * best


@pytest.mark.parametrize('norm', NORMS)
def test_permutation_invariant(norm):
    torch.manual_seed(2)
    x = torch.randn(9, 4, dtype=torch.double)
    batch = torch.tensor([0, 0, 0, 0, 1, 1, 2, 2, 2])
    perm = torch.randperm(9)
    expected = token_residual(x, batch, norm)
    assert torch.allclose(token_residual(x[perm], batch[perm], norm),
                          expected)


def test_relative_is_scale_invariant_and_empty_graphs_are_zero():
    torch.manual_seed(3)
    x = torch.randn(4, 2, dtype=torch.double)
    batch = torch.tensor([0, 0, 2, 2])
    out = token_residual(x, batch, relative=True)
    assert out[1] == 0
    assert torch.allclose(token_residual(7.5 * x, batch, relative=True), out)
    assert token_residual(torch.zeros(3, 2), relative=True) == 0


def test_bad_input():
    with pytest.raises(ValueError, match="'norm'"):
        token_residual(torch.randn(3, 2), norm='spectral')
    with pytest.raises(ValueError, match="2-dimensional"):
        token_residual(torch.randn(3))
    with pytest.raises(ValueError, match="'batch'"):
        token_residual(torch.randn(3, 2), torch.tensor([0, 1]))
    with pytest.raises(ValueError, match='layer 0'):
        layerwise_token_residual([lambda h: h[:1]], torch.randn(3, 2))


def pure_stack(order, depth, candidates='dense', seed=0):
    torch.manual_seed(seed)
    return [
        WithoutResidual(
            SimplicialAttention(16, heads=1, order=order,
                                candidates=candidates,
                                include_self=True)).double()
        for _ in range(depth)
    ]


@pytest.mark.parametrize('order', [1, 2, 3])
@pytest.mark.parametrize('seed', range(4))
def test_decreases_across_pure_attention_stack(order, seed):
    # Theorem 3.1's regime: no skip, no normalisation, small weights (the
    # default initialisation, |W| ~ 1/sqrt(C)) and tokens of norm ~ 4.
    layers = pure_stack(order, 5, seed=seed)
    x = torch.randn(12, 16, dtype=torch.double)
    for norm in NORMS:
        res = layerwise_token_residual(layers, x, norm=norm)[:, 0]
        above_floor = res[res > 1e-12]
        assert above_floor.numel() >= 3
        assert (above_floor[1:] < above_floor[:-1]).all(), res
        assert res[-1] < 1e-10


@pytest.mark.parametrize('order', [1, 2])
def test_decreases_with_a_mask_on_a_connected_graph(order):
    # Theorem 3.4: walks on a connected graph with self-loops form a
    # quasi-strongly connected hypergraph; collapse is exponential.
    n = 10
    ring = torch.arange(n)
    edge_index = torch.stack([torch.cat([ring, (ring + 1) % n]),
                              torch.cat([(ring + 1) % n, ring])])
    layers = pure_stack(order, 8, candidates='walks')
    x = torch.randn(n, 16, dtype=torch.double)
    res = layerwise_token_residual(
        layers, x, forward=lambda layer, h: layer(h, edge_index))[:, 0]
    above_floor = res[res > 1e-12]
    assert (above_floor[1:] < above_floor[:-1]).all(), res
    assert res[-1] < 1e-3 * res[0]


def test_residual_with_layer_norm_does_not_collapse():
    torch.manual_seed(0)
    layers = [
        torch.nn.Sequential(SimplicialAttention(16, heads=1, order=2),
                            torch.nn.LayerNorm(16)).double()
        for _ in range(8)
    ]
    x = torch.randn(12, 16, dtype=torch.double)
    res = layerwise_token_residual(layers, x)[:, 0]
    assert res.min() > 0.5
