r"""Writers of OGB's on-disk dataset layouts, so that molecules from any
SMILES table go through the unmodified OGB loaders.

* :func:`write_ogbg_mol` writes the ``ogbg-mol*`` layout that
  :class:`ogb.graphproppred.PygGraphPropPredDataset` reads:
  ``<root>/<ogbg_molname>/`` with ``mapping/mol.csv.gz``, the raw graph
  files (``raw/edge.csv.gz``, ``node-feat``, ``edge-feat``,
  ``num-node-list``, ``num-edge-list``, ``graph-label``), a scaffold split
  under ``split/scaffold/`` and the release marker ``RELEASE_v1.txt``.
* :func:`write_pcqm4mv2` writes the layout that
  :class:`ogb.lsc.PygPCQM4Mv2Dataset` reads: ``<root>/pcqm4m-v2/raw/
  data.csv.gz`` (columns ``idx``, ``smiles``, ``homolumogap``), the split
  ``split_dict.pt`` (``train``, ``valid``, ``test-dev``,
  ``test-challenge``; the test parts' targets are hidden as NaN, as in the
  real release) and the release marker.

Both featurise with :func:`ogb.utils.smiles2graph` (the function the real
datasets were built with) and record where the molecules came from in
``SOURCE.json``. :func:`read_molecule_csv` reads any CSV of SMILES and
target columns; :func:`nci_tpsa_table` the NCI molecules with their
topological polar surface area that ship inside RDKit, and
:func:`shipped_molecules` those and the other molecule set RDKit ships
(about 15,000 molecules in all).

:func:`write_pcqm4mv2_at_scale` writes a PCQM4Mv2-layout set of any size
(:data:`PCQM4MV2_MOLECULES` for the real one's) from those molecules,
repeated as needed, split in the real release's proportions: real
molecules and OGB's own processing at the real scale, for measuring a
pipeline before downloading 3.7 million molecules.
"""
import csv
import gzip
import hashlib
import json
import os
import os.path as osp
from typing import Dict, List, NamedTuple, Optional, Sequence

import numpy as np

RELEASE_MARKER = 'RELEASE_v1.txt'
#: The parts of the real PCQM4Mv2 release (molecules per split).
PCQM4MV2_SPLIT_SIZES = {'train': 3_378_606, 'valid': 73_545,
                        'test-dev': 147_037, 'test-challenge': 147_432}
#: Molecules in the real PCQM4Mv2 release.
PCQM4MV2_MOLECULES = sum(PCQM4MV2_SPLIT_SIZES.values())
WEHI_FILE = osp.join('Pains', 'test_data', 'wehi_mols.csv')
SOURCE_FILE = 'SOURCE.json'
PCQM4MV2_FOLDER = 'pcqm4m-v2'


class MoleculeTable(NamedTuple):
    r"""Parsed molecules and their targets.

    Attributes:
        smiles (list): SMILES strings RDKit parsed.
        targets (numpy.ndarray): :obj:`[len(smiles), num_targets]` float64
            (NaN where a value is missing).
        target_names (list): One name per target column.
        skipped (list): ``(row, SMILES)`` of the rows RDKit could not parse.
        source (str): Where the table came from.
    """
    smiles: List[str]
    targets: np.ndarray
    target_names: List[str]
    skipped: List
    source: str


class MoleculeTableError(ValueError):
    r"""A molecule CSV that :func:`read_molecule_csv` cannot read as asked:
    a column it names is missing, a target cell is not a number, or no
    SMILES parses. The message starts with the argument at fault in quotes
    (``'path'``, ``'smiles_column'``, ``'target_columns'``)."""


def _require_rdkit():
    try:
        from rdkit import Chem, RDLogger
    except ImportError as error:
        raise ImportError("writing OGB layouts needs 'rdkit' and 'ogb' (the "
                          "[ogb] extra): pip install "
                          "'torch_geometric_hot[ogb]'") from error
    return Chem, RDLogger


def _parse_rows(rows, source: str, limit: Optional[int]) -> MoleculeTable:
    Chem, RDLogger = _require_rdkit()
    smiles, targets, skipped, names = [], [], [], None
    RDLogger.DisableLog('rdApp.*')
    try:
        for number, smi, values, names in rows:
            if limit is not None and len(smiles) >= limit:
                break
            if not smi or Chem.MolFromSmiles(smi) is None:
                skipped.append((number, smi))
                continue
            smiles.append(smi)
            targets.append(values)
    finally:
        RDLogger.EnableLog('rdApp.*')
    if not smiles:
        raise MoleculeTableError(f"'path': {source} holds no SMILES that "
                                 f"RDKit can parse ({len(skipped)} skipped)")
    return MoleculeTable(smiles, np.asarray(targets, dtype=np.float64),
                         list(names), skipped, source)


