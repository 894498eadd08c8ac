r"""The device a graph lives on and its edges, for transforms that create
tensors."""
import torch
from torch import Tensor
from torch_geometric.data import Data


def data_device(data: Data) -> torch.device:
    r"""The device of :obj:`data`'s :obj:`edge_index`, else of its first
    tensor attribute, else the CPU: transforms create their outputs there,
    so a graph moved to a GPU before the transform gets GPU outputs."""
    edge_index = getattr(data, 'edge_index', None)
    if isinstance(edge_index, Tensor):
        return edge_index.device
    for value in data.values():
        if isinstance(value, Tensor):
            return value.device
    return torch.device('cpu')


def edge_index_or_empty(data: Data) -> Tensor:
    r""":obj:`data`'s :obj:`edge_index`, or an empty :obj:`[2, 0]` one on
    :func:`data_device` when it has none (a graph without edges)."""
    edge_index = getattr(data, 'edge_index', None)
    if edge_index is None:
        return torch.empty(2, 0, dtype=torch.long, device=data_device(data))
    return edge_index
