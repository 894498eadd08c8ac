r"""A layer given inputs on two different devices refuses them with an error
naming the argument. The second device is CUDA when the test device is the
CPU and a GPU is present, the CPU when the test device is not the CPU, and
``meta`` otherwise (so the checks run on machines without a GPU too)."""
import pytest
import torch

from torch_geometric_hot.data import PairView
from torch_geometric_hot.nn import HOTConv2to2, HOTNodeConv, TokenGTEncoder
from torch_geometric_hot.validation import validation
from torch_geometric_hot.testing import attach_order_inputs, random_graph


def other_device(device: torch.device) -> torch.device:
    if device.type != 'cpu':
        return torch.device('cpu')
    return torch.device('cuda' if torch.cuda.is_available() else 'meta')


def test_tokengt_names_the_argument_on_another_device(device):
    torch.manual_seed(0)
    model = TokenGTEncoder(4, 8, num_layers=1, edge_dim=2, node_id='orf',
                           node_id_dim=4, hyperedge_order=3,
                           seed=0).to(device)
    data = random_graph(5, 6, edge_dim=2, dtype=torch.float, device=device)
    batch = torch.zeros(5, dtype=torch.long, device=device)
    node_id = torch.zeros(5, 4, device=device)
    hyperedge_index = torch.tensor([[0], [1], [2]], device=device)
    args = dict(x=data.x, edge_index=data.edge_index,
                edge_attr=data.edge_attr, batch=batch, node_id=node_id,
                hyperedge_index=hyperedge_index)
    model(**args)  # all on one device: fine
    other = other_device(device)
    for name in args:
        moved = dict(args, **{name: args[name].to(other)})
        with pytest.raises(ValueError, match=f"'{name}' is on {other.type}"):
            model(**moved)


def test_hot_layer_names_the_input_on_another_device_than_its_view(device):
    torch.manual_seed(0)
    layer = HOTConv2to2(3, 4, heads=1).double().to(device)
    data = attach_order_inputs(random_graph(5, 6, device=device), 2)
    view = PairView.from_data(data)
    layer(data.pair_x, view)
    with validation(False):  # no value check of a meta tensor
        with pytest.raises(ValueError, match="'x' is on .* the view"):
            layer(data.pair_x.to(other_device(device)), view)


def test_node_conv_names_the_argument_on_another_device(device):
    torch.manual_seed(0)
    conv = HOTNodeConv(4, 8, heads=2, edge_dim=2).to(device)
    data = random_graph(5, 6, edge_dim=2, dtype=torch.float, device=device)
    batch = torch.zeros(5, dtype=torch.long, device=device)
    args = dict(edge_index=data.edge_index, edge_attr=data.edge_attr,
                batch=batch)
    conv(data.x, **args)
    for name in args:
        moved = dict(args, **{name: args[name].to(other_device(device))})
        with pytest.raises(ValueError, match=f"'{name}'"):
            conv(data.x, **moved)
