import math

import pytest
import torch

from torch_geometric_hot.analysis import (WithoutResidual, local_lipschitz,
                                          simplicial_lipschitz_bound)
from torch_geometric_hot.nn import SimplicialAttention


def ball_point(n, channels, radius, gen):
    r"""Tokens with norms uniform in [0, R] (some on the sphere)."""
    x = torch.randn(n, channels, generator=gen, dtype=torch.double)
    norms = radius * torch.rand(n, 1, generator=gen, dtype=torch.double)
    norms[0] = radius
    return x / x.norm(dim=1, keepdim=True) * norms


def theorem_3_7(n, order, d, value_norm, key_norm, radius):
    return (n * math.sqrt(2 * n) * order * value_norm**order *
            radius**(order - 1) *
            math.sqrt(1 + d * order**2 * (key_norm * radius)**(2 *
                                                               (order + 1))))


@pytest.mark.parametrize('order', [1, 2, 3])
def test_bound_is_the_theorem_for_one_head_without_bias(order):
    torch.manual_seed(order)
    d = 4
    layer = SimplicialAttention(d, heads=1, order=order).double()
    with torch.no_grad():
        layer.lin_qkv.bias.zero_()
        layer.lin_out.weight.copy_(torch.eye(d))
    blocks = layer.lin_qkv.weight.detach().view(1 + 2 * order, d, d)
    spectral = torch.linalg.matrix_norm(blocks, 2)
    key_norm = float(spectral[:order + 1].max())
    value_norm = float(spectral[order + 1:].max())
    for radius in [0.0, 0.3, 1.0, 2.5]:
        expected = theorem_3_7(7, order, d, value_norm, key_norm, radius)
        assert math.isclose(
            simplicial_lipschitz_bound(layer, radius, 7, residual=False),
            expected, rel_tol=1e-12)
        assert math.isclose(simplicial_lipschitz_bound(layer, radius, 7),
                            1 + expected, rel_tol=1e-12)


def test_bound_vanishes_as_radius_shrinks_only_for_higher_orders():
    values = {}
    for order in [1, 2, 3]:
        torch.manual_seed(0)
        layer = SimplicialAttention(6, heads=2, order=order).double()
        with torch.no_grad():
            layer.lin_qkv.bias.zero_()
        values[order] = [
            simplicial_lipschitz_bound(layer, r, 5, residual=False)
            for r in (1e-2, 1e-4)
        ]
    assert values[1][1] > 0.5 * values[1][0] > 0  # a constant term
    for order in [2, 3]:
        assert values[order][1] < 1e-2**(order - 1) * values[order][0] * 1.01


def test_local_lipschitz_matches_the_jacobian_norm():
    torch.manual_seed(0)
    layer = SimplicialAttention(6, heads=2, order=2).double()
    x = torch.randn(5, 6, dtype=torch.double)
    jac = torch.autograd.functional.jacobian(layer, x).reshape(30, 30)
    exact = float(torch.linalg.matrix_norm(jac, 2))
    gen = torch.Generator().manual_seed(0)
    estimate = local_lipschitz(layer, x, iterations=300, tol=0,
                               generator=gen)
    assert estimate <= exact * (1 + 1e-12)
    assert math.isclose(estimate, exact, rel_tol=1e-6)
    # A linear map: the estimate is its largest singular value.
    matrix = torch.randn(6, 6, dtype=torch.double)
    linear = local_lipschitz(lambda z: z @ matrix, x, iterations=300, tol=0)
    assert math.isclose(linear, float(torch.linalg.matrix_norm(matrix, 2)),
                        rel_tol=1e-6)


@pytest.mark.parametrize('order', [1, 2, 3])
def test_empirical_constant_never_exceeds_the_bound(order):
    gen = torch.Generator().manual_seed(order)
    for seed in range(10):
        torch.manual_seed(100 * order + seed)
        n, heads = int(torch.randint(1, 6, ())), int(torch.randint(1, 3, ()))
        layer = SimplicialAttention(6, heads=heads, head_channels=3,
                                    order=order).double()
        with torch.no_grad():  # larger weights than the default, too
            for p in layer.parameters():
                p.mul_(1 + 2 * torch.rand((), generator=gen))
        pure = WithoutResidual(layer)
        for radius in [0.05, 0.5, 1.0, 2.0]:
            x = ball_point(n, 6, radius, gen)
            with_skip = local_lipschitz(layer, x, iterations=100,
                                        generator=gen)
            without = local_lipschitz(pure, x, iterations=100, generator=gen)
            assert with_skip <= simplicial_lipschitz_bound(layer, radius, n)
            assert without <= simplicial_lipschitz_bound(
                layer, radius, n, residual=False)


def test_bound_outside_the_theorem_raises():
    with pytest.raises(ValueError, match='masked.*neighbours'):
        simplicial_lipschitz_bound(
            SimplicialAttention(6, order=2, candidates='neighbours'), 1.0, 4)
    with pytest.raises(ValueError, match='RoPE'):
        simplicial_lipschitz_bound(
            SimplicialAttention(6, order=2, form='determinant'), 1.0, 4)
    with pytest.raises(ValueError, match='router'):
        simplicial_lipschitz_bound(
            SimplicialAttention(6, order=2, capacity=0.5), 1.0, 4)
    with pytest.raises(TypeError, match='SimplicialAttention'):
        simplicial_lipschitz_bound(torch.nn.Linear(3, 3), 1.0, 4)
    layer = SimplicialAttention(6, order=2)
    with pytest.raises(ValueError, match="'radius'"):
        simplicial_lipschitz_bound(layer, -1.0, 4)
    with pytest.raises(ValueError, match="'num_tokens'"):
        simplicial_lipschitz_bound(layer, 1.0, 0)
    with pytest.raises(TypeError, match="'x'"):
        local_lipschitz(layer, torch.zeros(3, 6, dtype=torch.long))
    with pytest.raises(ValueError, match="'iterations'"):
        local_lipschitz(layer, torch.zeros(3, 6), iterations=0)
    with pytest.raises(ValueError, match="input's shape"):
        WithoutResidual(torch.nn.Linear(6, 2))(torch.zeros(3, 6))


def test_local_lipschitz_of_a_constant_function_is_zero():
    x = torch.randn(3, 2, dtype=torch.double)
    assert local_lipschitz(lambda z: torch.ones(4), x) == 0.0
    assert local_lipschitz(lambda z: 0 * z, x) == 0.0
