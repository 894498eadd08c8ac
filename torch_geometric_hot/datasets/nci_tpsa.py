r"""NCI molecules with their topological polar surface area (TPSA), read from
the copy that ships inside RDKit, so it works offline."""
import csv
import hashlib
import json
import os
import os.path as osp
import re
import shutil
from typing import Callable, Dict, List, Optional

import torch
from torch import Tensor
from torch_geometric.data import Data, InMemoryDataset

from torch_geometric_hot.datasets.atomic_files import written_atomically

_SPLITS = ('train', 'val', 'test')
_FRACTIONS = (0.8, 0.1, 0.1)


def _stable_repr(obj: object) -> str:
    # ``repr`` without memory addresses, so equal settings give equal keys.
    return re.sub(r' at 0x[0-9a-fA-F]+', '', repr(obj))


def _require_ogb_rdkit():
    try:
        from ogb.utils import smiles2graph
        from rdkit import Chem, RDConfig, RDLogger
    except ImportError as error:
        raise ImportError(
            "NCITPSA needs 'rdkit' and 'ogb' (the [ogb] extra): "
            "pip install 'torch_geometric_hot[ogb]'") from error
    return smiles2graph, Chem, RDConfig, RDLogger


class NCITPSA(InMemoryDataset):
    r"""The first 5,000 molecules of the NCI database with their topological
    polar surface area (TPSA, in Å², computed by Ertl's method), as shipped
    in RDKit's ``Data/NCI/first_5k.tpsa.csv``: a small, real, offline
    graph-regression task.

    Molecules are featurised with :func:`ogb.utils.smiles2graph`, exactly like
    the OGB molecule datasets: :obj:`x` holds 9 categorical atom features
    (int64, :obj:`[n, 9]`), :obj:`edge_attr` 3 categorical bond features
    (int64, :obj:`[m, 3]`), both bond directions are stored, and :obj:`y`
    is the TPSA (float32, :obj:`[1, 1]`). SMILES that RDKit cannot parse are
    skipped; their number is printed and kept in :attr:`skipped`.

    The processed files live under ``root/processed/<key>/``, where the key
    hashes the :obj:`pre_transform`/:obj:`pre_filter` reprs and
    :obj:`limit`: changing any of them processes the data again instead of
    silently reusing stale files.

    Args:
        root (str): Root directory (``raw/`` and ``processed/`` go there).
        split (str, optional): :obj:`None` for all molecules, or
            :obj:`"train"`, :obj:`"val"`, :obj:`"test"` for the seeded
            80/10/10 split of :meth:`get_idx_split`.
        transform (callable, optional): Applied on every access.
        pre_transform (callable, optional): Applied once before saving.
        pre_filter (callable, optional): Keeps a molecule when it returns
            :obj:`True`.
        limit (int, optional): Keep only the first :obj:`limit` parsable
            molecules (for quick runs and tests).
        split_seed (int): Seed of the random split.
        force_reload (bool): Process again even if processed files exist.
    """
    def __init__(self, root: str, split: Optional[str] = None,
                 transform: Optional[Callable] = None,
                 pre_transform: Optional[Callable] = None,
                 pre_filter: Optional[Callable] = None,
                 limit: Optional[int] = None, split_seed: int = 0,
                 force_reload: bool = False):
        if split is not None and split not in _SPLITS:
            raise ValueError(f"'split' must be None or one of {_SPLITS}, "
                             f"got {split!r}")
        if limit is not None and (not isinstance(limit, int) or limit < 1):
            raise ValueError(f"'limit' must be a positive int or None, "
                             f"got {limit!r}")
        self.limit = limit
        self.split_seed = split_seed
        key = '|'.join([_stable_repr(pre_transform), _stable_repr(pre_filter),
                        f'limit={limit}'])
        self._key = hashlib.sha1(key.encode()).hexdigest()[:12]
        super().__init__(root, transform, pre_transform, pre_filter,
                         force_reload=force_reload)
        self.load(self.processed_paths[0])
        with open(self.processed_paths[1]) as f:
            self.skipped: List[str] = json.load(f)
        if split is not None:
            self._indices = self.get_idx_split()[split].tolist()

    @property
    def raw_file_names(self) -> List[str]:
        return ['first_5k.tpsa.csv']

    @property
    def processed_dir(self) -> str:
        return osp.join(self.root, 'processed', self._key)

    @property
    def processed_file_names(self) -> List[str]:
        return ['data.pt', 'skipped.json']

    def download(self):
        r"""Copies the CSV from the installed RDKit (no network)."""
        _, _, RDConfig, _ = _require_ogb_rdkit()
        src = osp.join(RDConfig.RDDataDir, 'NCI', self.raw_file_names[0])
        if not osp.exists(src):
            raise FileNotFoundError(
                f"RDKit does not ship {src}; NCITPSA needs an RDKit build "
                "that includes its Data/ directory")
        os.makedirs(self.raw_dir, exist_ok=True)
        shutil.copyfile(src, self.raw_paths[0])

    def process(self):
        smiles2graph, Chem, _, RDLogger = _require_ogb_rdkit()
        data_list, skipped = [], []
        RDLogger.DisableLog('rdApp.*')
        try:
            for smiles, tpsa in self._read_rows():
                if self.limit is not None and len(data_list) >= self.limit:
                    break
                if Chem.MolFromSmiles(smiles) is None:
                    skipped.append(smiles)
                    continue
                data = self._to_data(smiles2graph(smiles), smiles, tpsa)
                if self.pre_filter is not None and not self.pre_filter(data):
                    continue
                if self.pre_transform is not None:
                    data = self.pre_transform(data)
                data_list.append(data)
        finally:
            RDLogger.EnableLog('rdApp.*')
        if skipped:
            print(f'NCITPSA: skipped {len(skipped)} unparsable SMILES')
        # the list of skipped SMILES first: a run that finds the data finds
        # it too
        with written_atomically(self.processed_paths[1]) as partial:
            with open(partial, 'w') as f:
                json.dump(skipped, f)
        with written_atomically(self.processed_paths[0]) as partial:
            self.save(data_list, partial)

    def _read_rows(self):
        with open(self.raw_paths[0], newline='') as f:
            for row in csv.reader(f):
                if not row or row[0].startswith('#'):
                    continue
                if len(row) != 2:
                    raise ValueError(f"{self.raw_paths[0]}: expected rows "
                                     f"'SMILES,TPSA', got {row!r}")
                yield row[0], float(row[1])

    @staticmethod
    def _to_data(graph: Dict, smiles: str, tpsa: float) -> Data:
        return Data(
            x=torch.from_numpy(graph['node_feat']).long(),  # [n, 9]
            edge_index=torch.from_numpy(graph['edge_index']).long(),  # [2, m]
            edge_attr=torch.from_numpy(graph['edge_feat']).long(),  # [m, 3]
            y=torch.tensor([[tpsa]], dtype=torch.float),  # [1, 1]
            num_nodes=int(graph['num_nodes']), smiles=smiles)

    def get_idx_split(self) -> Dict[str, Tensor]:
        r"""The seeded 80/10/10 split as OGB returns it: a dict of index
        tensors (into the full dataset) under ``'train'``, ``'val'`` and
        ``'test'``; the same for the same :obj:`split_seed` and size."""
        num = self._data.y.size(0)
        gen = torch.Generator().manual_seed(self.split_seed)
        perm = torch.randperm(num, generator=gen)
        num_train = int(round(_FRACTIONS[0] * num))
        num_val = int(round(_FRACTIONS[1] * num))
        return {
            'train': perm[:num_train],
            'val': perm[num_train:num_train + num_val],
            'test': perm[num_train + num_val:],
        }

    def __repr__(self) -> str:
        return f'{self.__class__.__name__}({len(self)})'