def _number(text: str, path: str, row: int, column: str) -> float:
    if text.strip() == '':
        return float('nan')
    try:
        return float(text)
    except ValueError:
        raise MoleculeTableError(f"'path': {path}, row {row}: column "
                                 f"{column!r} holds {text!r}, not a "
                                 "number") from None


def read_molecule_csv(path: str, smiles_column: str,
                      target_columns: Sequence[str],
                      limit: Optional[int] = None) -> MoleculeTable:
    r"""Reads a CSV file (plain or ``.gz``) with a header row, a SMILES
    column and numeric target columns (empty cells are missing values).
    Rows whose SMILES RDKit cannot parse are skipped and listed in
    :attr:`MoleculeTable.skipped`.

    Args:
        path (str): The CSV file.
        smiles_column (str): Name of the SMILES column.
        target_columns (list): Names of the target columns.
        limit (int, optional): Keep the first :obj:`limit` parsed molecules.

    Raises:
        FileNotFoundError: :obj:`path` is no file.
        MoleculeTableError: a column is missing, a target cell is not a
            number, or no SMILES parses.
    """
    if not osp.isfile(path):
        raise FileNotFoundError(f"'path': molecule CSV {path!r} does not "
                                "exist")
    if not target_columns:
        raise ValueError("'target_columns' must name at least one column")
    opener = gzip.open if path.endswith('.gz') else open
    with opener(path, 'rt', newline='') as f:
        reader = csv.DictReader(f)
        header = reader.fieldnames or []
        for name, columns in (('smiles_column', [smiles_column]),
                              ('target_columns', target_columns)):
            missing = [c for c in columns if c not in header]
            if missing:
                raise MoleculeTableError(
                    f"{name!r}: {path} has no column(s) {missing}; its "
                    f"header has {header}")
        rows = ((k + 2, row[smiles_column].strip(), [
            _number(row[c], path, k + 2, c) for c in target_columns
        ], target_columns) for k, row in enumerate(reader))
        return _parse_rows(rows, path, limit)


def nci_tpsa_table(limit: Optional[int] = None) -> MoleculeTable:
    r"""The 5,000 NCI molecules with their topological polar surface area
    (TPSA, Å², Ertl's method) that RDKit ships in
    ``Data/NCI/first_5k.tpsa.csv``: real molecules available offline."""
    from rdkit import RDConfig
    path = osp.join(RDConfig.RDDataDir, 'NCI', 'first_5k.tpsa.csv')
    if not osp.isfile(path):
        raise FileNotFoundError(f"this RDKit build does not ship {path}")

    def rows():
        with open(path, newline='') as f:
            for k, row in enumerate(csv.reader(f)):
                if not row or row[0].startswith('#'):
                    continue
                yield k + 1, row[0], [_number(row[1], path, k + 1, 'TPSA')
                                      ], ['TPSA']

    return _parse_rows(rows(), 'RDKit Data/NCI/first_5k.tpsa.csv', limit)


def scaffold_split(smiles: Sequence[str],
                   fractions=(0.8, 0.1, 0.1)) -> Dict[str, np.ndarray]:
    r"""OGB's deterministic scaffold split: molecules grouped by their
    Bemis--Murcko scaffold, the groups sorted by size (largest first, ties
    by first occurrence) and assigned to train until it holds
    :obj:`fractions[0]` of the molecules, then to valid, then test; so
    valid and test hold scaffolds unseen in training."""
    from rdkit.Chem.Scaffolds import MurckoScaffold
    groups: Dict[str, List[int]] = {}
    for i, smi in enumerate(smiles):
        key = MurckoScaffold.MurckoScaffoldSmiles(smiles=smi,
                                                  includeChirality=True)
        groups.setdefault(key, []).append(i)
    ordered = sorted(groups.values(), key=lambda g: (-len(g), g[0]))
    cut_train = fractions[0] * len(smiles)
    cut_valid = (fractions[0] + fractions[1]) * len(smiles)
    parts: Dict[str, List[int]] = {'train': [], 'valid': [], 'test': []}
    for group in ordered:
        done = len(parts['train'])
        if done + len(group) <= cut_train:
            parts['train'] += group
        elif done + len(parts['valid']) + len(group) <= cut_valid:
            parts['valid'] += group
        else:
            parts['test'] += group
    return {k: np.asarray(sorted(v), dtype=np.int64) for k, v in
            parts.items()}


