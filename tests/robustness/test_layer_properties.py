r"""Properties of every public layer on random graphs (see
:mod:`robust_graphs`): permutation equivariance and batch independence in
float64, unsorted batches, finite outputs and gradients for inputs up to
:math:`|x| = 10^4` in float32, and bfloat16 autocast close to float32."""
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from torch_geometric.data import Batch

from torch_geometric_hot.testing import (assert_batch_independent,
                                         assert_permutation_equivariant)

from robust_cases import CASES, make, prepare
from robust_graphs import batches, graphs, shuffled_batch

IDS = [case.name for case in CASES]
#: bfloat16 keeps 8 bits of mantissa: outputs of magnitude ~1 agree with
#: float32 to within this (absolute, after the layers' normalisations)
BF16_TOLERANCE = 0.25


@pytest.mark.parametrize('case', CASES, ids=IDS)
@given(data=graphs(), seed=st.integers(0, 2**16))
def test_permutation_equivariant(case, data, seed):
    layer = make(case, tie_free=True)
    with torch.no_grad():
        assert_permutation_equivariant(lambda d: layer_run(case, layer, d),
                                       prepare(data, case), case.levels,
                                       seed=seed)


@pytest.mark.parametrize('case', CASES, ids=IDS)
@given(data_list=batches())
def test_batch_independent(case, data_list):
    layer = make(case)
    with torch.no_grad():
        assert_batch_independent(lambda d: layer_run(case, layer, d),
                                 [prepare(d, case) for d in data_list],
                                 case.levels)


@pytest.mark.parametrize('case', CASES, ids=IDS)
@given(data_list=batches(), seed=st.integers(0, 2**16))
def test_unsorted_batch(case, data_list, seed):
    layer = make(case)
    batch, shuffled, perm = shuffled_batch(
        [prepare(d, case) for d in data_list], seed)
    is_sorted = bool((shuffled.batch[1:] >= shuffled.batch[:-1]).all())
    with torch.no_grad():
        if case.sorted_batch and not is_sorted:
            with pytest.raises(ValueError, match="'batch' must be sorted"):
                layer_run(case, layer, shuffled)
            return
        expected = layer_run(case, layer, batch)
        actual = layer_run(case, layer, shuffled)
    for level, a, b in zip(case.levels, actual, expected):
        torch.testing.assert_close(a, b[perm] if level == 'node' else b,
                                   atol=1e-10, rtol=1e-8)


@pytest.mark.parametrize('case', CASES, ids=IDS)
@given(data_list=batches(), scale=st.sampled_from([1e-4, 1.0, 1e2, 1e4]))
def test_finite_outputs_and_gradients(case, data_list, scale):
    layer = make(case, torch.float32)
    layer.train()  # gradients as in training (dropout is 0)
    batch = Batch.from_data_list([prepare(d, case) for d in data_list])
    batch.x = (batch.x * scale).float().requires_grad_()
    batch.edge_attr = (batch.edge_attr * scale).float()
    outputs = layer_run(case, layer, batch)
    for out in outputs:
        assert torch.isfinite(out).all()
    loss = sum(out.square().mean() for out in outputs if out.numel())
    if not torch.is_tensor(loss):
        return  # nothing to differentiate (an empty batch)
    loss.backward()
    grads = [batch.x.grad] + [p.grad for p in layer.parameters()]
    for grad in grads:
        assert grad is None or torch.isfinite(grad).all()


@pytest.mark.parametrize('case', CASES, ids=IDS)
@given(data_list=batches())
def test_bfloat16_autocast_close_to_float32(case, data_list):
    layer = make(case, torch.float32)
    batch = Batch.from_data_list([prepare(d, case) for d in data_list])
    batch.x, batch.edge_attr = batch.x.float(), batch.edge_attr.float()
    with torch.no_grad():
        expected = layer_run(case, layer, batch)
        with torch.autocast('cpu', dtype=torch.bfloat16):
            actual = layer_run(case, layer, batch)
    for a, b in zip(actual, expected):
        assert torch.isfinite(a).all() and a.shape == b.shape
        if not case.selects:  # else a close score may select differently
            torch.testing.assert_close(a.float(), b, atol=BF16_TOLERANCE,
                                       rtol=BF16_TOLERANCE)


def layer_run(case, layer, data):
    return case.run(layer, data)
