import math
from typing import Optional, Set, Tuple

import torch
from torch_geometric.data import Data
from torch_geometric.data.datapipes import functional_transform
from torch_geometric.transforms import BaseTransform

from torch_geometric_hot.data.pair_view import check_edge_index
from torch_geometric_hot.validation import (check_size,
                                            current_size_limit)
from torch_geometric_hot.transforms.data_device import data_device, \
    edge_index_or_empty


def k_cliques(edge_index: torch.Tensor, num_nodes: int,
              k: int) -> Set[Tuple[int, ...]]:
    r"""All k-cliques of the undirected graph, as sorted node tuples;
    raises :class:`~torch_geometric_hot.validation.SizeLimitError`
    as soon as their :math:`k` nodes each exceed the size limit."""
    most = current_size_limit() // k  # the cliques the limit allows
    neighbours = [set() for _ in range(num_nodes)]
    for u, v in edge_index.t().tolist():
        if u != v:
            neighbours[u].add(v)
            neighbours[v].add(u)
    cliques: Set[Tuple[int, ...]] = set()

    def extend(clique, candidates):
        if len(clique) == k:
            cliques.add(tuple(clique))
            if len(cliques) > most:
                check_size(len(cliques) * k, f"the {k}-cliques of the graph "
                           f"(more than {most} so far)")
            return
        for v in sorted(candidates):
            if v > clique[-1]:
                extend(clique + [v], candidates & neighbours[v])

    for u in range(num_nodes):
        extend([u], {v for v in neighbours[u] if v > u})
    return cliques


@functional_transform('add_hyperedge_view')
class AddHyperedgeView(BaseTransform):
    r"""Attaches k-uniform candidate hyperedges and their labels, the
    output elements of :math:`1 \to k` layers (`HOT
    <https://arxiv.org/abs/2110.14416>`_ §5, k-uniform hyperedge
    prediction).

    Positives are the columns of :obj:`data[source]` (a :obj:`[k, h]`
    tensor of true hyperedges) when present, otherwise the k-cliques of the
    graph (triangles for :math:`k = 3`). Candidates are all k-subsets of the
    graph's nodes when there are at most :obj:`max_candidates` of them,
    otherwise the positives plus :obj:`num_negatives` random non-positive
    k-subsets per positive (HOT App. A.2.7 uses 5).

    Adds :obj:`hyperedge_index` :obj:`[k, h]` (sorted distinct nodes per
    column; batched by node offset since its name contains ``"index"``)
    and :obj:`hyperedge_label` :obj:`[h]` (1.0 for positives).

    Args:
        k (int): Hyperedge size (:math:`k \ge 2`).
        source (str, optional): Attribute holding the true hyperedges.
            (default: ``'hyperedges'``)
        max_candidates (int, optional): Enumerate all k-subsets up to this
            many. (default: :obj:`10000`)
        num_negatives (int, optional): Negatives per positive when
            sampling. (default: :obj:`5`)
        seed (int, optional): Seed of the negative sampling.
            (default: :obj:`0`)
    """
    def __init__(self, k: int, source: str = 'hyperedges',
                 max_candidates: int = 10000, num_negatives: int = 5,
                 seed: Optional[int] = 0) -> None:
        if k < 2:
            raise ValueError(f"'k' must be at least 2, got {k}")
        self.k = k
        self.source = source
        self.max_candidates = max_candidates
        self.num_negatives = num_negatives
        self.seed = seed

    def _positives(self, data: Data, n: int) -> Set[Tuple[int, ...]]:
        given = getattr(data, self.source, None)
        if given is None:
            return k_cliques(edge_index_or_empty(data), n, self.k)
        if given.dim() != 2 or given.size(0) != self.k:
            raise ValueError(f"'{self.source}' must have shape "
                             f"[{self.k}, num_hyperedges], got "
                             f"{list(given.shape)}")
        check_edge_index(given[:2], n, self.source)
        return {tuple(sorted(c)) for c in given.t().tolist()}

    def forward(self, data: Data) -> Data:
        n = data.num_nodes
        check_edge_index(edge_index_or_empty(data), n)
        positives = self._positives(data, n)
        if any(len(set(p)) != self.k for p in positives):
            raise ValueError(f"'{self.source}' columns must hold "
                             f"{self.k} distinct nodes")
        # Candidates are enumerated on the host (sets of Python tuples);
        # only the result moves to the graph's device.
        if n < self.k:
            candidates = []
        elif math.comb(n, self.k) <= self.max_candidates:
            check_size(math.comb(n, self.k) * self.k,
                       f"all {self.k}-subsets of {n} nodes as candidates")
            candidates = [
                tuple(c) for c in torch.combinations(
                    torch.arange(n, device='cpu'), self.k).tolist()
            ]
        else:
            gen = torch.Generator().manual_seed(self.seed or 0)
            wanted = self.num_negatives * max(len(positives), 1)
            negatives: Set[Tuple[int, ...]] = set()
            for _ in range(100 * wanted):
                if len(negatives) >= wanted:
                    break
                c = tuple(
                    sorted(
                        torch.randperm(n, generator=gen,
                                       device='cpu')[:self.k].tolist()))
                if c not in positives:
                    negatives.add(c)
            candidates = sorted(positives) + sorted(negatives)
        device = data_device(data)
        data.hyperedge_index = torch.tensor(
            candidates, dtype=torch.long, device=device).t().reshape(
                self.k, -1)
        data.hyperedge_label = torch.tensor(
            [float(c in positives) for c in candidates], device=device)
        return data

    def __repr__(self) -> str:
        return (f'{self.__class__.__name__}(k={self.k}, '
                f'source={self.source!r}, '
                f'max_candidates={self.max_candidates}, '
                f'num_negatives={self.num_negatives}, seed={self.seed})')
