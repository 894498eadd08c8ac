r"""Input checks shared by views, transforms and layers: each names the
argument and what was expected."""
import torch
from torch import Tensor


def check_edge_index(edge_index: Tensor, num_nodes: int,
                     name: str = 'edge_index') -> None:
    r"""Raises a clear error unless :obj:`edge_index` is a :obj:`[2, m]`
    integer tensor with values in :obj:`[0, num_nodes)`."""
    if not isinstance(edge_index, Tensor):
        raise TypeError(f"'{name}' must be a torch.Tensor, got "
                        f"{type(edge_index).__name__}")
    if edge_index.dtype not in (torch.long, torch.int, torch.int16,
                                torch.uint8, torch.int8):
        raise TypeError(f"'{name}' must be an integer tensor, got dtype "
                        f"{edge_index.dtype}")
    if edge_index.dim() != 2 or edge_index.size(0) != 2:
        raise ValueError(f"'{name}' must have shape [2, num_edges], got "
                         f"{list(edge_index.shape)}")
    if edge_index.numel() > 0:
        low, high = int(edge_index.min()), int(edge_index.max())
        if low < 0 or high >= num_nodes:
            raise ValueError(f"'{name}' has node indices in [{low}, {high}] "
                             f"but the graph has {num_nodes} nodes")


def check_rows(x: Tensor, count: int, name: str, row: str) -> None:
    r"""Raises unless :obj:`x` is a tensor with :obj:`count` rows (one per
    :obj:`row`, e.g. ``'node'``)."""
    if not isinstance(x, Tensor) or x.dim() < 1 or x.size(0) != count:
        shape = list(x.shape) if isinstance(x, Tensor) else type(x)
        raise ValueError(f"'{name}' must have one row per {row} ({count}), "
                         f"got {shape}")
