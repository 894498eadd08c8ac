import pytest
import torch

from torch_geometric_hot.ops import kernel_attention as ka
from torch_geometric_hot.ops import native
from torch_geometric_hot.ops.attention.dispatch import DirectReadings
from torch_geometric_hot.testing import references

# 'on': the native kernels (needs a C compiler), 'off': the torch path
NATIVE_MODES = ['off', pytest.param('on', marks=pytest.mark.skipif(
    native._compiler() is None, reason='no C compiler'))]


@pytest.mark.parametrize('mode', NATIVE_MODES)
@pytest.mark.parametrize('groups', [1, 5])
@pytest.mark.parametrize('chunk', [64, 1 << 18])  # many chunks, one
def test_fast_paths_equal_references_and_gradcheck(groups, mode, chunk,
                                                   monkeypatch):
    monkeypatch.setattr(ka, 'CHUNK_ELEMENTS', chunk)
    monkeypatch.setitem(native._state, 'mode', mode)
    gen = torch.Generator().manual_seed(0)
    k = torch.rand(13, 2, 3, dtype=torch.float64, generator=gen)
    v = torch.randn(13, 2, 4, dtype=torch.float64, generator=gen)
    index = torch.randint(groups, (13, ), generator=gen)
    summary = ka.segment_outer_sum(k, v, index, groups)
    torch.testing.assert_close(
        summary, references.segment_outer_sum_reference(k, v, index, groups))
    q = torch.rand(9, 2, 3, dtype=torch.float64, generator=gen)
    qi = torch.randint(groups, (9, ), generator=gen)
    torch.testing.assert_close(
        ka.gather_contract(q, summary, qi),
        references.gather_contract_reference(q, summary, qi))
    k.requires_grad_(), v.requires_grad_(), q.requires_grad_()
    assert torch.autograd.gradcheck(
        lambda k, v, q: ka.gather_contract(
            q, ka.segment_outer_sum(k, v, index, groups), qi), (k, v, q))


@pytest.mark.parametrize('dtype', [torch.float32, torch.float64])
def test_torch_readings_split_groups_as_the_summaries(dtype, device):
    # one pool of a 40-key group (summarised: over max_keys) and groups of
    # 1-3 keys (read from their keys, at any cost), one of no key;
    # readings of all or some slots: the same readings and gradients as
    # summaries of every group
    gen = torch.Generator().manual_seed(0)
    H, R, D, P = 2, 3, 2, 60
    k = torch.rand(P, H, R, dtype=dtype, generator=gen).to(device)
    values = torch.randn(P, 3, H, D, dtype=dtype, generator=gen).to(device)
    q = torch.rand(30, H, R, dtype=dtype, generator=gen).to(device)
    group = torch.cat([torch.zeros(40, dtype=torch.long),
                       torch.randint(1, 6, (12, ), generator=gen)])
    pool = ka.SummaryKeys(torch.randperm(P, generator=gen)[:52].to(device),
                          group.to(device), 7, (2, 0))
    reads = [ka.Reading(0, torch.randint(7, (30, ), generator=gen).to(
        device)), ka.Reading(0, torch.randint(7, (10, ), generator=gen).to(
            device), (0, ), start=20)]
    split, = ka.choose_direct([pool], reads, R, D,
                              DirectReadings().max_keys, 1e9)
    assert split.direct is not None and not bool(split.direct[0])
    assert bool(split.direct[1:].all()) and split.num_summarised == 1
    leaves = [t.clone().requires_grad_() for t in (k, values, q)]
    expected = references.pool_readings_reference(*leaves, [pool], reads)
    grads = [torch.randn_like(e) for e in expected]
    expected_grads = torch.autograd.grad(expected, leaves, grads)
    buffers = [torch.empty(7, H, R, 2 * D + 1, dtype=dtype, device=device)]
    plan = ka.plan_torch_readings([pool], reads, [split], D)
    out = ka.torch_pool_readings(k, values, q, [pool], reads, plan, buffers)
    got_grads = [torch.zeros_like(t) for t in (k, values, q)]
    ka.torch_pool_readings_backward(k, values, q, [pool], reads, plan,
                                    buffers, grads, *got_grads)
    tol = dict(rtol=1e-10, atol=1e-12) if dtype == torch.float64 else {}
    for a, b in zip(out + got_grads, list(expected) + list(expected_grads)):
        torch.testing.assert_close(a, b, **tol)
