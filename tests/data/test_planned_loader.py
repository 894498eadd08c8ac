import contextlib

import pytest
import torch
from torch_geometric.data import Batch

from torch_geometric_hot.data import ModelPlanner, PairView, PlannedCollate, \
    PlannedLoader
from torch_geometric_hot.data.planned_loader import one_storage
from torch_geometric_hot.models import HOTGraphModel, InvariantMLP, \
    TokenGT
from torch_geometric_hot.ops.layout_device import planned_for
from torch_geometric_hot.ops.plan_cache import map_tensors, plans_only
from torch_geometric_hot.testing import cuda_layout, random_graph
from torch_geometric_hot.transforms import AddLaplacianNodeId, \
    AddSecondOrderView


def graphs(count=6, seed=0):
    torch.manual_seed(seed)
    out = []
    for g in range(count):
        data = random_graph(3 + 2 * g, 2 + 3 * g, 4, edge_dim=4,
                            seed=seed + g)
        data.y = torch.randn(1, 1)
        out.append(AddLaplacianNodeId(4)(AddSecondOrderView()(data)))
    return out


def hot(attention):
    torch.manual_seed(0)
    return HOTGraphModel(8, 1, num_layers=2, heads=2,
                         node_encoder=torch.nn.Linear(4, 8),
                         edge_encoder=torch.nn.Linear(4, 8),
                         attention=attention, seed=0).double()


def model_of(name):
    # HOT by its attention, or the invariant MLP ('mean' linear layers)
    if name != 'invariant_mlp':
        return hot(name)
    torch.manual_seed(0)
    return InvariantMLP(8, 1, num_layers=2,
                        node_encoder=torch.nn.Linear(4, 8),
                        edge_encoder=torch.nn.Linear(4, 8)).double()


def call_hot(model, batch, view=None):
    return model(batch.x.double(), batch.edge_index,
                 batch.edge_attr.double(), batch.batch,
                 num_graphs=batch.num_graphs,
                 view=batch.pair_view if view is None else view)


def tensors(obj):
    found = []
    map_tensors(obj, lambda t: found.append(t) or t)
    return found


@pytest.mark.parametrize('name', ['kernel', 'softmax', 'invariant_mlp'])
@pytest.mark.parametrize('layout', ['cpu', 'cuda'])
def test_planned_batch_gives_the_fresh_views_output_and_makes_no_plan(
        name, layout):
    model = model_of(name)
    planner = ModelPlanner(model, call_hot)
    batch = PlannedCollate(Batch.from_data_list, planner, layout)(graphs())
    planned = batch.pair_view.planned()
    assert planned, 'the planning pass left no plan on the view'
    with cuda_layout() if layout == 'cuda' else torch.no_grad():
        out = call_hot(model, batch)
        fresh = call_hot(model, batch, PairView.from_data(batch))
    # the step made no index plan of its own: every one came from the
    # worker; the step derives only the packed masks, elementwise, from
    # the planned ids
    made = [key for key in batch.pair_view.planned() if key not in planned]
    assert batch.pair_view.planned()[:len(planned)] == planned
    assert all(key[0] == 'packed_hidden' for key in made), made
    assert not any(key[0] == 'packed_hidden' for key in planned)
    torch.testing.assert_close(out, fresh, rtol=1e-10, atol=1e-10)


def test_loader_workers_build_views_and_plans():
    model = hot('kernel')
    loader = PlannedLoader(graphs(8), batch_size=4,
                           planner=ModelPlanner(model, call_hot),
                           device='cuda', num_workers=2)
    batches = list(loader)
    assert len(batches) == 2
    for batch in batches:
        assert isinstance(batch.pair_view, PairView)
        assert batch.pair_view.num_graphs == 4
        assert batch.pair_view.planned()
        with cuda_layout():
            out = call_hot(model, batch)
            fresh = call_hot(model, batch, PairView.from_data(batch))
        torch.testing.assert_close(out, fresh, rtol=1e-10, atol=1e-10)


def test_view_moves_with_its_plans():
    model = hot('softmax')
    batch = PlannedCollate(Batch.from_data_list, ModelPlanner(model, call_hot),
                           'cuda')(graphs())
    view = batch.pair_view
    moved = view.apply(torch.clone)
    before = {id(t) for t in tensors(view)}
    after = tensors(moved)
    assert len(after) == len(before) > 20
    assert not before & {id(t) for t in after}  # every tensor was mapped
    assert moved.planned() == view.planned()
    # the batch's own .to() reaches the view and the plan cache
    copied = batch.to('cpu')
    assert isinstance(copied.pair_view, PairView)
    assert copied.pair_view.planned() == view.planned()


