r"""The molecules of a collated in-memory dataset (an OGB dataset, or its
copy with stored views), read by slicing its tensors (a batch: by one
gather per attribute): nothing is cached per molecule, and a transform
runs on a whole batch at once in the data loader's workers."""
from typing import Callable, List, Optional, Sequence

import numpy as np
import torch
from torch_geometric.data import Data, InMemoryDataset

from torch_geometric_hot.transforms.apply_to_many import apply_to_many


class CollatedMolecules(InMemoryDataset):
    r"""The molecules of :obj:`source` (a collated
    :class:`~torch_geometric.data.InMemoryDataset`: one tensor per
    attribute and its slices), sharing its tensors.

    It differs from reading :obj:`source` itself in two ways that matter at
    millions of molecules:

    * :meth:`get` slices the shared tensors and keeps nothing; an
      :class:`~torch_geometric.data.InMemoryDataset` keeps a copy of every
      molecule it has returned (gigabytes per loader worker after an epoch
      of PCQM4Mv2) and reads one in about 0.3 ms;
    * reading a batch (``__getitems__``, which
      :class:`~torch.utils.data.DataLoader` calls in its workers) gathers
      the rows of its molecules with one operation per attribute
      (:meth:`get_many`) and applies
      :obj:`transform` to the batch's molecules at once
      (:func:`~torch_geometric_hot.transforms.apply_to_many.apply_to_many`),
      so views and node identifiers can be computed as the molecules are
      read instead of stored with the dataset. Reading one molecule
      (``dataset[i]``) applies :obj:`transform` to it alone, with the same
      result.

    Args:
        source (InMemoryDataset): The collated molecules (not copied).
        transform (callable, optional): Applied on every read.
    """
    def __init__(self, source: InMemoryDataset,
                 transform: Optional[Callable] = None) -> None:
        super().__init__(None, transform, log=False)
        if getattr(source, 'slices', None) is None:
            raise ValueError(f"'source' must be a collated InMemoryDataset "
                             f"(with slices), got {type(source).__name__}")
        self._data, self.slices = source._data, source.slices
        self.source_name = type(source).__name__
        self._layout = []
        for key, value in self._data.to_dict().items():
            bounds = self.slices.get(key)
            if bounds is None:
                continue
            dim = self._data.__cat_dim__(key, value)
            dim = dim + value.dim() if dim < 0 else dim
            self._layout.append((key, value, dim, bounds.numpy().astype(
                np.int64)))

    def get(self, idx: int) -> Data:
        r"""Molecule :obj:`idx` (of the whole dataset), its tensors views
        of the shared ones."""
        data = Data()
        # straight into the store's mapping: a new store has no cached
        # attributes to drop, which PyG's item assignment looks up (at the
        # cost of an exception per attribute)
        mapping = data._store._mapping
        for key, value, dim, bounds in self._layout:
            start = int(bounds[idx])
            mapping[key] = value.narrow(dim, start,
                                        int(bounds[idx + 1]) - start)
        return data

    def __getitems__(self, positions: Sequence[int]) -> List[Data]:
        r"""The molecules at :obj:`positions` of this dataset (or subset),
        :obj:`transform` applied to all of them at once."""
        indices = self.indices()
        return apply_to_many(self.transform, self.get_many(
            [int(indices[p]) for p in positions]))

    def get_many(self, idx: Sequence[int]) -> List[Data]:
        r"""Molecules :obj:`idx` (of the whole dataset), the values
        :meth:`get` gives, read with one gather per attribute: each
        molecule's tensors are views of the batch's gathered rows, not of
        the shared tensors."""
        index = np.asarray(idx, dtype=np.int64)
        graphs = [Data() for _ in range(index.size)]
        # straight into the stores' mappings, as in get
        mappings = [data._store._mapping for data in graphs]
        for key, value, dim, bounds in self._layout:
            starts = bounds[index]
            sizes = bounds[index + 1] - starts
            # every molecule's rows, one molecule after the other
            rows = np.arange(int(sizes.sum()), dtype=np.int64) + np.repeat(
                starts - (np.cumsum(sizes) - sizes), sizes)
            part = value.index_select(dim, torch.from_numpy(rows))
            for mapping, piece in zip(mappings,
                                      part.split(sizes.tolist(), dim)):
                mapping[key] = piece
        return graphs

    def __repr__(self) -> str:
        return (f'{self.__class__.__name__}({len(self)}, '
                f'of {self.source_name}, transform={self.transform})')