def _savetxt(path: str, array: np.ndarray, fmt: str) -> None:
    os.makedirs(osp.dirname(path), exist_ok=True)
    with gzip.open(path, 'wt') as f:
        if array.size:
            np.savetxt(f, array, fmt=fmt, delimiter=',')


def _check_free(folder: str, overwrite: bool) -> None:
    if osp.exists(folder) and not overwrite:
        raise FileExistsError(
            f"{folder} already exists; pass overwrite=True to replace it "
            f"(never point this at a folder holding a real OGB download)")


def table_digest(table: MoleculeTable) -> str:
    r"""A SHA-1 of :obj:`table`'s molecules, targets and target names, as
    ``SOURCE.json`` records it: the same for the same table read from any
    path, another for any other molecule, value or column."""
    h = hashlib.sha1()
    h.update('\n'.join(table.smiles).encode())
    h.update(np.ascontiguousarray(table.targets, dtype=np.float64).tobytes())
    h.update('\n'.join(table.target_names).encode())
    return h.hexdigest()


def _write_source(folder: str, table: MoleculeTable, target: str,
                  layout: str) -> None:
    with open(osp.join(folder, SOURCE_FILE), 'w') as f:
        json.dump({'layout': layout, 'source': table.source,
                   'target': target, 'target_names': table.target_names,
                   'molecules': len(table.smiles),
                   'sha1': table_digest(table),
                   'skipped': [list(s) for s in table.skipped]}, f,
                  indent=1)
    with open(osp.join(folder, RELEASE_MARKER), 'w') as f:
        f.write(f'{layout} written by torch_geometric_hot from '
                f'{table.source}\n')


def ogbg_meta(name: str) -> Dict[str, str]:
    r"""OGB's meta information (``master.csv``) of an ``ogbg-mol*``
    dataset; a clear error for an unknown name."""
    import pandas as pd
    import ogb.graphproppred
    master = pd.read_csv(osp.join(osp.dirname(ogb.graphproppred.__file__),
                                  'master.csv'), index_col=0,
                         keep_default_na=False)
    known = [k for k in master.keys() if k.startswith('ogbg-mol')]
    if name not in known:
        raise ValueError(f"unknown OGB molecule dataset {name!r}; known: "
                         f"{', '.join(known)} (or 'pcqm4mv2')")
    return dict(master[name])


