r"""PCQM4Mv2's processed file, written in bounded memory and in parallel.

:class:`ogb.lsc.PygPCQM4Mv2Dataset` processes the raw SMILES by building
one :class:`~torch_geometric.data.Data` object per molecule, holding all of
them, and collating them at the end: about 9 KB per molecule at its peak,
over 30 GB for the real 3,746,620 molecules (``docs/ogb.md``), on one CPU
core. :func:`process_pcqm4mv2` writes the same file
(``processed/geometric_data_processed.pt``: the same tensors, dtypes and
slices as OGB's ``collate``, which OGB's loader then reads unchanged) from
chunks of molecules featurised by the same :func:`ogb.utils.smiles2graph`
in worker processes, each chunk kept in compact integer types until the
final int64 tensors are filled: its peak is those final tensors (about
2.2 KB per molecule of PCQM4Mv2's size) and the chunks.
"""
import os
import os.path as osp
from multiprocessing import get_context
from typing import Dict, List, Optional, Tuple

import numpy as np
import torch

PROCESSED_FILE = 'geometric_data_processed.pt'
#: Molecules per chunk (one task of a worker process).
CHUNK_MOLECULES = 20_000
Chunk = Tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]


def featurise_chunk(smiles: List[str]) -> Chunk:
    r"""The graphs of :obj:`smiles` by :func:`ogb.utils.smiles2graph`,
    concatenated in compact types: atom features :obj:`[n, 9]` int8, edges
    :obj:`[2, m]` int32 (numbered within their molecule, both directions),
    bond features :obj:`[m, 3]` int8, and the atoms and edges of every
    molecule."""
    from ogb.utils import smiles2graph
    xs, edges, attrs, atoms, bonds = [], [], [], [], []
    for smi in smiles:
        graph = smiles2graph(smi)
        if len(graph['edge_feat']) != graph['edge_index'].shape[1] or \
                len(graph['node_feat']) != graph['num_nodes']:
            raise ValueError(f"smiles2graph gave inconsistent sizes for "
                             f"{smi!r}")
        xs.append(graph['node_feat'])
        edges.append(graph['edge_index'])
        attrs.append(graph['edge_feat'])
        atoms.append(graph['num_nodes'])
        bonds.append(graph['edge_index'].shape[1])
    for name, parts in (('atom', xs), ('bond', attrs)):
        high = max((int(p.max()) for p in parts if p.size), default=0)
        if high > np.iinfo(np.int8).max:
            raise ValueError(f"a {name} feature value {high} does not fit "
                             f"int8")
    return (np.concatenate(xs).astype(np.int8),
            np.concatenate(edges, axis=1).astype(np.int32),
            np.concatenate(attrs).astype(np.int8),
            np.asarray(atoms, dtype=np.int64),
            np.asarray(bonds, dtype=np.int64))


def _slices(counts: np.ndarray) -> torch.Tensor:
    out = np.zeros(counts.size + 1, dtype=np.int64)
    np.cumsum(counts, out=out[1:])
    return torch.from_numpy(out)


