"""Every variant of the scaling benchmarks builds on the device and runs a
forward and backward pass at a small size (the sweeps themselves run in
child processes of their scripts)."""
import os
import sys

import pytest
import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..', '..',
                                'benchmarks'))
import pair_view_scaling  # noqa: E402
import simplicial_scaling  # noqa: E402
import tokengt_scaling  # noqa: E402

CASES = [
    *[(pair_view_scaling, name, 300)
      for name in sorted(pair_view_scaling.VARIANTS)],
    *[(simplicial_scaling, name, 2**12)
      for name in sorted(simplicial_scaling.VARIANTS)],
    *[(tokengt_scaling, name, 300)
      for name in sorted(tokengt_scaling.VARIANTS)],
]


@pytest.mark.parametrize('script, variant, size', CASES,
                         ids=[f'{s.__name__}-{v}' for s, v, _ in CASES])
def test_variant_runs_on_the_device(script, variant, size, device):
    torch.manual_seed(0)
    step, fields = script.VARIANTS[variant](size, device)
    assert all(value > 0 for key, value in fields.items()
               if key in ('n_nodes', 'n_tuples', 'n_tokens'))
    out = step()
    assert out.device.type == device.type
    if out.is_floating_point():
        assert torch.isfinite(out).all()
    if out.requires_grad:
        out.sum().backward()


@pytest.mark.parametrize('floor, size', [
    (pair_view_scaling.floor, 300),
    (simplicial_scaling.build_floor, 2**12),
])
def test_floor_runs_on_the_device(floor, size, device):
    step, _ = floor(size, device)
    out = step()
    assert out.device.type == device.type and out.requires_grad
    out.sum().backward()
