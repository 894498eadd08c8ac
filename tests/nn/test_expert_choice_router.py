import math

import pytest
import torch

from torch_geometric_hot.nn import ExpertChoiceRouter
from torch_geometric_hot.nn.expert_choice_router import (
    top_fraction_per_graph)


@pytest.mark.parametrize('capacity', [0.1, 0.5, 0.75, 1.0])
def test_top_fraction_per_graph_matches_brute_force(capacity, device):
    sizes = [5, 1, 4, 2]
    batch = torch.repeat_interleave(torch.arange(4), torch.tensor(sizes))
    score = torch.randn(sum(sizes), generator=torch.Generator().manual_seed(0))
    index = top_fraction_per_graph(score.to(device), batch.to(device),
                                   capacity)
    assert index.device == score.to(device).device
    expected, start = [], 0
    for size in sizes:
        quota = max(1, math.ceil(capacity * size))
        best = score[start:start + size].argsort(descending=True)[:quota]
        expected += (best + start).tolist()
        start += size
    assert index.tolist() == sorted(expected)


def test_router_gates_routed_nodes_and_is_trained(device):
    torch.manual_seed(0)
    router = ExpertChoiceRouter(4, capacity=0.5).double().to(device)
    x = torch.randn(6, 4, dtype=torch.float64).to(device)
    batch = torch.tensor([0, 0, 0, 0, 1, 1], device=device)
    index, gate = router(x, batch)
    assert index.numel() == 2 + 1
    update = torch.ones(index.numel(), 4, dtype=torch.float64, device=device)
    out = ExpertChoiceRouter.combine(x, index, gate, update)
    rest = torch.ones(6, dtype=torch.bool, device=device)
    rest[index] = False
    assert torch.equal(out[rest], x[rest])
    torch.testing.assert_close(
        gate, router.lin(x).squeeze(-1).sigmoid()[index])
    torch.testing.assert_close(out[index] - x[index],
                               gate.unsqueeze(-1).expand(-1, 4))
    out.sum().backward()
    assert router.lin.weight.grad.abs().sum() > 0


def test_identity_gate_is_the_score_and_equivariance(device):
    torch.manual_seed(0)
    router = ExpertChoiceRouter(4, capacity=0.5,
                                gate='identity').double().to(device)
    x = torch.randn(7, 4, dtype=torch.float64).to(device)
    index, gate = router(x)
    torch.testing.assert_close(gate, router.lin(x).squeeze(-1)[index])
    perm = torch.randperm(7).to(device)
    permuted, _ = router(x[perm])
    assert sorted(perm[permuted].tolist()) == index.tolist()


def test_bad_arguments_and_repr():
    with pytest.raises(ValueError, match="'capacity'"):
        ExpertChoiceRouter(4, capacity=0.0)
    with pytest.raises(ValueError, match="'capacity'"):
        ExpertChoiceRouter(4, capacity=1.5)
    with pytest.raises(ValueError, match="'gate'"):
        ExpertChoiceRouter(4, gate='softmax')
    assert repr(ExpertChoiceRouter(4)) == (
        "ExpertChoiceRouter(4, capacity=0.5, gate='sigmoid')")