def assemble(chunks: List[Chunk], targets: np.ndarray):
    r"""OGB's collated ``(data, slices)`` from featurised chunks (emptied
    as they are copied): :obj:`edge_index` :obj:`[2, M]`, :obj:`edge_attr`
    :obj:`[M, 3]`, :obj:`x` :obj:`[N, 9]` (int64, edges numbered within
    their molecule) and :obj:`y` :obj:`[G]` (float32), with their slices."""
    from torch_geometric.data import Data
    atoms = np.concatenate([c[3] for c in chunks])
    bonds = np.concatenate([c[4] for c in chunks])
    num_atoms, num_bonds = int(atoms.sum()), int(bonds.sum())
    width_x = chunks[0][0].shape[1] if chunks else 9
    width_e = chunks[0][2].shape[1] if chunks else 3
    x = torch.empty(num_atoms, width_x, dtype=torch.long)
    edge_index = torch.empty(2, num_bonds, dtype=torch.long)
    edge_attr = torch.empty(num_bonds, width_e, dtype=torch.long)
    at = bt = 0
    while chunks:
        cx, ce, ca, _, _ = chunks.pop(0)
        x[at:at + cx.shape[0]] = torch.from_numpy(cx.astype(np.int64))
        edge_index[:, bt:bt + ce.shape[1]] = torch.from_numpy(
            ce.astype(np.int64))
        edge_attr[bt:bt + ca.shape[0]] = torch.from_numpy(
            ca.astype(np.int64))
        at += cx.shape[0]
        bt += ce.shape[1]
    data = Data()  # attributes in the order OGB sets them
    data.edge_index, data.edge_attr, data.x = edge_index, edge_attr, x
    data.y = torch.from_numpy(np.asarray(targets, dtype=np.float32))
    edge_slices = _slices(bonds)
    slices = {'edge_index': edge_slices, 'edge_attr': edge_slices.clone(),
              'x': _slices(atoms),
              'y': torch.arange(len(targets) + 1, dtype=torch.long)}
    return data, slices


def process_pcqm4mv2(folder: str, processes: Optional[int] = None,
                     chunk_molecules: int = CHUNK_MOLECULES) -> str:
    r"""Writes ``folder/processed/geometric_data_processed.pt`` from
    ``folder/raw/data.csv.gz`` as :class:`ogb.lsc.PygPCQM4Mv2Dataset`'s own
    processing would (see the module documentation), with OGB's checks
    that the training and validation targets are known and the test
    targets hidden.

    Args:
        folder (str): The dataset folder (``<root>/pcqm4m-v2``).
        processes (int, optional): Worker processes featurising chunks
            (default: the CPUs this process may use, at most 16; 1: in this
            process).
        chunk_molecules (int, optional): Molecules per chunk.

    Returns:
        str: The processed file.
    """
    import pandas as pd
    if processes is None:
        processes = min(len(os.sched_getaffinity(0)), 16) \
            if hasattr(os, 'sched_getaffinity') else 1
    if processes < 1 or chunk_molecules < 1:
        raise ValueError(f"'processes' and 'chunk_molecules' must be >= 1, "
                         f"got {processes} and {chunk_molecules}")
    raw = osp.join(folder, 'raw', 'data.csv.gz')
    if not osp.isfile(raw):
        raise FileNotFoundError(f"{raw} does not exist")
    table = pd.read_csv(raw)
    smiles = table['smiles'].tolist()
    targets = table['homolumogap'].to_numpy(dtype=np.float64)
    del table
    _check_targets(folder, targets)
    pieces = [smiles[i:i + chunk_molecules]
              for i in range(0, len(smiles), chunk_molecules)]
    if processes == 1 or len(pieces) == 1:
        chunks = [featurise_chunk(piece) for piece in pieces]
    else:
        with get_context('fork').Pool(processes) as pool:
            chunks = pool.map(featurise_chunk, pieces, chunksize=1)
    del pieces, smiles
    data, slices = assemble(chunks, targets)
    path = osp.join(folder, 'processed', PROCESSED_FILE)
    os.makedirs(osp.dirname(path), exist_ok=True)
    partial = f'{path}.partial'
    torch.save((data, slices), partial)
    os.replace(partial, path)
    return path


def _check_targets(folder: str, targets: np.ndarray) -> None:
    # OGB's own checks of its processing
    split: Dict = torch.load(osp.join(folder, 'split_dict.pt'),
                             weights_only=False)
    for part, hidden in (('train', False), ('valid', False),
                         ('test-dev', True), ('test-challenge', True)):
        values = targets[np.asarray(split[part], dtype=np.int64)]
        ok = np.isnan(values).all() if hidden else \
            not np.isnan(values).any()
        if not ok:
            raise ValueError(f"{folder}: the {part!r} targets must all be "
                             f"{'hidden (NaN)' if hidden else 'known'}")
