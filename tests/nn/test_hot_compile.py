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


@pytest.mark.parametrize('mode', MODES)
@pytest.mark.parametrize('attention', ['softmax', 'kernel'])
def test_dropout_compiled_equals_eager_and_draws_at_every_call(mode,
                                                               attention):
    # the seed is drawn in the graph, not traced as a constant: compiled
    # calls after the same torch.manual_seed drop as the eager call does,
    # after another seed otherwise
    data = attach_order_inputs(random_graph(6, 8), 2)
    view = PairView.from_data(data)
    layer = HOTConv2to2(3, 4, heads=2, attention=attention,
                        dropout=0.3).double()

    def forward(x):
        return layer(x, view)

    def run(fn, seed):
        torch.manual_seed(seed)
        x = data.pair_x.clone().requires_grad_()
        out = fn(x)
        return [out, *torch.autograd.grad((out * out).sum(), x)]

    with native.use_native(mode):
        torch._dynamo.reset()
        compiled = torch.compile(forward, backend='aot_eager',
                                 fullgraph=True)
        first, again, other = (run(compiled, seed) for seed in (0, 0, 1))
        eager = run(forward, 0)
    for a, b, c in zip(first, again, eager):
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12)
        torch.testing.assert_close(a, c, rtol=1e-12, atol=1e-12)
    assert not torch.allclose(first[0], other[0])
    layer.eval()  # and without dropout, the other output
    assert not torch.allclose(first[0], forward(data.pair_x))
    torch._dynamo.reset()
