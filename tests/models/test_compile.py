r"""The models under ``torch.compile(fullgraph=True)``: one graph, the eager
outputs and gradients, and a bounded number of recompiles over batches of
different sizes. Graph-break and equality checks use the ``aot_eager``
backend (tracing and autograd as inductor sees them, without code
generation); one test runs inductor."""
import pytest
import torch
from torch_geometric.data import Batch

from torch_geometric_hot.data import PairView
from torch_geometric_hot.models import HOTGraphModel, TokenGT
from torch_geometric_hot.nn import CategoricalEncoder, SimplicialAttention
from torch_geometric_hot.ops.scatter import scatter_sum
from torch_geometric_hot.testing import random_graph
from torch_geometric_hot.transforms import (AddLaplacianNodeId,
                                            AddSecondOrderView)

WIDTH, NODE_ID_DIM = 8, 4
ATOMS, BONDS = [5, 3], [4]  # categories per atom / bond feature
CONFIGS = ('hot_kernel', 'hot_softmax', 'tokengt_softmax',
           'tokengt_performer', 'simplicial')


def molecule_like_batch(sizes, seed=0):
    r"""Graphs of :obj:`sizes` nodes with integer atom and bond features
    (as OGB's molecules), the pair view and Laplacian identifiers attached
    by the transforms."""
    graphs = []
    for i, n in enumerate(sizes):
        g = random_graph(n, n + 1, seed=seed + i)
        gen = torch.Generator().manual_seed(seed + i)
        g.x = torch.stack([torch.randint(c, (n, ), generator=gen)
                           for c in ATOMS], 1)
        g.edge_attr = torch.randint(BONDS[0], (g.num_edges, 1),
                                    generator=gen)
        graphs.append(AddLaplacianNodeId(NODE_ID_DIM)(AddSecondOrderView()(g)))
    return Batch.from_data_list(graphs)


