r"""Datasets that work offline: molecules that ship with RDKit and synthetic
tasks."""
from torch_geometric_hot.datasets.delaunay_sets import DelaunaySets
from torch_geometric_hot.datasets.hyperedge_benchmark import (
    planted_hypergraph, read_hyperedge_npz)
from torch_geometric_hot.datasets.nci_tpsa import NCITPSA
from torch_geometric_hot.datasets.synthetic_chains import synthetic_chains

__all__ = [
    'DelaunaySets',
    'planted_hypergraph',
    'read_hyperedge_npz',
    'NCITPSA',
    'synthetic_chains',
]
from torch_geometric_hot.datasets.ogb_layout import (
    PCQM4MV2_MOLECULES, PCQM4MV2_SPLIT_SIZES, MoleculeTable,
    MoleculeTableError, nci_tpsa_table,
    read_molecule_csv, repeated_table, scaffold_split, shipped_molecules,
    wehi_table, write_ogbg_mol, write_pcqm4mv2, write_pcqm4mv2_at_scale)
from torch_geometric_hot.datasets.ogb_molecules import (
    BenchmarkDataError, DownloadError, FolderMismatchError,
    IncompleteFolderError, MoleculeBenchmark, benchmark_name,
    load_molecule_benchmark, offline_labels, ogb_safe_globals, write_offline)

__all__ += [
    'MoleculeTable', 'MoleculeTableError', 'nci_tpsa_table',
    'read_molecule_csv', 'scaffold_split',
    'write_ogbg_mol', 'write_pcqm4mv2', 'PCQM4MV2_MOLECULES',
    'PCQM4MV2_SPLIT_SIZES', 'repeated_table', 'shipped_molecules',
    'wehi_table', 'write_pcqm4mv2_at_scale', 'MoleculeBenchmark',
    'benchmark_name', 'load_molecule_benchmark', 'offline_labels',
    'ogb_safe_globals', 'write_offline', 'BenchmarkDataError',
    'IncompleteFolderError', 'FolderMismatchError', 'DownloadError'
]
