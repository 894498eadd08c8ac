import pytest
import torch

from torch_geometric_hot.data.simplex_candidates import dense_simplices
from torch_geometric_hot.ops.rope import apply_rotary, rotary_matrices
from torch_geometric_hot.ops.simplicial_attention import determinant_logits


def rotated_logits(order, pos, seed=0, base=10.0):
    gen = torch.Generator().manual_seed(seed)
    n, dim = pos.numel(), 3 * (order + 1)
    tensors = [
        torch.randn(n, 2, dim, generator=gen,
                    dtype=torch.float64).to(pos.device)
        for _ in range(order + 1)
    ]
    rotated = [apply_rotary(t, pos, order + 1, base) for t in tensors]
    assert all(r.device == pos.device for r in rotated)
    index = dense_simplices(n, order, pos.new_zeros(n))
    return determinant_logits(rotated[0], rotated[1:], index), index


@pytest.mark.parametrize('order', [1, 2, 3])
def test_rotations_are_special_orthogonal(order, device):
    rot = rotary_matrices(torch.tensor([0, 3, -5], device=device), 4,
                          order + 1)
    eye = torch.eye(order + 1, dtype=torch.float64,
                    device=device).expand_as(rot)
    torch.testing.assert_close(rot @ rot.transpose(-1, -2), eye)
    torch.testing.assert_close(
        torch.linalg.det(rot),
        torch.ones(rot.shape[:2], dtype=torch.float64, device=device))
    torch.testing.assert_close(rot[0], eye[0])  # position 0: identity
    assert not torch.allclose(rot[1], eye[1])


@pytest.mark.parametrize('order', [1, 2, 3])
def test_logits_depend_on_relative_positions_only(order, device):
    pos = torch.tensor([0, 1, 4, 9], device=device)
    logits, _ = rotated_logits(order, pos)
    shifted, _ = rotated_logits(order, pos + 17)
    torch.testing.assert_close(shifted, logits)
    plain, _ = rotated_logits(order, torch.zeros_like(pos))
    assert not torch.allclose(logits, plain)  # positions do matter


def test_order_one_depends_on_the_offset(device):
    # Two nodes at positions (p, p + r): the logit depends on r only.
    for r in [1, 3]:
        seen = []
        for p in [0, 5, -7]:
            logits, index = rotated_logits(
                1, torch.tensor([p, p + r], device=device))
            seen.append(logits[(index[0] == 0) & (index[1] == 1)])
        torch.testing.assert_close(seen[1], seen[0])
        torch.testing.assert_close(seen[2], seen[0])


def test_bad_input():
    x = torch.randn(3, 1, 6)
    with pytest.raises(TypeError, match="'pos'"):
        apply_rotary(x, torch.tensor([0.0, 1.0, 2.0]), 3)
    with pytest.raises(ValueError, match='multiple of the chunk size 4'):
        apply_rotary(x, torch.arange(3), 4)
    with pytest.raises(ValueError, match='one entry per node'):
        apply_rotary(x, torch.arange(2), 3)
