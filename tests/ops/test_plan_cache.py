import torch

from torch_geometric_hot.data import NodeView, PairView, PlanCache
from torch_geometric_hot.ops.plan_cache import RECENT, plans_for
from torch_geometric_hot.testing import random_graph


def test_a_plan_is_built_once_per_key_and_view():
    data = random_graph(5, 6)
    views = [PairView.build(data.edge_index, data.num_nodes),
             NodeView(data.num_nodes)]
    for view in views:
        assert isinstance(view, PlanCache)
        built = []

        def build(name):
            return lambda: built.append(name) or len(built)

        assert view.plan('a', build('a')) == 1
        assert view.plan('b', build('b')) == 2
        assert view.plan('a', build('again')) == 1
        assert built == ['a', 'b']
    # another view of the same graph has plans of its own
    other = PairView.build(data.edge_index, data.num_nodes)
    assert other.plan('a', lambda: 'fresh') == 'fresh'


def test_an_operator_finds_one_cache_per_index_tensors():
    a, b = torch.arange(4), torch.arange(3)
    cache = plans_for([a, b])
    assert plans_for([a, b]) is cache
    assert cache.plan('k', lambda: 1) == 1
    assert plans_for([a, b]).plan('k', lambda: 2) == 1
    # other tensors (equal values, or the same in another order): another
    assert plans_for([a.clone(), b]) is not cache
    assert plans_for([b, a]) is not cache


def test_an_operator_cache_notices_an_in_place_change():
    a = torch.arange(4)
    cache = plans_for([a])
    a[0] = 3  # the plans derived from a no longer hold
    assert plans_for([a]) is not cache


def test_an_operator_cache_of_inference_tensors_is_kept_by_identity():
    with torch.inference_mode():
        a = torch.arange(4)
    assert plans_for([a]) is plans_for([a])


def test_operator_caches_are_kept_for_the_most_recent_tensors():
    kept = [torch.arange(2) for _ in range(RECENT + 1)]
    caches = [plans_for([t]) for t in kept]
    assert plans_for([kept[-1]]) is caches[-1]
    assert plans_for([kept[0]]) is not caches[0]  # the oldest was dropped


def test_a_dead_tensor_does_not_lend_its_cache_to_a_new_one():
    # a new tensor may reuse a dead one's id(): the weak reference tells
    cache = plans_for([torch.arange(3)])
    for _ in range(8):
        assert plans_for([torch.arange(3)]) is not cache


def test_an_operator_cache_goes_with_its_tensors():
    import torch_geometric_hot.ops.plan_cache as module
    a, b = torch.arange(4), torch.arange(3)
    plans_for([a, b]).plan('k', lambda: torch.zeros(8))
    key = (id(a), id(b))
    assert key in module._caches
    del b  # the plan no longer holds for any call
    assert key not in module._caches
