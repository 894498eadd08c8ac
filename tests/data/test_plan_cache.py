from torch_geometric_hot.data import NodeView, PairView, PlanCache
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
