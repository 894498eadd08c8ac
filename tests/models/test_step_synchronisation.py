import contextlib
import os
import sys

import pytest
import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..', '..',
                                'benchmarks'))
import molecule_batches  # noqa: E402

from torch_geometric_hot.testing import SyncRecorder, cuda_layout  # noqa

MODELS = ['hot_kernel', 'hot_softmax', 'tokengt_softmax',
          'tokengt_performer', 'invariant_mlp']


@contextlib.contextmanager
def sync_debug_errors(device):
    # on CUDA, torch itself raises at any synchronising call
    if device.type != 'cuda':
        yield
        return
    torch.cuda.set_sync_debug_mode('error')
    try:
        yield
    finally:
        torch.cuda.set_sync_debug_mode('default')


@pytest.mark.parametrize('name', MODELS)
def test_training_step_never_synchronises(name, device):
    from torch_geometric_hot.data import ModelPlanner
    torch.manual_seed(0)
    runner = molecule_batches.Runner(
        molecule_batches.build_model(name, 16, 2, 2, dropout=0.1), device)
    batch = molecule_batches.load_batches(
        '', 16, 1, synthetic=True, planner=ModelPlanner(runner.model),
        device='cuda')[0].to(device, non_blocking=True)
    if device.type == 'cuda':
        torch.cuda.synchronize(device)
    with cuda_layout(), SyncRecorder() as recorder, \
            sync_debug_errors(device):
        runner.forward_backward(batch)
    assert not recorder.counts, recorder.summary()
    grads = [p.grad for p in runner.model.parameters()
             if p.requires_grad and p.grad is not None]
    assert grads and all(bool(torch.isfinite(g).all()) for g in grads)


@pytest.mark.parametrize('name', MODELS)
def test_training_step_off_the_host_reads_no_host_tensor(name):
    # on 'meta' (a device whose tensors hold no values: reading one fails)
    # the step meets every host tensor it would copy to a GPU; the batch
    # is planned on the host for CUDA's layout and moved as a loader does
    from torch_geometric_hot.data import ModelPlanner
    torch.manual_seed(0)
    model = molecule_batches.build_model(name, 16, 2, 2, dropout=0.1)
    batch = molecule_batches.load_batches(
        '', 16, 1, synthetic=True, planner=ModelPlanner(model),
        device='cuda')[0].to('meta', non_blocking=True)
    runner = molecule_batches.Runner(model, torch.device('meta'))
    with cuda_layout(), SyncRecorder() as recorder:
        runner.forward_backward(batch)
    assert not recorder.counts, recorder.summary()
    grads = [p.grad for p in runner.model.parameters() if p.requires_grad]
    assert grads and all(g is not None and g.device.type == 'meta'
                         for g in grads)


def test_recorder_sees_every_kind_of_synchronisation():
    x = torch.tensor([3, 0, 2, 2])
    with SyncRecorder() as recorder:
        x.nonzero()
        x[x > 1]
        int(x.max())
        x.tolist()
        torch.unique(x)
        torch.bincount(x)
        torch.repeat_interleave(x)
        torch.repeat_interleave(x, x, output_size=7)  # size given: no sync
        y = x.clone()
        y[x > 2] = 0
        on_device = torch.zeros(4, device='meta')
        on_device[x]  # the host index is copied to the device
        on_device * torch.tensor(2.0)  # a host scalar: no copy
        torch.tensor([1, 2], device='meta')  # host data copied
        torch.as_tensor([1, 2], device='meta')
        torch.as_tensor(on_device, device='meta')  # already there
    names = recorder.summary()
    for name in ('aten.nonzero.default', 'aten.index.Tensor',
                 'aten._local_scalar_dense.default', 'Tensor.tolist',
                 'aten.bincount.default', 'aten.index_put_.default'):
        assert name in names, names
    assert any(n.startswith('aten._unique') or n.startswith('aten.unique')
               for n in names), names
    assert names.get('aten.repeat_interleave.Tensor') == 1, names
    assert names.get('aten.index.Tensor') == 2, names  # the mask and x
    assert 'aten.mul.Tensor' not in names, names
    assert names.get('torch.tensor') == names.get('torch.as_tensor') == 1
    assert x.tolist() == [3, 0, 2, 2]  # restored on exit
    assert torch.tensor([1]).device.type == 'cpu'
    assert 'torch.tensor' not in SyncRecorder().summary()


def test_recorder_keeps_recording_after_a_custom_operator():
    # the recorder is entered again around a custom operator's
    # implementation; leaving that keeps the outer recording whole
    x = torch.tensor([1, 2])
    with SyncRecorder() as recorder:
        with recorder:
            x.tolist()
        x.tolist()
        torch.tensor([1, 2], device='meta')
    assert recorder.summary() == {'Tensor.tolist': 2, 'torch.tensor': 1}
    assert torch.tensor is not None and x.tolist() == [1, 2]
    assert 'create' not in torch.tensor.__name__


@pytest.mark.parametrize('attention', ['kernel', 'softmax'])
def test_one_graph_never_synchronises_after_its_first_pass(attention):
    # one graph without a planned batch, with CUDA's layout: the first
    # pass makes the plans (kernel attention's summaries choose the groups
    # they read directly, the global softmax classes their size buckets),
    # kept with the index tensors; the next passes only read them
    from torch_geometric_hot.data import PairView
    from torch_geometric_hot.models import HOTGraphModel
    from torch_geometric_hot.ops import use_path
    from torch_geometric_hot.testing import random_graph
    from torch_geometric_hot.validation import validation
    graph = random_graph(60, 150, num_features=8, dtype=torch.float32)
    view = PairView.build(graph.edge_index, graph.num_nodes)
    model = HOTGraphModel(8, 8, num_layers=2, heads=2, attention=attention,
                          seed=0)
    paths = ('pooled', ) if attention == 'kernel' else ('padded', )
    for _ in range(2):
        with use_path(*paths), cuda_layout(), validation(False), \
                SyncRecorder() as recorder:
            model(graph.x, graph.edge_index, view=view).sum().backward()
    # kernel attention's backward reads which implementation made the
    # summaries only from a tensor on the CPU (on a GPU: never)
    assert set(recorder.counts) <= ({'aten.item.default'} if
                                    attention == 'kernel' else set()), \
        recorder.summary()
