r"""Batches of a few fixed sizes: graphs padded with padding graphs, as
jraph's ``pad_with_graphs`` pads, so that a model compiled by
:func:`torch.compile` (``dynamic=False``, CUDA graphs) sees a few shapes
instead of one per batch.

A batch's shapes are those of its tensors (nodes, edges, graphs, and the
pair view's entries) and the block sizes of its planned layouts (the
largest graph's nodes and edges: the widths of the padded blocks).
:class:`PadToBuckets` rounds each of them up to a size bucket (a geometric
series) and appends padding graphs that fill the difference: the first
one exactly as large as the two widths (so the blocks are as wide as the
buckets, whatever the real graphs), the others at most as large and none
empty (a layout leaves an empty graph out of its blocks, which would
change their shapes). Padding graphs are graphs of their own: every layer
of the library keeps graphs apart, so a real graph's output does not
depend on them
(except through batch statistics: a ``BatchNorm`` in training mode). They
come last; :obj:`batch.num_real_graphs` says how many graphs are real, and
:func:`real_graphs` cuts a per-graph output or target to them.
"""
import math
from typing import Callable, Dict, List, NamedTuple, Optional, Sequence, \
    Set, Tuple

import torch
from torch import Tensor
from torch_geometric.data import Data


class Buckets(NamedTuple):
    r"""The padded sizes of one batch.

    Attributes:
        nodes (int): Nodes of the batch.
        edges (int): Edges of the batch (:obj:`edge_index` columns).
        graphs (int): Graphs of the batch, padding graphs included.
        width (int): Nodes of the largest graph.
        edge_width (int): Edges of the graph with the most edges.
    """
    nodes: int
    edges: int
    graphs: int
    width: int
    edge_width: int


def bucket(value: int, ratio: float, smallest: int = 1) -> int:
    r"""The smallest term of the series :math:`s_0 = \text{smallest}`,
    :math:`s_{i+1} = \lceil r s_i \rceil` (strictly increasing) that is at
    least :obj:`value` (:obj:`0` for :obj:`value` :obj:`0`)."""
    if value <= 0:
        return 0
    size = smallest
    while size < value:
        size = max(size + 1, math.ceil(size * ratio))
    return size