def test_tokengt_takes_its_layout_from_the_batch_plans():
    torch.manual_seed(0)
    model = TokenGT(4, 8, 1, 2, edge_dim=4, heads=2, node_id='laplacian',
                    node_id_dim=4, seed=0).double()

    def call(m, b):
        return m(b.x.double(), b.edge_index, b.edge_attr.double(), b.batch,
                 num_graphs=b.num_graphs, node_id=b.lap_node_id.double(),
                 plans=getattr(b, 'plans', None))

    batch = PlannedCollate(Batch.from_data_list, ModelPlanner(model, call),
                           'cuda')(graphs())
    planned = batch.plans.planned()
    assert [key[0] for key in planned] == ['token_layout']
    model.eval()
    with cuda_layout():
        out = call(model, batch)
        del batch.plans
        fresh = call(model, batch)
    torch.testing.assert_close(out, fresh, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize('name', ['kernel', 'softmax', 'invariant_mlp'])
def test_a_plans_only_pass_makes_the_plans_of_a_full_pass(name):
    model = model_of(name).eval()
    batch = Batch.from_data_list(graphs())
    made = []
    for only in (False, True):
        view = PairView.from_data(batch)
        with torch.no_grad(), planned_for('cuda'), \
                plans_only() if only else contextlib.nullcontext():
            call_hot(model, batch, view)
        made.append({key: tensors(view.plan(key, None))
                     for key in view.planned()
                     if key[0] != 'packed_hidden'})
    full, only = made
    assert list(only) == list(full) and len(full) > 3
    for key, want in full.items():
        assert len(only[key]) == len(want), key
        for got, expected in zip(only[key], want):
            assert torch.equal(got, expected), key


def test_one_storage_keeps_every_value():
    model = hot('softmax')
    batch = PlannedCollate(Batch.from_data_list, ModelPlanner(model, call_hot),
                           'cuda')(graphs())
    before = [t.clone() for t in tensors(batch.pair_view)] + \
        [batch.x.clone(), batch.edge_index.clone()]
    examples = [batch.get_example(g) for g in range(batch.num_graphs)]
    slices = {k: v.clone() for k, v in batch._slice_dict.items()}
    packed = one_storage(batch)
    after = tensors(packed.pair_view) + [packed.x, packed.edge_index]
    assert len(after) == len(before) > 20
    for got, want in zip(after, before):
        assert got.dtype == want.dtype and torch.equal(got, want)
    for key, value in slices.items():
        assert torch.equal(packed._slice_dict[key], value)
    for g, want in enumerate(examples):
        got = packed.get_example(g)
        for key in want.keys():
            assert torch.equal(got[key], want[key]) if isinstance(
                want[key], torch.Tensor) else got[key] == want[key], key
    # one storage for all of them, slices and increments included
    every = after + tensors([packed._slice_dict, packed._inc_dict])
    assert len({t.untyped_storage().data_ptr() for t in every}) == 1
    assert len({t.dtype for t in every}) > 2
    assert all(t.data_ptr() % t.element_size() == 0 for t in every)
    assert packed.pair_view.planned() == batch.pair_view.planned()


def test_one_storage_copies_shared_memory_once():
    model = hot('kernel')
    batch = PlannedCollate(Batch.from_data_list, ModelPlanner(model, call_hot),
                           'cuda')(graphs())
    view = batch.pair_view
    pair_index = batch.pair_index
    view.row, view.col = pair_index  # views of one tensor
    view.extra = [pair_index.t(), pair_index[:, 1:3], pair_index[:, :0],
                  batch.x[:, :1].expand(-1, 3)]
    everything = tensors([value for _, value in batch.items()] +
                         [batch._slice_dict, batch._inc_dict])
    before = [t.clone() for t in tensors(view)] + [batch.x.clone(),
                                                   pair_index.clone()]
    packed = one_storage(batch, shared=True)
    after = tensors(packed.pair_view) + [packed.x, packed.pair_index]
    assert len(after) == len(before) > 20
    for got, want in zip(after, before):
        assert got.dtype == want.dtype and got.shape == want.shape
        assert torch.equal(got, want)
    assert all(t.is_shared() for t in after)
    assert len({t.untyped_storage().data_ptr() for t in after}) == 1
    # the views of pair_index read its one copy
    new = packed.pair_view
    assert new.row.data_ptr() == packed.pair_index.data_ptr()
    assert new.extra[0].data_ptr() == packed.pair_index.data_ptr()
    assert new.extra[1].data_ptr() == packed.pair_index[:, 1:].data_ptr()
    # one copy of pair_index and its views: no more than the other tensors
    # and pair_index itself, and each dtype's alignment
    views = {id(t) for t in [view.row, view.col] + view.extra[:3]}
    others = {id(t): t for t in everything if id(t) not in views}
    dtypes = {t.dtype for t in others.values()}
    assert packed.pair_index.untyped_storage().nbytes() <= sum(
        t.nbytes for t in others.values()) + 64 * len(dtypes)
