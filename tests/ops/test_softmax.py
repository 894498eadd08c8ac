import pytest
import torch

from torch_geometric_hot.ops import grouped_softmax
from torch_geometric_hot.ops.softmax import grouped_log_softmax


def _inputs(device):
    gen = torch.Generator().manual_seed(0)
    # groups 0..4; group 3 has no row; group 1 has one row
    group = torch.tensor([0, 2, 0, 1, 2, 2, 4, 0, 4]).to(device)
    logits = (10 * torch.randn(group.numel(), 3, generator=gen,
                               dtype=torch.float64)).to(device)
    return logits, group


def test_grouped_softmax_is_the_softmax_of_each_group(device):
    logits, group = _inputs(device)
    alpha = grouped_softmax(logits, group, 5)
    for g in range(5):
        rows = group == g
        if rows.any():
            torch.testing.assert_close(alpha[rows],
                                       logits[rows].softmax(dim=0))
    assert torch.isfinite(alpha).all()


def test_group_of_the_wrong_length_is_an_error(device):
    logits, group = _inputs(device)
    with pytest.raises(ValueError, match="'group' must have one entry"):
        grouped_softmax(logits, group[:-1], 5)


def test_log_sum_exp_and_log_softmax_of_each_group(device):
    logits, group = _inputs(device)
    alpha, lse = grouped_softmax(logits, group, 5, return_lse=True)
    assert torch.equal(alpha, grouped_softmax(logits, group, 5))
    torch.testing.assert_close(grouped_log_softmax(logits, group, 5),
                               alpha.log())
    for g in range(5):
        rows = group == g
        expected = logits[rows].logsumexp(0) if rows.any() else \
            torch.full((3, ), -float('inf'), dtype=logits.dtype)
        torch.testing.assert_close(lse[g], expected.to(device))
