r"""The second-order (pair) view of a graph and its per-batch index bundle.

The second-order tensor of a graph is stored on the entry set
:math:`P = D \cup E`: one diagonal entry :math:`(i, i)` per node and the
directed edges :math:`(i, j), i \neq j` (``docs/design.md``, "The pair
view"). Policy for raw edges:

* **self-loops** :math:`(i, i)` are not off-diagonal entries; their edge
  features land on the diagonal entry of :math:`i` (see :meth:`PairView.lift`);
* **duplicate edges** are merged into one entry; their features are averaged.
"""
from typing import Optional, Tuple

import torch
from torch import Tensor

from torch_geometric_hot.ops.plan_cache import PlanCache
from torch_geometric_hot.ops.scatter import scatter_sum, segment_counts
from torch_geometric_hot.validation import (check_batch, check_device,
                                            check_edge_index, check_rows,
                                            check_within_graphs,
                                            validating)


def build_pair_index(edge_index: Tensor,
                     num_nodes: int) -> Tuple[Tensor, Tensor, Tensor]:
    r"""Builds the pair view of a (possibly batched) graph in
    :math:`O((n+m)\log(n+m))`.

    Args:
        edge_index (torch.Tensor): Edges of shape :obj:`[2, m]`.
        num_nodes (int): Number of nodes :math:`n`.

    Returns:
        tuple: :obj:`pair_index` :obj:`[2, n + m']` (the :math:`n` diagonal
        entries in node order, then the :math:`m'` distinct off-diagonal
        edges sorted by (row, col)), :obj:`pair_transpose` :obj:`[n + m']`
        (position of :math:`(j, i)` for entry :math:`(i, j)`, or :obj:`-1`
        when it is absent) and :obj:`edge_entry` :obj:`[m]` (the entry
        every input edge lands on).
    """
    check_edge_index(edge_index, num_nodes)
    edge_index = edge_index.long()
    row, col = edge_index
    nodes = torch.arange(num_nodes, device=row.device)
    loop = row == col
    keys = row * num_nodes + col
    off_keys, inverse = torch.unique(keys[~loop], sorted=True,
                                     return_inverse=True)
    off_row = torch.div(off_keys, max(num_nodes, 1), rounding_mode='floor')
    off_col = off_keys - off_row * num_nodes
    pair_index = torch.cat(
        [torch.stack([nodes, nodes]),
         torch.stack([off_row, off_col])], dim=1)

    reverse = off_col * num_nodes + off_row
    pos = torch.searchsorted(off_keys, reverse)
    found = pos < off_keys.numel()
    found[found.clone()] = off_keys[pos[found]] == reverse[found]
    transpose = torch.cat([nodes, torch.where(found, pos + num_nodes, -1)])

    edge_entry = torch.empty_like(row)
    edge_entry[loop] = row[loop]
    edge_entry[~loop] = inverse + num_nodes
    return pair_index, transpose, edge_entry


def _globalise_transpose(local: Tensor, pair_index: Tensor,
                         batch: Optional[Tensor], num_graphs: int) -> Tensor:
    # ``pair_transpose`` is stored graph-local (positions within its own
    # graph's entries, -1 when absent) so that the stock DataLoader batches
    # it by plain concatenation; shift it by each graph's first entry.
    if batch is None:
        return local
    if local.numel() != pair_index.size(1):
        raise ValueError(f"'pair_transpose' must have {pair_index.size(1)} "
                         f"entries, got {local.numel()}")
    entry_batch = batch[pair_index[0].long()]
    if entry_batch.numel() > 1 and (entry_batch[1:] < entry_batch[:-1]).any():
        raise ValueError("entries of 'pair_index' must be grouped graph by "
                         "graph to use 'pair_transpose'")
    counts = segment_counts(entry_batch, num_graphs)
    ptr = counts.cumsum(0) - counts
    local = local.long()
    return torch.where(local >= 0, local + ptr[entry_batch], -1)


