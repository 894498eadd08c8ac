import torch

from torch_geometric_hot.testing import OperatorCounter


def test_counts_every_operator_and_apart_those_that_launch():
    x = torch.randn(4, 3)
    with OperatorCounter() as counter:
        y = x.view(3, 4).t()  # two views
        (y + 1).exp_()  # two kernels
        torch.empty(5)  # an allocation
        x.clone()  # a kernel
    assert counter.counts['aten.view'] == counter.counts['aten.t'] == 1
    assert counter.total == 6
    assert counter.launches == 3
