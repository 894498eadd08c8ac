import pytest
import torch

from torch_geometric_hot.ops import kernel_attention as ka
from torch_geometric_hot.ops import native

# 'on': the native kernels (needs a C compiler), 'off': the torch path
NATIVE_MODES = ['off', pytest.param('on', marks=pytest.mark.skipif(
    native._compiler() is None, reason='no C compiler'))]


@pytest.mark.parametrize('mode', NATIVE_MODES)
@pytest.mark.parametrize('groups', [1, 5])
def test_fast_paths_equal_references_and_gradcheck(groups, mode,
                                                   monkeypatch):
    monkeypatch.setattr(ka, 'CHUNK_ELEMENTS', 64)  # force many chunks
    monkeypatch.setitem(native._state, 'mode', mode)
    gen = torch.Generator().manual_seed(0)
    k = torch.rand(13, 2, 3, dtype=torch.float64, generator=gen)
    v = torch.randn(13, 2, 4, dtype=torch.float64, generator=gen)
    index = torch.randint(groups, (13, ), generator=gen)
    summary = ka.segment_outer_sum(k, v, index, groups)
    torch.testing.assert_close(
        summary, ka.segment_outer_sum_reference(k, v, index, groups))
    q = torch.rand(9, 2, 3, dtype=torch.float64, generator=gen)
    qi = torch.randint(groups, (9, ), generator=gen)
    torch.testing.assert_close(ka.gather_contract(q, summary, qi),
                               ka.gather_contract_reference(q, summary, qi))
    k.requires_grad_(), v.requires_grad_(), q.requires_grad_()
    assert torch.autograd.gradcheck(
        lambda k, v, q: ka.gather_contract(
            q, ka.segment_outer_sum(k, v, index, groups), qi), (k, v, q))


def test_mask_zeroes_rows():
    q = torch.rand(4, 1, 2, dtype=torch.float64)
    s = torch.rand(2, 1, 2, 3, dtype=torch.float64)
    mask = torch.tensor([True, False, True, False])
    out = ka.gather_contract(q, s, torch.tensor([0, 1, 1, 0]), mask)
    assert (out[~mask] == 0).all() and (out[mask] != 0).all()