class PairView(PlanCache):
    r"""Index bundle of a (batched) pair view: every index, count and group
    that the second-order layers need, computed once per batch and shared by
    all layers of a forward pass (with the plans they derive from it, see
    :class:`~torch_geometric_hot.data.PlanCache`).

    Entries may come in any order (e.g. graph by graph, as PyG batches the
    per-graph views of
    :class:`~torch_geometric_hot.transforms.AddSecondOrderView`); the bundle
    records where the diagonal and off-diagonal entries are.

    Args:
        pair_index (torch.Tensor): Entries :obj:`[2, P]`; exactly one
            diagonal entry per node, no duplicate entries.
        num_nodes (int): Number of nodes.
        batch (torch.Tensor, optional): Graph of every node :obj:`[n]`.
        num_graphs (int, optional): Number of graphs.
        transpose (torch.Tensor, optional): Position of :math:`(j, i)` for
            every entry, :obj:`-1` when absent. Computed when omitted.
        edge_entry (torch.Tensor, optional): Entry of every raw edge, used
            by :meth:`lift`.
    """
    def __init__(self, pair_index: Tensor, num_nodes: int,
                 batch: Optional[Tensor] = None,
                 num_graphs: Optional[int] = None,
                 transpose: Optional[Tensor] = None,
                 edge_entry: Optional[Tensor] = None) -> None:
        check_edge_index(pair_index, num_nodes, 'pair_index')
        pair_index = pair_index.long()
        device = pair_index.device
        self.num_nodes = num_nodes
        self.num_entries = pair_index.size(1)
        self.row, self.col = pair_index
        batch, num_graphs = check_batch(batch, num_nodes, num_graphs,
                                        device=device)
        check_within_graphs(pair_index, batch, 'pair_index')
        self.batch = batch
        self.num_graphs = num_graphs

        is_diag = self.row == self.col
        diag_pos = is_diag.nonzero().view(-1)
        diag_node = self.row[diag_pos]
        if diag_pos.numel() != num_nodes or (segment_counts(
                diag_node, num_nodes) != 1).any():
            raise ValueError("'pair_index' must contain exactly one diagonal "
                             "entry (i, i) per node (was the view built for "
                             "a different graph?)")
        self.diag_pos = torch.empty_like(diag_pos)
        self.diag_pos[diag_node] = diag_pos
        self.off_pos = (~is_diag).nonzero().view(-1)
        self.off_row = self.row[self.off_pos]
        self.off_col = self.col[self.off_pos]
        self.entry_batch = batch[self.row]
        self.off_batch = batch[self.off_row]

        if transpose is None:
            transpose = self._compute_transpose()
        elif transpose.numel() != self.num_entries:
            raise ValueError(f"'pair_transpose' must have {self.num_entries} "
                             f"entries, got {transpose.numel()}")
        self.transpose = transpose.long()
        self._check_transpose()
        # per entry (a diagonal entry is its own transpose), then per
        # off-diagonal entry
        self.entry_transpose = self.transpose.clamp(min=0)
        self.missing_transpose = self.transpose < 0
        self.all_transposes = not bool(self.missing_transpose.any())
        self.off_transpose = self.entry_transpose[self.off_pos]
        self.off_has_transpose = ~self.missing_transpose[self.off_pos]
        self._edge_entry = edge_entry

        self.deg_out = segment_counts(self.off_row, num_nodes)
        self.deg_in = segment_counts(self.off_col, num_nodes)
        self.nodes_per_graph = segment_counts(batch, num_graphs)
        self.edges_per_graph = segment_counts(self.off_batch, num_graphs)

    # ------------------------------------------------------------------
    @classmethod
    def build(cls, edge_index: Tensor, num_nodes: int,
              batch: Optional[Tensor] = None,
              num_graphs: Optional[int] = None) -> 'PairView':
        r"""Builds the view on the fly from raw edges (self-loops and
        duplicates handled as documented in this module)."""
        if batch is not None:
            check_edge_index(edge_index, num_nodes)
            checked, _ = check_batch(batch, num_nodes, num_graphs,
                                     device=edge_index.device)
            check_within_graphs(edge_index, checked)
        pair_index, transpose, edge_entry = build_pair_index(
            edge_index, num_nodes)
        return cls(pair_index, num_nodes, batch, num_graphs, transpose,
                   edge_entry)

    @classmethod
    def from_data(cls, data) -> 'PairView':
        r"""The view of a :class:`~torch_geometric.data.Data` or
        :class:`~torch_geometric.data.Batch`: uses :obj:`pair_index` and
        :obj:`pair_transpose` when a transform attached them, else builds it
        from :obj:`edge_index`."""
        num_nodes = data.num_nodes
        batch = getattr(data, 'batch', None)
        num_graphs = getattr(data, 'num_graphs', None) if batch is not None \
            else 1
        if getattr(data, 'pair_index', None) is None:
            return cls.build(data.edge_index, num_nodes, batch, num_graphs)
        pair_index = data.pair_index
        transpose = getattr(data, 'pair_transpose', None)
        if transpose is not None:
            transpose = _globalise_transpose(transpose, pair_index, batch,
                                             num_graphs)
        view = cls(pair_index, num_nodes, batch, num_graphs, transpose)
        edge_index = getattr(data, 'edge_index', None)
        if edge_index is not None:
            # located when the view is built, not at its first use: a view
            # that a forward pass changes would be a different input for
            # the next call of a compiled model (a recompile)
            view._edge_entry = view.locate(edge_index)
        return view

    # ------------------------------------------------------------------
    def _sorted_keys(self) -> Tuple[Tensor, Tensor]:
        keys = self.row * self.num_nodes + self.col
        sorted_keys, order = keys.sort()
        # host synchronisation: a value check, skipped with validation off
        if sorted_keys.numel() > 1 and validating() and bool(
                (sorted_keys[1:] == sorted_keys[:-1]).any()):
            raise ValueError("'pair_index' contains duplicate entries")
        return sorted_keys, order

    def locate(self, index: Tensor, name: str = 'edge_index') -> Tensor:
        r"""Entry position of every pair in :obj:`index` :obj:`[2, m]`
        (self-loops map to the diagonal entry)."""
        check_edge_index(index, self.num_nodes, name)
        sorted_keys, order = self._sorted_keys()
        query = index[0].long() * self.num_nodes + index[1].long()
        pos = torch.searchsorted(sorted_keys, query).clamp(
            max=max(sorted_keys.numel() - 1, 0))
        # host synchronisation: a value check, skipped with validation off
        if query.numel() and validating() and (
                sorted_keys.numel() == 0
                or bool((sorted_keys[pos] != query).any())):
            raise ValueError(f"'{name}' contains pairs that are not entries "
                             f"of the pair view (was it built for a "
                             f"different graph?)")
        return order[pos]

    def _compute_transpose(self) -> Tensor:
        sorted_keys, order = self._sorted_keys()
        reverse = self.col * self.num_nodes + self.row
        pos = torch.searchsorted(sorted_keys, reverse).clamp(
            max=max(sorted_keys.numel() - 1, 0))
        found = sorted_keys[pos] == reverse if sorted_keys.numel() else \
            torch.zeros_like(reverse, dtype=torch.bool)
        return torch.where(found, order[pos], -1)

    def _check_transpose(self) -> None:
        t = self.transpose
        if t.numel() and (int(t.max()) >= self.num_entries
                          or int(t.min()) < -1):
            raise ValueError("'pair_transpose' points outside the entries")
        has = t >= 0
        ok = (self.row[t[has]] == self.col[has]) & (self.col[t[has]]
                                                    == self.row[has])
        if not bool(ok.all()):
            raise ValueError("'pair_transpose' does not match 'pair_index' "
                             "(was the view built for a different graph?)")

    # ------------------------------------------------------------------
    def check_entries(self, x: Tensor, name: str = 'x') -> None:
        r"""Raises unless :obj:`x` has one row per entry, on the view's
        device."""
        check_rows(x, self.num_entries, name, 'pair entry')
        check_device(x, self.row.device, name, 'the view')

    def check_nodes(self, x: Tensor, name: str = 'x') -> None:
        r"""Raises unless :obj:`x` has one row per node, on the view's
        device."""
        check_rows(x, self.num_nodes, name, 'node')
        check_device(x, self.row.device, name, 'the view')

    @property
    def edge_entry(self) -> Tensor:
        r"""Entry of every raw edge (rows of the graph's :obj:`edge_index`),
        located when the view is built."""
        if self._edge_entry is None:
            raise ValueError("this view has no raw edges: build it with "
                             "PairView.build or PairView.from_data")
        return self._edge_entry

    def transpose_rows(self, x: Tensor) -> Tensor:
        r"""Rows of the off-diagonal entries' transposes,
        :math:`A_{ji}` for every off-diagonal :math:`(i, j)` (zero where
        :math:`(j, i)` is absent): shape :obj:`[num_off, *]`."""
        mask = self.off_has_transpose.view((-1, ) + (1, ) * (x.dim() - 1))
        return x.index_select(0, self.off_transpose) * mask

    def assemble(self, diag: Tensor, off: Tensor) -> Tensor:
        r"""Interleaves diagonal rows :obj:`[n, *]` and off-diagonal rows
        :obj:`[num_off, *]` into entry order :obj:`[P, *]`."""
        out = diag.new_empty((self.num_entries, ) + tuple(diag.shape[1:]))
        out = out.index_copy(0, self.diag_pos, diag)
        return out.index_copy(0, self.off_pos, off)

    def lift(self, node_feat: Tensor,
             edge_feat: Optional[Tensor] = None) -> Tensor:
        r"""Pair features :obj:`[P, C]`: node features on diagonal entries,
        edge features (rows aligned with the raw :obj:`edge_index`;
        duplicates averaged) on off-diagonal entries; a self-loop's
        features are averaged and added to its node's diagonal entry.

        Args:
            node_feat (torch.Tensor): :obj:`[n, C]`.
            edge_feat (torch.Tensor, optional): :obj:`[m, C]`.
        """
        self.check_nodes(node_feat, 'node_feat')
        out = node_feat.new_zeros((self.num_entries, ) +
                                  tuple(node_feat.shape[1:]))
        out = out.index_add(0, self.diag_pos, node_feat)
        if edge_feat is None:
            return out
        edge_entry = self.edge_entry
        if edge_feat.size(0) != edge_entry.numel() or (
                edge_feat.shape[1:] != node_feat.shape[1:]):
            shape = [edge_entry.numel(), *node_feat.shape[1:]]
            raise ValueError(f"'edge_feat' must have shape {shape} (one row "
                             f"per raw edge, as 'node_feat' per node), got "
                             f"{list(edge_feat.shape)}")
        counts = self.plan('edge_entry_counts', lambda: segment_counts(
            edge_entry, self.num_entries).clamp(min=1)).to(edge_feat.dtype)
        counts = counts.view((-1, ) + (1, ) * (edge_feat.dim() - 1))
        return out + scatter_sum(edge_feat, edge_entry,
                                 self.num_entries) / counts

    def __repr__(self) -> str:
        return (f'{self.__class__.__name__}(num_nodes={self.num_nodes}, '
                f'num_entries={self.num_entries}, '
                f'num_graphs={self.num_graphs})')
