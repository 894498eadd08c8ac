r"""Attaches candidate tuples for N-simplicial attention."""
import torch
from torch_geometric.data import Data
from torch_geometric.data.datapipes import functional_transform
from torch_geometric.transforms import BaseTransform

from torch_geometric_hot.data.simplex_candidates import (dense_simplices,
                                                         neighbour_simplices,
                                                         walk_simplices)
from torch_geometric_hot.transforms.data_device import data_device, \
    edge_index_or_empty

GENERATORS = ('dense', 'neighbours', 'walks')


@functional_transform('add_simplex_view')
class AddSimplexView(BaseTransform):
    r"""Attaches :obj:`simplex_index [N+1, T]` (row 0 the query node), the
    candidate tuples of :class:`~torch_geometric_hot.nn.SimplicialAttention`
    (`Dussolle & Liò 2025 <https://arxiv.org/abs/2511.04624>`_), computed
    once (e.g. as a :obj:`pre_transform`) instead of at every forward. Its
    name contains ``"index"``, so the stock
    :class:`~torch_geometric.loader.DataLoader` offsets it by
    :obj:`num_nodes` and the batch never mixes graphs; pass it as
    :obj:`conv(x, simplex_index=batch.simplex_index, batch=batch.batch)`.

    Args:
        order (int, optional): Number of key slots :math:`N`. (default: 2)
        candidates (str, optional): ``'dense'`` (all :math:`n^{N+1}`
            tuples), ``'neighbours'`` or ``'walks'`` (see
            :mod:`torch_geometric_hot.data.simplex_candidates`).
            (default: ``'walks'``)
        include_self (bool, optional): For ``'neighbours'``/``'walks'``,
            count every node as its own neighbour. (default: :obj:`False`)
    """
    def __init__(self, order: int = 2, candidates: str = 'walks',
                 include_self: bool = False) -> None:
        if candidates not in GENERATORS:
            raise ValueError(f"'candidates' must be one of {GENERATORS}, "
                             f"got {candidates!r}")
        self.order = order
        self.candidates = candidates
        self.include_self = include_self

    def forward(self, data: Data) -> Data:
        n = data.num_nodes
        if self.candidates == 'dense':
            batch = torch.zeros(n, dtype=torch.long, device=data_device(data))
            data.simplex_index = dense_simplices(n, self.order, batch)
        else:
            generate = (neighbour_simplices if self.candidates
                        == 'neighbours' else walk_simplices)
            data.simplex_index = generate(edge_index_or_empty(data), n,
                                          self.order,
                                          self.include_self)
        return data

    def __repr__(self) -> str:
        return (f'{self.__class__.__name__}(order={self.order}, '
                f'candidates={self.candidates!r}, '
                f'include_self={self.include_self})')
