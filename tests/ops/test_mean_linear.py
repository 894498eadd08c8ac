import contextlib

import pytest
import torch

from torch_geometric_hot.data import PairView
from torch_geometric_hot.data.targets import resolve_targets
from torch_geometric_hot.nn import EquivariantLinear
from torch_geometric_hot.ops.basis import select_classes
from torch_geometric_hot.ops.equivariant import equivariant_linear
from torch_geometric_hot.ops.attention.dispatch import GATHER_ELEMENTS, \
    gathers_terms
from torch_geometric_hot.ops.mean_linear import mean_linear
from torch_geometric_hot.testing import OperatorCounter, \
    attach_order_inputs, cuda_layout, random_graph, skewed_batch

ORDERS = [(2, 2), (2, 1), (2, 0), (1, 1), (1, 0), (1, 2), (1, 3)]


def _parts(in_order, out_order, device):
    # a batch of very different graphs (empty, 1-node, isolated nodes,
    # self-loops), the input, its view and every output part's classes
    data = skewed_batch(out_order, device=device)
    x = (data.pair_x if in_order == 2 else data.x).clone().requires_grad_()
    hyperedges = getattr(data, 'hyperedge_index', None)
    view, targets = resolve_targets(x, PairView.from_data(data), in_order,
                                    out_order, hyperedges)
    classes = select_classes(in_order, out_order, 'all')
    for name, target in targets.items():
        yield x, view, [c for c in classes if c.part == name], target


@pytest.mark.parametrize('orders', ORDERS)
def test_one_product_equals_class_by_class(orders, device):
    # outputs and gradients (input and weights) in float64
    in_order, out_order = orders
    for x, view, classes, target in _parts(in_order, out_order, device):
        weight = torch.randn(len(classes), x.size(-1), 4, dtype=x.dtype,
                             device=device, requires_grad=True)
        grad = torch.randn(target.num_rows, 4, dtype=x.dtype, device=device)
        results = []
        for run in (lambda: equivariant_linear(x, view, in_order, classes,
                                               weight, target, 'mean'),
                    lambda: mean_linear(x, view, in_order, classes, weight,
                                        target)):
            out = run()
            results.append([out, *torch.autograd.grad(out, (x, weight),
                                                      grad)])
        for a, b in zip(*results):
            torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12)


def _counts(layer, data, view):
    # the layer's operators with its device's layout, then with CUDA's
    counts = []
    for layout in (contextlib.nullcontext, cuda_layout):
        with layout():
            layer(data.pair_x, view)  # the plans, kept with the view
            with OperatorCounter() as counter:
                out = layer(data.pair_x, view)
        counts.append(counter.total)
        torch.testing.assert_close(out, layer(data.pair_x, view))
    return counts


def test_layer_takes_it_on_a_launch_bound_layout():
    # a 2->2 'mean' layer (15 classes) with CUDA's layout: a few operators
    # per part, however many classes (the rest: the input's summaries, the
    # bias, the parts' assembly), under half of the class by class count
    data = skewed_batch(2)
    view = PairView.from_data(data)
    layer = EquivariantLinear(3, 4, 2, 2, normalize='mean').double()
    counts = _counts(layer, data, view)
    assert 2 * counts[1] < counts[0], counts


def test_parts_that_gather_more_than_the_limit_go_class_by_class():
    # both parts of a graph of 10,000 nodes and about 20,000 pair entries at
    # width 256 would gather over GATHER_ELEMENTS: class by class on any
    # layout (about the CPU's count, not under half of it)
    data = attach_order_inputs(random_graph(10000, 10000, num_features=1), 2,
                               channels=256)
    view = PairView.from_data(data)
    layer = EquivariantLinear(256, 2, 2, 2, normalize='mean').double()
    terms = [sum(len(c.terms) for c in layer.classes if c.part == part)
             for part in ('diag', 'off')]
    rows = [data.num_nodes, data.pair_x.size(0) - data.num_nodes]
    assert min(r * t * 256 for r, t in zip(rows, terms)) > GATHER_ELEMENTS
    counts = _counts(layer, data, view)
    assert 2 * counts[1] > counts[0], counts


def test_the_rule_gathers_off_the_cpu_up_to_the_limit():
    assert gathers_terms('cuda', GATHER_ELEMENTS)
    assert not gathers_terms('cuda', GATHER_ELEMENTS + 1)
    assert not gathers_terms('cpu', 1)
