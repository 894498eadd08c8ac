import contextlib

import pytest
import torch

from torch_geometric_hot.data import PairView
from torch_geometric_hot.data.targets import resolve_targets
from torch_geometric_hot.nn import EquivariantLinear
from torch_geometric_hot.ops.basis import select_classes
from torch_geometric_hot.ops.equivariant import equivariant_linear
import torch_geometric_hot.ops.mean_linear as mean_linear_module
from torch_geometric_hot.ops.mean_linear import mean_linear
from torch_geometric_hot.testing import OperatorCounter, cuda_layout, \
    skewed_batch

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


def test_layer_takes_it_on_a_launch_bound_layout(monkeypatch):
    # a 2->2 'mean' layer (15 classes) with CUDA's layout: a few operators
    # per part, however many classes (the rest: the input's summaries, the
    # bias, the parts' assembly), under half of the class by class count
    data = skewed_batch(2)
    view = PairView.from_data(data)
    layer = EquivariantLinear(3, 4, 2, 2, normalize='mean').double()
    counts = _counts(layer, data, view)
    assert 2 * counts[1] < counts[0], counts
    # parts that would gather more: class by class on any layout
    monkeypatch.setattr(mean_linear_module, 'GATHER_ELEMENTS', -1)
    again = _counts(layer, data, view)
    assert again[0] == counts[0] and again[1] > 2 * counts[1], again
