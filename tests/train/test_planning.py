import copy
import os
import sys

import pytest
import torch
from torch_geometric.data import Batch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..', '..',
                                'benchmarks'))
import molecule_batches  # noqa: E402

from torch_geometric_hot.data import ModelPlanner, PlannedCollate  # noqa
from torch_geometric_hot.ops.plan_cache import map_tensors  # noqa: E402
from torch_geometric_hot.train import parse_args  # noqa: E402
from torch_geometric_hot.train.trainer import settings  # noqa: E402
from torch_geometric_hot.train.zoo import (MODELS, Settings,  # noqa: E402
                                           SpecCall, configured,
                                           planning_settings, plans_batches)

PLANNED = [name for name, spec in MODELS.items() if plans_batches(spec)]


def plans(spec, s: Settings, graphs, device):
    torch.manual_seed(0)
    collate = PlannedCollate(Batch.from_data_list, ModelPlanner(
        spec.build(s), SpecCall(spec)), device=device)
    batch = collate(graphs)
    out = []
    for cache in (batch.plans, getattr(batch, 'pair_view', None)):
        made = {} if cache is None else cache.__dict__.get('_plans', {})
        for key, plan in made.items():
            tensors = []
            map_tensors(plan, lambda t: tensors.append(t) or t)
            out.append((key, tensors))
    return out


def same_plans(spec, s: Settings, count: int, layout: str):
    graphs = molecule_batches.synthetic_molecules(count)
    if spec.pre_transform is not None:
        graphs = [spec.pre_transform(copy.copy(g)) for g in graphs]
    want = plans(spec, s, graphs, layout)
    got = plans(spec, planning_settings(s, spec), graphs, layout)
    assert [k for k, _ in got] == [k for k, _ in want]
    for (key, a), (_, b) in zip(got, want):
        assert len(a) == len(b), key
        for x, y in zip(a, b):
            assert x.shape == y.shape and torch.equal(x, y), key
    return want


@pytest.mark.parametrize('name', PLANNED)
def test_planning_copy_makes_the_models_plans(name):
    # planned for a GPU's layout (the CPU's kernel attention plans by the
    # channels per head: planned with the model itself there)
    s = Settings(64, 4, 1, 0.1, 0, 4, 16)
    same_plans(configured(name, s), s, 12, 'cuda')


@pytest.mark.parametrize('preset', ['tokengt-lap', 'hot-pcqm4m'])
def test_planning_copy_of_a_paper_preset(preset):
    args = parse_args(['--preset', preset])
    s = settings(args, 0, 1)
    assert planning_settings(s, configured(args.model[0], s)).hidden < \
        s.hidden // 10
    assert same_plans(configured(args.model[0], s), s, 6, 'cuda')