def padding_edges(num_nodes: int, num_edges: int) -> Tensor:
    r""":obj:`num_edges` distinct directed edges between :obj:`num_nodes`
    nodes without self-loops (node :math:`i` to :math:`i + d \bmod n` for
    :math:`d = 1, 2, \ldots`), shape :obj:`[2, num_edges]`."""
    if num_edges > num_nodes * (num_nodes - 1):
        raise ValueError(f"a padding graph of {num_nodes} nodes holds at "
                         f"most {num_nodes * (num_nodes - 1)} edges, got "
                         f"{num_edges}")
    k = torch.arange(num_edges)
    src = k % max(num_nodes, 1)
    dst = (src + 1 + k // max(num_nodes, 1)) % max(num_nodes, 1)
    return torch.stack([src, dst])


class PadToBuckets:
    r"""Pads a list of graphs with padding graphs to bucketed sizes
    (:class:`Buckets`); a batch of the padded list has one of a few shapes.

    Each size is rounded up to the series of :func:`bucket` with
    :obj:`ratio`: the largest graph's nodes (:obj:`width`) and edges
    (:obj:`edge_width`, raised where needed so that a graph of
    :obj:`width` nodes holds them), then the batch's graphs (one padding
    graph at least), nodes and edges, each raised to the next bucket until
    the padding graphs can hold the difference. The first padding graph
    has exactly :obj:`width` nodes and :obj:`edge_width` edges; the others
    at least 2 nodes and 1 edge and at most as many as the first.

    A padding graph has its structure, the attributes :obj:`keys` of the
    first graph of the list, zero (node attributes :obj:`[n, ...]`, edge
    attributes :obj:`[m, ...]`, the others shaped as the first graph's),
    then :obj:`pre_transform` (the dataset's: it recomputes what it
    derives from the structure, e.g. the pair view's index or node
    identifiers); a string or number attribute of the graphs is empty or
    zero, and any other attribute that neither gives is an error.

    Args:
        pre_transform (callable, optional): The dataset's
            ``pre_transform``.
        keys (sequence of str, optional): Attributes the padding graphs
            take as zeros. (default: :obj:`x`, :obj:`edge_attr`,
            :obj:`edge_weight`, :obj:`pos`, :obj:`y`)
        at_least (Buckets, optional): Sizes to pad to at least (e.g. the
            largest of a fixed set of batches, to give them one shape).
        ratio (float, optional): Growth of the size series (> 1).
            (default: :obj:`1.25`)
        smallest (int, optional): First term of the series.
            (default: :obj:`8`)

    Example:
        >>> import torch
        >>> from torch_geometric.data import Batch, Data
        >>> from torch_geometric_hot.data import PadToBuckets
        >>> graphs = [Data(x=torch.ones(n, 2), edge_index=torch.tensor(
        ...     [[0, 1], [1, 0]]), y=torch.ones(1)) for n in (3, 5)]
        >>> padded = PadToBuckets()(graphs)
        >>> batch = Batch.from_data_list(padded)
        >>> (batch.num_nodes, batch.num_edges, batch.num_graphs)
        (28, 17, 8)
    """
    def __init__(self, pre_transform: Optional[Callable[[Data], Data]] =
                 None, ratio: float = 1.25, smallest: int = 8,
                 keys: Sequence[str] = ('x', 'edge_attr', 'edge_weight',
                                        'pos', 'y'),
                 at_least: Optional[Buckets] = None) -> None:
        if not ratio > 1:
            raise ValueError(f"'ratio' must be > 1, got {ratio}")
        if not isinstance(smallest, int) or smallest < 1:
            raise ValueError(f"'smallest' must be a positive int, got "
                             f"{smallest!r}")
        self.pre_transform, self.ratio, self.smallest = pre_transform, \
            ratio, smallest
        self.keys = tuple(keys)
        self.at_least = Buckets(0, 0, 0, 0, 0) if at_least is None else \
            Buckets(*at_least)
        self._graphs: Dict[Tuple[int, int], Data] = {}
        #: The :class:`Buckets` of the lists padded so far (in this
        #: process).
        self.seen: Set[Buckets] = set()

    def buckets(self, data_list: Sequence[Data]) -> Tuple[Buckets, List[
            Tuple[int, int]]]:
        r"""The padded sizes of :obj:`data_list` and the (nodes, edges) of
        each padding graph."""
        def size(value: int) -> int:
            return bucket(value, self.ratio, self.smallest)

        nodes = [int(d.num_nodes) for d in data_list]
        edges = [int(d.num_edges) for d in data_list]
        least = self.at_least
        width = size(max(max(nodes, default=0), 2, least.width))
        edge_width = size(max(max(edges, default=0), 1, least.edge_width))
        while edge_width > width * (width - 1):
            width = size(width + 1)
        real_nodes, real_edges = sum(nodes), sum(edges)
        graphs = size(max(len(data_list) + 1, least.graphs))
        total_nodes, total_edges = size(least.nodes), size(least.edges)
        while True:
            extra = graphs - len(data_list) - 1  # the small padding graphs
            total_nodes = max(total_nodes, size(real_nodes + width +
                                                2 * extra))
            total_edges = max(total_edges, size(real_edges + edge_width +
                                                extra))
            pads = _padding_graphs(total_nodes - real_nodes,
                                   total_edges - real_edges, graphs -
                                   len(data_list), width, edge_width)
            if pads is not None:
                break
            if _needs_graphs(total_nodes - real_nodes,
                             graphs - len(data_list), width):
                graphs = size(graphs + 1)
            else:
                total_nodes = size(total_nodes + 1)  # room for the edges
        return Buckets(total_nodes, total_edges, graphs, width,
                       edge_width), pads

    def __call__(self, data_list: Sequence[Data]) -> List[Data]:
        if not data_list:
            raise ValueError("'data_list' must hold at least one graph")
        sizes, pads = self.buckets(data_list)
        self.seen.add(sizes)
        template = data_list[0]
        return list(data_list) + [self._padding(template, n, m)
                                  for n, m in pads]

    def _padding(self, template: Data, num_nodes: int,
                 num_edges: int) -> Data:
        key = (num_nodes, num_edges)
        graph = self._graphs.get(key)
        if graph is None:
            graph = self._graphs[key] = self._make(template, num_nodes,
                                                   num_edges)
        return graph

    def _make(self, template: Data, num_nodes: int, num_edges: int) -> Data:
        out = Data(edge_index=padding_edges(num_nodes, num_edges))
        for key, value in template.items():
            if key not in self.keys or not isinstance(value, Tensor):
                continue
            if template.is_node_attr(key):
                shape = (num_nodes, *value.shape[1:])
            elif template.is_edge_attr(key):
                shape = (num_edges, *value.shape[1:])
            else:
                shape = tuple(value.shape)
            out[key] = torch.zeros(shape, dtype=value.dtype)
        if 'num_nodes' in template.keys() or out.num_nodes != num_nodes:
            out.num_nodes = num_nodes  # no node attribute gives it
        if self.pre_transform is not None:
            out = self.pre_transform(out)
        for key, value in template.items():  # e.g. a SMILES string: empty
            if key not in out and isinstance(value, (str, int, float)):
                out[key] = type(value)()
        missing = set(template.keys()) - set(out.keys())
        if missing:
            raise ValueError(f"padding graphs lack {sorted(missing)} of the "
                             f"dataset's graphs; give 'pre_transform' the "
                             f"dataset's pre_transform, or name raw "
                             f"attributes in 'keys'")
        return out

    def __repr__(self) -> str:
        return (f'{self.__class__.__name__}(ratio={self.ratio}, '
                f'smallest={self.smallest})')


def _padding_graphs(nodes: int, edges: int, count: int, width: int,
                    edge_width: int) -> Optional[List[Tuple[int, int]]]:
    # count graphs holding the nodes and edges: the first exactly (width,
    # edge_width), the others at least (2, 1) and at most as large; None
    # where that is impossible
    if count < 1 or nodes < width + 2 * (count - 1) or \
            edges < edge_width + count - 1:
        return None
    pads = [[width, edge_width]] + [[2, 1] for _ in range(count - 1)]
    nodes -= width + 2 * (count - 1)
    edges -= edge_width + count - 1
    for pad in pads[1:]:  # fill graph after graph
        more = min(width - pad[0], nodes)
        pad[0], nodes = pad[0] + more, nodes - more
        more = min(min(edge_width, pad[0] * (pad[0] - 1)) - pad[1], edges)
        pad[1], edges = pad[1] + more, edges - more
    if nodes or edges:
        return None
    return [(n, m) for n, m in pads]


def _needs_graphs(nodes: int, count: int, width: int) -> bool:
    # whether the padding nodes overflow count graphs of at most width
    return nodes > count * width


def real_graphs(out: Tensor, batch) -> Tensor:
    r"""The rows of the real graphs of a per-graph :obj:`out` (all of them
    where :obj:`batch` was not padded)."""
    count = getattr(batch, 'num_real_graphs', None)
    return out if count is None else out[:count]


__all__ = ['Buckets', 'PadToBuckets', 'bucket', 'padding_edges',
           'real_graphs']
