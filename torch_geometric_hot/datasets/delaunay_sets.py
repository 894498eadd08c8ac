r"""The Delaunay set-to-graph task of `Set2Graph
<https://arxiv.org/abs/2002.08772>`_ (used by `HOT
<https://arxiv.org/abs/2110.14416>`_, §5, Table 3), generated offline."""
from typing import Callable, List, Optional, Tuple, Union

import torch
from torch import Tensor
from torch_geometric.data import Data, InMemoryDataset

from torch_geometric_hot.datasets.atomic_files import written_atomically

_SPLITS = ('train', 'val', 'test')
_SPLIT_SEEDS = {'train': 0, 'val': 1, 'test': 2}
Size = Union[int, Tuple[int, int]]


def delaunay_edges(pos: Tensor) -> Tensor:
    r"""The edges of the Delaunay triangulation of 2-D points, both
    directions, sorted by (row, col), :obj:`[2, m]`
    (:class:`scipy.spatial.Delaunay`; 3 points or fewer form a triangle or
    a segment)."""
    from scipy.spatial import Delaunay
    n = pos.size(0)
    if n < 2:
        return torch.empty(2, 0, dtype=torch.long)
    if n == 2:
        pairs = torch.tensor([[0, 1], [1, 0]])
    else:
        simplices = torch.from_numpy(Delaunay(pos.double().numpy())
                                     .simplices).long()
        pairs = torch.cat([simplices[:, [a, b]]
                           for a in range(3) for b in range(3) if a != b])
    keys = torch.unique(pairs[:, 0] * n + pairs[:, 1])
    return torch.stack([keys // n, keys % n])


def complete_edges(n: int) -> Tensor:
    r"""All ordered pairs :math:`(i, j), i \ne j` of :obj:`n` elements,
    sorted by (row, col), :obj:`[2, n(n-1)]`."""
    row, col = torch.meshgrid(torch.arange(n), torch.arange(n),
                              indexing='ij')
    keep = row != col
    return torch.stack([row[keep], col[keep]])


class DelaunaySets(InMemoryDataset):
    r"""Sets of points drawn uniformly in the unit square; the target graph
    is their Delaunay triangulation, as in the set-to-graph experiments of
    `HOT <https://arxiv.org/abs/2110.14416>`_ (Table 3: "Delaunay (50)"
    with :math:`n = 50` points per set and "Delaunay (20-80)" with
    :math:`n` uniform in :math:`[20, 80]`).

    Every set is a :class:`~torch_geometric.data.Data` with

    * :obj:`x` :obj:`[n, 2]`: the points (the model's only input);
    * :obj:`edge_index` :obj:`[2, n(n-1)]`: every ordered pair
      :math:`(i, j), i \ne j`, sorted by (row, col) — the pairs to score;
    * :obj:`y` :obj:`[n(n-1)]`: 1.0 where the pair is a Delaunay edge
      (both directions), else 0.0.

    The sets are generated from a seed per split (train 0, val 1, test 2,
    each offset by :obj:`seed`), so equal arguments give equal data; they
    are cached under ``root/processed/`` in a file named after the
    arguments, and the :obj:`pre_transform` (e.g.
    :class:`~torch_geometric_hot.transforms.AddSecondOrderView`) runs once
    before saving.

    Args:
        root (str): Cache directory.
        split (str, optional): ``'train'``, ``'val'`` or ``'test'``.
            (default: ``'train'``)
        num_sets (int, optional): Sets in the split. (default: :obj:`1000`)
        num_points (int or tuple, optional): Points per set, or an
            inclusive range :obj:`(low, high)` drawn per set.
            (default: :obj:`50`)
        seed (int, optional): Offset of the split seeds. (default: :obj:`0`)
        transform (callable, optional): Applied on every access.
        pre_transform (callable, optional): Applied once before saving.
    """
    def __init__(self, root: str, split: str = 'train', num_sets: int = 1000,
                 num_points: Size = 50, seed: int = 0,
                 transform: Optional[Callable] = None,
                 pre_transform: Optional[Callable] = None) -> None:
        if split not in _SPLITS:
            raise ValueError(f"'split' must be one of {_SPLITS}, got "
                             f"{split!r}")
        if isinstance(num_sets, bool) or not isinstance(
                num_sets, int) or num_sets < 0:
            raise ValueError(f"'num_sets' must be an integer >= 0, got "
                             f"{num_sets!r}")
        self.low, self.high = _size_range(num_points)
        self.split, self.num_sets, self.seed = split, num_sets, seed
        super().__init__(root, transform, pre_transform)
        self.load(self.processed_paths[0])

    @property
    def raw_file_names(self) -> List[str]:
        return []

    @property
    def processed_file_names(self) -> List[str]:
        transform = type(self.pre_transform).__name__ if (
            self.pre_transform is not None) else 'none'
        return [f'{self.split}_{self.num_sets}_{self.low}-{self.high}_'
                f'seed{self.seed}_{transform}.pt']

    def download(self) -> None:
        pass

    def process(self) -> None:
        gen = torch.Generator().manual_seed(1000 * self.seed +
                                            _SPLIT_SEEDS[self.split])
        data_list = []
        for _ in range(self.num_sets):
            n = int(torch.randint(self.low, self.high + 1, (1, ),
                                  generator=gen))
            pos = torch.rand(n, 2, generator=gen)
            edge_index = complete_edges(n)
            target = delaunay_edges(pos)
            label = torch.zeros(n, n)
            label[target[0], target[1]] = 1.0
            data = Data(x=pos, edge_index=edge_index,
                        y=label[edge_index[0], edge_index[1]], num_nodes=n)
            if self.pre_transform is not None:
                data = self.pre_transform(data)
            data_list.append(data)
        with written_atomically(self.processed_paths[0]) as partial:
            self.save(data_list, partial)

    def __repr__(self) -> str:
        size = (self.low if self.low == self.high else
                f'{self.low}-{self.high}')
        return (f'{self.__class__.__name__}({len(self)}, split='
                f'{self.split!r}, num_points={size}, seed={self.seed})')


def _size_range(num_points: Size) -> Tuple[int, int]:
    low, high = (num_points, num_points) if isinstance(num_points,
                                                       int) else num_points
    if not all(isinstance(v, int) and not isinstance(v, bool)
               for v in (low, high)) or not 1 <= low <= high:
        raise ValueError(f"'num_points' must be an integer >= 1 or a range "
                         f"(low, high) with 1 <= low <= high, got "
                         f"{num_points!r}")
    return low, high
