import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..', '..',
                                'benchmarks'))
import torch_paths  # noqa: E402
from hot_scaling import BAGraph, hot_model  # noqa: E402

from torch_geometric_hot.data import PairView  # noqa: E402
from torch_geometric_hot.ops.attention.dispatch import use_path  # noqa
from torch_geometric_hot.ops.native import use_native  # noqa: E402


def test_the_autograd_pass_gives_the_operators_gradients_and_is_undone():
    graph = BAGraph(300)
    view = PairView.build(graph.edge_index, graph.num_nodes)
    model = hot_model('kernel').double()
    x = graph.x.double()
    grads = []
    for _, setting in torch_paths.SETTINGS['backward']:
        model.zero_grad()
        with use_native('off'), use_path('pooled'):
            torch_paths._timed(lambda: model(
                x, graph.edge_index, view=view).sum().backward(), setting)
        assert torch_paths.pooled._pooled_combination is \
            torch_paths.OPERATOR
        grads.append([p.grad for p in model.parameters()])
    assert sum(g is not None for g in grads[0]) > 10
    for autograd, hand in zip(*grads):
        assert (autograd is None) == (hand is None)
        if hand is not None:
            torch.testing.assert_close(autograd, hand)
