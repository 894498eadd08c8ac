r"""One rule for the layers and models that take PyG's tensors
(:obj:`x`, :obj:`edge_index`, :obj:`batch`) and read a view: use the view
passed in, after checking it belongs to these tensors, or build it."""
from typing import Optional, Union

from torch import Tensor

from torch_geometric_hot.data.node_view import NodeView
from torch_geometric_hot.data.pair_view import PairView
from torch_geometric_hot.validation import validating

View = Union[PairView, NodeView]


def _check_view(view: View, x: Tensor, batch: Optional[Tensor] = None,
                num_graphs: Optional[int] = None) -> View:
    if view.num_nodes != x.size(0):
        raise ValueError(f"'view' has {view.num_nodes} nodes but 'x' has "
                         f"{x.size(0)} rows (was it built for another "
                         f"batch?)")
    if view.batch.device != x.device:
        raise ValueError(f"'view' lives on {view.batch.device} but 'x' on "
                         f"{x.device}: build the view from tensors on the "
                         f"same device (e.g. after data.to(device))")
    if num_graphs is not None and num_graphs != view.num_graphs:
        raise ValueError(f"'num_graphs' is {num_graphs} but 'view' has "
                         f"{view.num_graphs} graphs (was it built for "
                         f"another batch?)")
    # host synchronisation: a value check, skipped with validation off
    if isinstance(batch, Tensor) and validating() and (
            batch.shape != view.batch.shape or batch.device != x.device
            or not bool((batch == view.batch).all())):
        raise ValueError("'batch' is not the graph ids 'view' was built "
                         "with (was it built for another batch?)")
    return view


def _check_edges(view: PairView, edge_index: Optional[Tensor]) -> None:
    # the raw edges the view was built from (their features are lifted
    # through it): the same number, and while validating the same pairs
    edge_entry = view._edge_entry
    if not isinstance(edge_index, Tensor) or edge_entry is None:
        return
    if edge_index.dim() != 2 or edge_index.size(1) != edge_entry.numel():
        raise ValueError(f"'edge_index' has shape {list(edge_index.shape)} "
                         f"but 'view' was built from {edge_entry.numel()} "
                         f"edges (was it built for another batch?)")
    # host synchronisation: a value check, skipped with validation off
    if edge_index.numel() and validating() and (
            edge_index.device != edge_entry.device or not bool(
                ((view.row[edge_entry] == edge_index[0]) &
                 (view.col[edge_entry] == edge_index[1])).all())):
        raise ValueError("'edge_index' is not the edges 'view' was built "
                         "from (was it built for another batch?)")


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
        _check_edges(view, edge_index)
        return _check_view(view, x, batch, num_graphs)
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
        return _check_view(view, x, batch, num_graphs)
    if batch is not None and batch.device != x.device:
        raise ValueError(f"'batch' lives on {batch.device} but 'x' on "
                         f"{x.device}")
    return NodeView(x.size(0), batch, num_graphs, device=x.device)