class SimplicialModel(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.atom = CategoricalEncoder(ATOMS, WIDTH)
        self.attn = SimplicialAttention(WIDTH, heads=2,
                                        candidates='neighbours')
        self.head = torch.nn.Linear(WIDTH, 1)

    def forward(self, x, edge_index, batch, num_graphs):
        h = self.attn(self.atom(x), edge_index, batch)
        return self.head(scatter_sum(h, batch, num_graphs))


def build(name, redraw_interval=None):
    torch.manual_seed(0)
    if name == 'simplicial':
        return SimplicialModel().double()
    atom, bond = CategoricalEncoder(ATOMS, WIDTH), CategoricalEncoder(
        BONDS, WIDTH)
    if name.startswith('hot_'):
        kwargs = dict(redraw_interval=redraw_interval) \
            if name == 'hot_kernel' else {}
        return HOTGraphModel(WIDTH, 1, num_layers=1, heads=2,
                             node_encoder=atom, edge_encoder=bond,
                             attention=name[len('hot_'):], seed=0,
                             **kwargs).double()
    kwargs = dict(redraw_interval=redraw_interval) \
        if name == 'tokengt_performer' else {}
    return TokenGT(WIDTH, WIDTH, 1, 1, node_encoder=atom, edge_encoder=bond,
                   heads=2, node_id='laplacian', node_id_dim=NODE_ID_DIM,
                   attention=name[len('tokengt_'):], seed=0,
                   **kwargs).double()


def call(name, model, b, view=None):
    r"""The model on batch :obj:`b`, its pair view built eagerly (or
    :obj:`view`)."""
    if name.startswith('hot_'):
        view = PairView.from_data(b) if view is None else view
        return model(b.x, b.edge_index, b.edge_attr, b.batch,
                     num_graphs=b.num_graphs, view=view)
    if name.startswith('tokengt_'):
        return model(b.x, b.edge_index, b.edge_attr, b.batch,
                     num_graphs=b.num_graphs, node_id=b.lap_node_id)
    return model(b.x, b.edge_index, b.batch, b.num_graphs)


class Counting:
    r"""A backend that counts the graphs it compiles."""
    def __init__(self, backend='aot_eager'):
        self.inner = torch._dynamo.lookup_backend(backend)
        self.graphs = 0

    def __call__(self, gm, example_inputs):
        self.graphs += 1
        return self.inner(gm, example_inputs)


@pytest.fixture(autouse=True)
def data_dependent_sizes():
    r"""The settings under which data-dependent sizes are traced
    (``docs/compiling.md``); dynamo's caches are cleared around each
    test."""
    torch._dynamo.reset()
    with torch._dynamo.config.patch(capture_scalar_outputs=True,
                                    capture_dynamic_output_shape_ops=True):
        yield
    torch._dynamo.reset()


@pytest.mark.parametrize('name', CONFIGS)
def test_compiles_as_one_graph_with_the_eager_output(name):
    b = molecule_like_batch([7, 4, 9])
    model = build(name).eval()
    backend = Counting()
    compiled = torch.compile(model, backend=backend, fullgraph=True)
    with torch.no_grad():
        out = call(name, compiled, b)
        expected = call(name, model, b)
    assert backend.graphs == 1
    assert out.shape == (3, 1)
    torch.testing.assert_close(out, expected)


@pytest.mark.parametrize('name', ['hot_softmax', 'tokengt_softmax',
                                  'simplicial'])
def test_compiled_gradients_equal_eager(name):
    b = molecule_like_batch([6, 8])
    model = build(name).eval()  # no random draws
    compiled = torch.compile(model, backend='aot_eager', fullgraph=True)
    grads = []
    for fn in (model, compiled):
        model.zero_grad()
        call(name, fn, b).square().sum().backward()
        grads.append({n: p.grad.clone() for n, p in model.named_parameters()
                      if p.grad is not None})
    assert grads[0].keys() == grads[1].keys() and len(grads[0]) > 5
    for key in grads[0]:
        torch.testing.assert_close(grads[1][key], grads[0][key], msg=key)


@pytest.mark.parametrize('name', ['hot_kernel', 'hot_softmax',
                                  'tokengt_softmax', 'tokengt_performer'])
def test_compiles_without_data_dependent_sizes(name):
    # models that read no size from the data compile as one graph without
    # the settings that trace such sizes (softmax attention: one operator
    # per HOT class and per TokenGT layer)
    b = molecule_like_batch([7, 4, 9])
    model = build(name).eval()
    backend = Counting()
    with torch._dynamo.config.patch(capture_scalar_outputs=False,
                                    capture_dynamic_output_shape_ops=False):
        compiled = torch.compile(model, backend=backend, fullgraph=True)
        with torch.no_grad():
            out = call(name, compiled, b)
    assert backend.graphs == 1
    torch.testing.assert_close(out, call(name, model, b))


@pytest.mark.parametrize('name', CONFIGS)
def test_training_steps_on_one_batch_compile_once(name):
    # forward, backward and an optimiser step, three times on one batch and
    # one view, eager steps in between: nothing the steps change (the
    # random features' redraw count, what the eager pass caches on the
    # view) makes the compiled model compile again
    b = molecule_like_batch([7, 4, 9])
    view = PairView.from_data(b)
    model = build(name, redraw_interval=2).train()
    backend = Counting()
    compiled = torch.compile(model, backend=backend, fullgraph=True)
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-2)
    torch._dynamo.utils.counters.clear()
    for fn in (compiled, compiled, model, compiled):
        optimizer.zero_grad()
        call(name, fn, b, view).square().mean().backward()
        optimizer.step()
    assert backend.graphs == 1
    assert torch._dynamo.utils.counters['stats']['unique_graphs'] == 1


def test_batches_of_other_sizes_compile_three_times_at_most():
    # automatic dynamic shapes: the first batch compiles with its sizes, the
    # first change of size once more with symbolic sizes, a batch of one
    # graph once (torch specialises sizes 0 and 1), then no more
    model = build('tokengt_softmax').eval()
    backend = Counting()
    compiled = torch.compile(model, backend=backend, fullgraph=True)
    with torch.no_grad():
        for seed, sizes in enumerate([[5, 7], [4, 9, 3], [8], [6, 6, 2, 5],
                                      [3, 2, 4], [9]]):
            b = molecule_like_batch(sizes, seed)
            torch.testing.assert_close(call('tokengt_softmax', compiled, b),
                                       call('tokengt_softmax', model, b))
    assert backend.graphs <= 3


def test_inductor_matches_eager():
    b = molecule_like_batch([5, 7])
    model = build('tokengt_performer').eval()
    compiled = torch.compile(model, fullgraph=True)
    with torch.no_grad():
        torch.testing.assert_close(call('tokengt_performer', compiled, b),
                                   call('tokengt_performer', model, b))


def test_inductor_compiles_the_hot_softmax_training_step():
    b = molecule_like_batch([5, 7])
    model = build('hot_softmax').train()
    compiled = torch.compile(model, fullgraph=True)
    grads = []
    for fn in (model, compiled):
        model.zero_grad()
        call('hot_softmax', fn, b).square().sum().backward()
        grads.append([p.grad.clone() for p in model.parameters()
                      if p.grad is not None])
    for got, expected in zip(grads[1], grads[0]):
        torch.testing.assert_close(got, expected)
