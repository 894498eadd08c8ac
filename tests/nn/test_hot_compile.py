import pytest
import torch

from torch_geometric_hot.data import PairView
from torch_geometric_hot.nn import HOTConv2to2
from torch_geometric_hot.ops import native
from torch_geometric_hot.ops import use_path
from torch_geometric_hot.testing import attach_order_inputs, random_graph

# 'on': the native CPU kernels run inside the compiled graph (they
# implement the layer's custom operators), 'off': the torch implementation
MODES = ['off', pytest.param('on', marks=pytest.mark.skipif(
    native._compiler() is None, reason='no C compiler'))]


@pytest.mark.parametrize('mode', MODES)
@use_path('pooled')  # on the summaries
def test_kernel_hotconv_compiles_without_graph_breaks(mode, monkeypatch):
    # eager on the summaries too (compiled graphs never take the packed
    # path), so that both run the same operators
    data = attach_order_inputs(random_graph(6, 8), 2)
    view = PairView.from_data(data)
    layer = HOTConv2to2(3, 4, heads=2, attention='kernel',
                        kernel='elu').double()

    def forward(x):
        return layer(x, view)

    calls = []
    combine = native.combine
    monkeypatch.setattr(native, 'combine', lambda *args, **kwargs: (
        calls.append(1), combine(*args, **kwargs))[1])
    with native.use_native(mode):
        torch._dynamo.reset()
        explain = torch._dynamo.explain(forward)(data.pair_x)
        assert explain.graph_break_count == 0
        torch._dynamo.reset()
        compiled = torch.compile(forward, backend='aot_eager',
                                 fullgraph=True)
        results = []
        for fn in (compiled, forward):
            x = data.pair_x.clone().requires_grad_()
            calls.clear()
            out = fn(x)
            results.append([out, *torch.autograd.grad(out.sum(), x)])
            assert bool(calls) == (mode == 'on')
    for a, b in zip(*results):
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12)
    torch._dynamo.reset()
