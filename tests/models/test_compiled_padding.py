import os
import sys

import pytest
import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..', '..',
                                'benchmarks'))
import molecule_batches  # noqa: E402

from torch_geometric_hot.data import (ModelPlanner, PadToBuckets,  # noqa
                                      PlannedLoader, real_graphs)
from torch_geometric_hot.validation import validation  # noqa: E402
from torch_geometric_hot.testing import cuda_layout  # noqa: E402

MODELS = ['hot_kernel', 'hot_softmax', 'tokengt_softmax', 'invariant_mlp']


def model_and_graphs(name, count):
    torch.manual_seed(0)
    model = molecule_batches.build_model(name, 8, 1, 2).double()
    graphs = molecule_batches.load_graphs('', count, synthetic=True)
    for g in graphs:
        g.lap_node_id = g.lap_node_id.double()
    return model, graphs


def loader(model, graphs, batch_size, pad=None):
    # planned for the layout a compiled step runs (a GPU's)
    return PlannedLoader(graphs, batch_size=batch_size,
                         planner=ModelPlanner(model), device='cuda',
                         pad=pad)


@pytest.mark.parametrize('name', MODELS)
def test_padded_batch_gives_real_graphs_their_outputs(name):
    model, graphs = model_and_graphs(name, 12)
    model.eval()
    pad = PadToBuckets(molecule_batches._pre_transform())
    plain = next(iter(loader(model, graphs, 12)))
    padded = next(iter(loader(model, graphs, 12, pad)))
    assert padded.num_real_graphs == 12 and padded.num_graphs > 12
    with torch.no_grad(), cuda_layout(), validation(False):
        want, got = model(plain), model(padded)
    assert got.size(0) == padded.num_graphs
    assert torch.allclose(real_graphs(got, padded), want, atol=1e-10,
                          rtol=0)


@pytest.mark.parametrize('name', MODELS)
def test_compiled_equals_eager_once_per_bucket(name):
    # over an epoch of padded batches: one graph compiled per size bucket,
    # outputs and gradients those of the eager model (float64)
    model, graphs = model_and_graphs(name, 48)
    model.train()
    pad = PadToBuckets(molecule_batches._pre_transform())
    compiled_graphs = []

    def backend(gm, example_inputs):
        compiled_graphs.append(gm)
        from torch._dynamo.backends.common import aot_autograd
        return aot_autograd(fw_compiler=lambda g, _: g,
                            bw_compiler=lambda g, _: g)(gm, example_inputs)

    torch._dynamo.reset()
    compiled = torch.compile(model, backend=backend, dynamic=False)
    params = [p for p in model.parameters() if p.requires_grad]
    with cuda_layout(), validation(False):
        for batch in loader(model, graphs, 8, pad):
            results = []
            for net in (model, compiled):
                model.zero_grad()
                out = real_graphs(net(batch), batch)
                (out * torch.linspace(-1, 1, out.numel()).view_as(
                    out).double()).sum().backward()
                results.append((out.detach(), [
                    p.grad.clone() if p.grad is not None else
                    torch.zeros_like(p) for p in params]))
            (want, want_grads), (got, got_grads) = results
            assert torch.allclose(got, want, atol=1e-10, rtol=0)
            for g, w in zip(got_grads, want_grads):
                assert torch.allclose(g, w, atol=1e-10, rtol=0)
    torch._dynamo.reset()
    assert 1 <= len(compiled_graphs) <= len(pad.seen), (
        len(compiled_graphs), pad.seen)