def write_ogbg_mol(root: str, name: str, table: MoleculeTable,
                   labels: Optional[np.ndarray] = None,
                   target: str = '', overwrite: bool = False) -> str:
    r"""Writes :obj:`table` as the OGB dataset :obj:`name` (an
    ``ogbg-mol*`` name, e.g. ``'ogbg-molhiv'``) under :obj:`root`, in the
    layout :class:`~ogb.graphproppred.PygGraphPropPredDataset` reads.

    Args:
        root (str): The root folder (the dataset goes to
            ``root/<ogbg_molname>``).
        name (str): The OGB name whose meta information (task count, task
            type, metric) the data takes.
        table (MoleculeTable): The molecules.
        labels (numpy.ndarray, optional): :obj:`[N, num_tasks]` labels
            (default: :obj:`table.targets`); classification labels are 0/1
            (NaN: missing).
        target (str, optional): What the labels mean, for ``SOURCE.json``.
        overwrite (bool, optional): Replace an existing folder.

    Returns:
        str: The dataset folder.
    """
    from ogb.utils import smiles2graph
    meta = ogbg_meta(name)
    labels = table.targets if labels is None else np.asarray(labels)
    num_tasks = int(meta['num tasks'])
    if labels.ndim != 2 or labels.shape != (len(table.smiles), num_tasks):
        raise ValueError(f"{name} has {num_tasks} task(s): 'labels' must have "
                         f"shape [{len(table.smiles)}, {num_tasks}], got "
                         f"{list(labels.shape)}")
    folder = osp.join(root, '_'.join(name.split('-')))
    _check_free(folder, overwrite)
    graphs = [smiles2graph(s) for s in table.smiles]
    raw = osp.join(folder, 'raw')
    # OGB stores one direction per bond (the loader adds the inverse);
    # smiles2graph lists (i, j) and (j, i) next to each other.
    _savetxt(osp.join(raw, 'edge.csv.gz'), np.concatenate(
        [g['edge_index'][:, ::2].T for g in graphs]), '%d')
    _savetxt(osp.join(raw, 'node-feat.csv.gz'),
             np.concatenate([g['node_feat'] for g in graphs]), '%d')
    _savetxt(osp.join(raw, 'edge-feat.csv.gz'),
             np.concatenate([g['edge_feat'][::2] for g in graphs]), '%d')
    _savetxt(osp.join(raw, 'num-node-list.csv.gz'),
             np.array([[g['num_nodes']] for g in graphs]), '%d')
    _savetxt(osp.join(raw, 'num-edge-list.csv.gz'),
             np.array([[g['edge_index'].shape[1] // 2] for g in graphs]),
             '%d')
    label_fmt = '%.6g' if meta['task type'] == 'regression' else '%g'
    _savetxt(osp.join(raw, 'graph-label.csv.gz'), labels, label_fmt)
    split = scaffold_split(table.smiles)
    empty = [part for part, index in split.items() if index.size == 0]
    if empty:
        raise ValueError(f"the scaffold split of these {len(table.smiles)} "
                         f"molecules leaves {empty} empty: too few molecules "
                         f"or distinct Bemis-Murcko scaffolds")
    for part, index in split.items():
        _savetxt(osp.join(folder, 'split', 'scaffold', f'{part}.csv.gz'),
                 index.reshape(-1, 1), '%d')
    os.makedirs(osp.join(folder, 'mapping'), exist_ok=True)
    with gzip.open(osp.join(folder, 'mapping', 'mol.csv.gz'), 'wt',
                   newline='') as f:
        writer = csv.writer(f)
        writer.writerow([f'task_{t}' for t in range(num_tasks)] +
                        ['smiles', 'mol_id'])
        for i, smi in enumerate(table.smiles):
            writer.writerow([*('' if np.isnan(v) else f'{v:g}'
                               for v in labels[i]), smi, i])
    _write_source(folder, table, target, name)
    return folder


def write_pcqm4mv2(root: str, table: MoleculeTable, target: str = '',
                   fractions=(0.8, 0.1, 0.05, 0.05), seed: int = 0,
                   overwrite: bool = False) -> str:
    r"""Writes :obj:`table` (its first target column) in the PCQM4Mv2
    layout under ``root/pcqm4m-v2``, which
    :class:`~ogb.lsc.PygPCQM4Mv2Dataset` reads. The molecules are split at
    random (seeded) into ``train``, ``valid``, ``test-dev`` and
    ``test-challenge`` by :obj:`fractions`; as in the real release the two
    test parts' targets are NaN in ``data.csv.gz``.

    Returns:
        str: The dataset folder.
    """
    import pandas as pd
    import torch
    folder = osp.join(root, PCQM4MV2_FOLDER)
    _check_free(folder, overwrite)
    num = len(table.smiles)
    perm = np.random.default_rng(seed).permutation(num)
    bounds = np.cumsum([int(round(f * num)) for f in fractions[:-1]])
    names = ['train', 'valid', 'test-dev', 'test-challenge']
    split = {k: np.sort(p) for k, p in zip(names, np.split(perm, bounds))}
    gap = table.targets[:, 0].copy()
    gap[np.concatenate([split['test-dev'], split['test-challenge']])] = \
        np.nan
    os.makedirs(osp.join(folder, 'raw'), exist_ok=True)
    pd.DataFrame({'idx': np.arange(num), 'smiles': table.smiles,
                  'homolumogap': gap}).to_csv(
                      osp.join(folder, 'raw', 'data.csv.gz'), index=False)
    torch.save(split, osp.join(folder, 'split_dict.pt'))
    _write_source(folder, table, target, 'pcqm4mv2')
    return folder


def wehi_table(limit: Optional[int] = None) -> MoleculeTable:
    r"""The 10,000 molecules of RDKit's ``Data/Pains/test_data/
    wehi_mols.csv`` (SMILES and an identifier per row), with their
    topological polar surface area computed by RDKit
    (:func:`rdkit.Chem.rdMolDescriptors.CalcTPSA`, Ertl's method, the
    target of :func:`nci_tpsa_table`)."""
    Chem, _ = _require_rdkit()
    from rdkit import RDConfig
    from rdkit.Chem.rdMolDescriptors import CalcTPSA
    path = osp.join(RDConfig.RDDataDir, WEHI_FILE)
    if not osp.isfile(path):
        raise FileNotFoundError(f"this RDKit build does not ship {path}")

    def rows():
        with open(path, newline='') as f:
            for k, row in enumerate(csv.reader(f)):
                mol = Chem.MolFromSmiles(row[0]) if row else None
                tpsa = CalcTPSA(mol) if mol is not None else float('nan')
                yield k + 1, row[0] if row else '', [tpsa], ['TPSA']

    return _parse_rows(rows(), 'RDKit Data/' + WEHI_FILE.replace(os.sep, '/'),
                       limit)


def shipped_molecules() -> MoleculeTable:
    r"""Every molecule RDKit ships with a SMILES table: the NCI molecules
    of :func:`nci_tpsa_table` then those of :func:`wehi_table` (about
    15,000), with their topological polar surface area."""
    parts = [nci_tpsa_table(), wehi_table()]
    return MoleculeTable(
        [s for t in parts for s in t.smiles],
        np.concatenate([t.targets for t in parts]), parts[0].target_names,
        [(f'{t.source}: {row}', smi) for t in parts for row, smi in
         t.skipped], ' + '.join(t.source for t in parts))


def repeated_table(table: MoleculeTable, num_molecules: int
                   ) -> MoleculeTable:
    r""":obj:`num_molecules` molecules: :obj:`table`'s in order, repeated
    from the start as often as needed (the last repetition cut short)."""
    if not isinstance(num_molecules, int) or num_molecules < 1:
        raise ValueError(f"'num_molecules' must be a positive int, got "
                         f"{num_molecules!r}")
    count = len(table.smiles)
    index = np.arange(num_molecules) % count
    rounds = -(-num_molecules // count)
    smiles = (table.smiles * rounds)[:num_molecules]
    source = table.source if num_molecules <= count else (
        f'{table.source}, {count:,} molecules repeated to {num_molecules:,}')
    return table._replace(smiles=smiles, targets=table.targets[index],
                          source=source)


def pcqm4mv2_fractions() -> tuple:
    r"""The fractions of the real release's parts (train, valid, test-dev,
    test-challenge), which :func:`write_pcqm4mv2` rounds to part sizes:
    at :data:`PCQM4MV2_MOLECULES` molecules, exactly the real sizes."""
    return tuple(v / PCQM4MV2_MOLECULES for v in
                 PCQM4MV2_SPLIT_SIZES.values())


def write_pcqm4mv2_at_scale(root: str, num_molecules: int = PCQM4MV2_MOLECULES,
                            table: Optional[MoleculeTable] = None,
                            seed: int = 0, overwrite: bool = False) -> str:
    r"""Writes a PCQM4Mv2-layout set of :obj:`num_molecules` molecules
    under ``root/pcqm4m-v2`` (read by :class:`~ogb.lsc.PygPCQM4Mv2Dataset`
    and :func:`~torch_geometric_hot.datasets.load_molecule_benchmark`):
    the molecules of :obj:`table` (default: :func:`shipped_molecules`)
    repeated to that number (:func:`repeated_table`; the targets are their
    TPSA), split at random (seeded) in the real release's proportions
    (:func:`pcqm4mv2_fractions`). Only the scale is synthetic: every
    molecule is real, and a molecule appears in several parts once the
    table is repeated.

    Args:
        root (str): The root folder.
        num_molecules (int, optional): Molecules to write (default: the
            real release's 3,746,620).
        table (MoleculeTable, optional): The molecules to repeat.
        seed (int, optional): Seed of the split.
        overwrite (bool, optional): Replace an existing folder.

    Returns:
        str: The dataset folder.
    """
    table = shipped_molecules() if table is None else table
    fractions = pcqm4mv2_fractions()
    sizes = [int(round(f * num_molecules)) for f in fractions[:-1]]
    sizes.append(num_molecules - sum(sizes))
    if min(sizes) < 1:
        raise ValueError(f"'num_molecules': {num_molecules} molecules leave "
                         f"a part of PCQM4Mv2's split empty (parts "
                         f"{dict(zip(PCQM4MV2_SPLIT_SIZES, sizes))}); at "
                         f"least 26 are needed")
    return write_pcqm4mv2(root, repeated_table(table, num_molecules),
                          'TPSA', fractions=fractions, seed=seed,
                          overwrite=overwrite)
