from types import SimpleNamespace

import pytest
import torch

from torch_geometric_hot.testing import assert_gradcheck
from torch_geometric_hot.testing.gradients import CUDA_NONDET_TOL


class WrongBackward(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * x

    @staticmethod
    def backward(ctx, grad):
        return grad  # should be 2 x grad


def test_a_correct_gradient_passes_and_a_wrong_one_raises(device):
    x = torch.randn(4, dtype=torch.float64, device=device,
                    requires_grad=True)
    index = torch.tensor([0, 1, 1, 0], device=device)
    assert_gradcheck(
        lambda x: torch.zeros(2, dtype=x.dtype, device=x.device).index_add(
            0, index, x.sin()), (x, ))
    with pytest.raises(RuntimeError, match='Jacobian mismatch'):
        assert_gradcheck(WrongBackward.apply, (x, ))


@pytest.mark.parametrize('kind', ['cpu', 'cuda'])
def test_reentrancy_tolerance_only_on_cuda(kind, monkeypatch):
    seen = {}

    def gradcheck(fn, inputs, **kwargs):
        seen.update(kwargs)
        return True

    monkeypatch.setattr(torch.autograd, 'gradcheck', gradcheck)
    x = SimpleNamespace(device=torch.device(kind))  # only its device is read
    assert_gradcheck(lambda x: x, (x, ))
    assert seen.get('nondet_tol', 0.0) == (CUDA_NONDET_TOL
                                           if kind == 'cuda' else 0.0)
    assert_gradcheck(lambda x: x, (x, ), nondet_tol=0.5)
    assert seen['nondet_tol'] == 0.5
