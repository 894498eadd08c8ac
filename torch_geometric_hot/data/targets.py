r"""A layer's input view and output parts, checked."""
from typing import Dict, Optional, Tuple

import torch
from torch import Tensor

from torch_geometric_hot.data.node_view import NodeView
from torch_geometric_hot.data.pair_view import PairView
from torch_geometric_hot.ops.equivariant import Target


def resolve_targets(x: Tensor, view, in_order: int, out_order: int,
                    hyperedge_index: Optional[Tensor] = None
                    ) -> Tuple[object, Dict[str, Target]]:
    r"""Validates the input of an :obj:`in_order` → :obj:`out_order` layer
    and returns its index bundle and one :class:`Target` per output part.

    Args:
        x (torch.Tensor): :obj:`[P, C]` (order 2) or :obj:`[n, C]` (order 1).
        view: A :class:`PairView` (required when an order is 2); for order
            1 also a :class:`NodeView`, a :obj:`batch` vector or :obj:`None`.
        in_order (int): Input order.
        out_order (int): Output order.
        hyperedge_index (torch.Tensor, optional): :obj:`[k, h]` output
            hyperedges (distinct nodes per column) for order :obj:`k >= 3`.
    """
    if not isinstance(x, Tensor) or x.dim() != 2:
        raise ValueError(f"'x' must be a 2-dimensional tensor [rows, "
                         f"channels], got "
                         f"{list(x.shape) if isinstance(x, Tensor) else x}")
    if in_order == 2 or out_order == 2:
        if not isinstance(view, PairView):
            raise TypeError(f"a {in_order}->{out_order} layer needs a "
                            f"PairView as 'view' (see PairView.from_data), "
                            f"got {type(view).__name__}")
    if in_order == 2:
        view.check_entries(x)
    else:
        view = NodeView.resolve(view, x)
    targets = {}
    if out_order == 2:
        targets = {p: Target(p, view) for p in ('diag', 'off')}
    elif out_order == 1:
        targets = {'node': Target('node', view)}
    elif out_order == 0:
        targets = {'graph': Target('graph', view)}
    else:
        _check_hyperedges(hyperedge_index, out_order, view.num_nodes)
        graphs = view.batch[hyperedge_index]
        if graphs.numel() and not bool((graphs == graphs[0]).all()):
            raise ValueError("every column of 'hyperedge_index' must hold "
                             "nodes of one graph")
        targets = {'hyperedge': Target('hyperedge', view, hyperedge_index)}
    return view, targets


def _check_hyperedges(index: Optional[Tensor], k: int, num_nodes: int):
    if not isinstance(index, Tensor) or index.dim() != 2 or index.size(
            0) != k or index.dtype != torch.long:
        got = list(index.shape) if isinstance(index, Tensor) else index
        raise ValueError(f"'hyperedge_index' must be a long tensor of shape "
                         f"[{k}, num_hyperedges], got {got}")
    if index.numel() == 0:
        return
    if int(index.min()) < 0 or int(index.max()) >= num_nodes:
        raise ValueError(f"'hyperedge_index' has node indices outside "
                         f"[0, {num_nodes})")
    ordered = index.sort(dim=0)[0]
    if (ordered[1:] == ordered[:-1]).any():
        raise ValueError("'hyperedge_index' columns must hold distinct nodes "
                         "(k-uniform hyperedges)")
