r"""One rule for the layers and models that take PyG's tensors
(:obj:`x`, :obj:`edge_index`, :obj:`batch`) and read a view: use the view
passed in, after checking it belongs to these tensors, or build it."""
from typing import Optional, Union

from torch import Tensor

from torch_geometric_hot.data.node_view import NodeView
from torch_geometric_hot.data.pair_view import PairView

View = Union[PairView, NodeView]


def _check_view(view: View, x: Tensor) -> View:
    if view.num_nodes != x.size(0):
        raise ValueError(f"'view' has {view.num_nodes} nodes but 'x' has "
                         f"{x.size(0)} rows (was it built for another "
                         f"batch?)")
    if view.batch.device != x.device:
        raise ValueError(f"'view' lives on {view.batch.device} but 'x' on "
                         f"{x.device}: build the view from tensors on the "
                         f"same device (e.g. after data.to(device))")
    return view


def resolve_pair_view(x: Tensor, edge_index: Tensor,
                      batch: Optional[Tensor] = None,
                      num_graphs: Optional[int] = None,
                      view: Optional[PairView] = None) -> PairView:
    r"""The pair view of a (batched) graph: :obj:`view` when given (checked
    against :obj:`x`), else built from :obj:`edge_index`
    (:meth:`PairView.build`).

    Args:
        x (torch.Tensor): Node features :obj:`[n, *]`.
        edge_index (torch.Tensor): Edges :obj:`[2, m]`.
        batch (torch.Tensor, optional): Graph of every node :obj:`[n]`.
        num_graphs (int, optional): Number of graphs in the batch.
        view (PairView, optional): A view built beforehand, e.g.
            :meth:`PairView.from_data` on a batch whose graphs carry
            :class:`~torch_geometric_hot.transforms.AddSecondOrderView`.
    """
    if view is not None:
        if not isinstance(view, PairView):
            raise TypeError(f"'view' must be a PairView, got "
                            f"{type(view).__name__}")
        return _check_view(view, x)
    if edge_index.device != x.device:
        raise ValueError(f"'edge_index' lives on {edge_index.device} but 'x' "
                         f"on {x.device}")
    if batch is not None and batch.device != x.device:
        raise ValueError(f"'batch' lives on {batch.device} but 'x' on "
                         f"{x.device}")
    return PairView.build(edge_index, x.size(0), batch, num_graphs)


def resolve_node_view(x: Tensor, batch: Optional[Tensor] = None,
                      num_graphs: Optional[int] = None,
                      view: Optional[View] = None) -> View:
    r"""The node view of a (batched) set of nodes: :obj:`view` when given
    (a :class:`NodeView` or :class:`PairView`, checked against :obj:`x`),
    else built from :obj:`batch`."""
    if view is not None:
        return _check_view(view, x)
    if batch is not None and batch.device != x.device:
        raise ValueError(f"'batch' lives on {batch.device} but 'x' on "
                         f"{x.device}")
    return NodeView(x.size(0), batch, num_graphs, device=x.device)
