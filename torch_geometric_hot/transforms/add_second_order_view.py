import torch
from torch_geometric.data import Data
from torch_geometric.data.datapipes import functional_transform
from torch_geometric.transforms import BaseTransform

from torch_geometric_hot.data.pair_view import PairView, build_pair_index
from torch_geometric_hot.transforms.data_device import \
    edge_index_or_empty


@functional_transform('add_second_order_view')
class AddSecondOrderView(BaseTransform):
    r"""Attaches the second-order (pair) view of a graph, as used by the
    `Higher-Order Transformers <https://arxiv.org/abs/2111.00862>`_ layers
    (``docs/design.md``, "The pair view"): the entry set
    :math:`P = \{(i, i)\} \cup E` with :math:`|P| = n + m`.

    Adds

    * :obj:`pair_index` :obj:`[2, n + m']`: diagonal entries in node order,
      then the distinct off-diagonal edges sorted by (row, col). Its name
      contains ``"index"``, so the stock
      :class:`~torch_geometric.loader.DataLoader` increments it by
      :obj:`num_nodes`;
    * :obj:`pair_transpose` :obj:`[n + m']`: position of :math:`(j, i)` for
      entry :math:`(i, j)` **within the graph's own entries**, :obj:`-1`
      when absent. Graph-local positions batch by plain concatenation;
      :meth:`PairView.from_data` shifts them per graph;
    * optionally :obj:`pair_x` :obj:`[n + m', C + C_e]`:
      :math:`[x_i \,\|\, 0]` on diagonal entries and
      :math:`[0 \,\|\, e_{ij}]` on edges (duplicates averaged, self-loop
      features on the diagonal's edge channels).

    Self-loops are not off-diagonal entries; duplicate edges are merged; a
    graph without :obj:`edge_index` has no edges.
    Building costs :math:`O((n+m) \log(n+m))` (one sort and one
    :obj:`searchsorted`).

    Args:
        pair_x (bool, optional): Also attach :obj:`pair_x` built from
            :obj:`x` and :obj:`edge_attr` (float features).
            (default: :obj:`False`)

    Example:
        >>> import torch
        >>> from torch_geometric.data import Data
        >>> from torch_geometric_hot.transforms import AddSecondOrderView
        >>> edge_index = torch.tensor([[0, 1, 1], [1, 0, 2]])  # 1 -> 2 one-way
        >>> data = AddSecondOrderView()(Data(edge_index=edge_index,
        ...                                  num_nodes=3))
        >>> data.pair_index
        tensor([[0, 1, 2, 0, 1, 1],
                [0, 1, 2, 1, 0, 2]])
        >>> data.pair_transpose
        tensor([ 0,  1,  2,  4,  3, -1])
    """
    def __init__(self, pair_x: bool = False) -> None:
        self.pair_x = pair_x

    def forward(self, data: Data) -> Data:
        num_nodes = data.num_nodes
        if num_nodes is None:
            raise ValueError("AddSecondOrderView needs 'num_nodes' (or 'x')")
        pair_index, transpose, edge_entry = build_pair_index(
            edge_index_or_empty(data), num_nodes)
        data.pair_index = pair_index
        data.pair_transpose = transpose
        if self.pair_x:
            data.pair_x = self._pair_features(data, pair_index, transpose,
                                              edge_entry)
        return data

    @staticmethod
    def _pair_features(data: Data, pair_index, transpose,
                       edge_entry) -> torch.Tensor:
        x = data.x
        if x is None or not torch.is_floating_point(x):
            raise ValueError("AddSecondOrderView(pair_x=True) needs float "
                             "node features 'x'")
        x = x.view(-1, 1) if x.dim() == 1 else x
        view = PairView(pair_index, data.num_nodes, transpose=transpose,
                        edge_entry=edge_entry)
        edge_attr = getattr(data, 'edge_attr', None)
        if edge_attr is None:
            return view.lift(x)
        edge_attr = edge_attr.view(-1, 1) if edge_attr.dim() == 1 else \
            edge_attr
        zeros_x = x.new_zeros(x.size(0), edge_attr.size(1))
        zeros_e = edge_attr.new_zeros(edge_attr.size(0), x.size(1))
        return view.lift(torch.cat([x, zeros_x], dim=1),
                         torch.cat([zeros_e, edge_attr.to(x.dtype)], dim=1))

    def __repr__(self) -> str:
        return f'{self.__class__.__name__}(pair_x={self.pair_x})'
