r"""Offline molecular property targets: the NCI molecules that RDKit ships,
labelled with a descriptor that RDKit computes for each of them.

The shipped target, the topological polar surface area, is a sum of atom
contributions: a model that can count fits it. The other descriptors are
not, or not only, sums over atoms, so they make harder small-data
property-prediction tasks that need no download:

========  =================================================================
name      target
========  =================================================================
tpsa      topological polar surface area, Å² (Ertl; a sum over polar atoms)
qed       quantitative estimate of drug-likeness (Bickerton et al.), in
          [0, 1]: a weighted geometric mean of desirability functions of
          eight properties (weight, logP, donors, acceptors, polar surface,
          rotatable bonds, aromatic rings, structural alerts)
bertz     :math:`\log(1 + \mathrm{BertzCT})`, Bertz's complexity index
          (bond connectivity and atom diversity, a whole-graph quantity)
logp      Crippen's octanol/water logP (a sum of atom-type contributions)
fsp3      fraction of carbon atoms that are sp3-hybridised (a ratio)
rings     number of rings in the smallest set of smallest rings
motifs    a synthetic activity: a fixed random linear function (weights
          drawn once, seed 0) of which radius-2 substructures occur, as
          bits of a 1,024-bit Morgan fingerprint; it depends on local
          structure, hardly on size or composition, as measured
          activities do
========  =================================================================
"""
import math
from typing import Callable, Dict, NamedTuple, Optional

import numpy as np

from torch_geometric_hot.datasets.ogb_layout import (MoleculeTable,
                                                     nci_tpsa_table)


class Descriptor(NamedTuple):
    r"""One offline target.

    Attributes:
        column (str): The target's column name in the written dataset.
        compute (callable, optional): RDKit molecule → value
            (:obj:`None`: the value shipped with the molecules).
        summary (str): One line for ``--help``.
    """
    column: str
    compute: Optional[Callable]
    summary: str


def _qed(mol) -> float:
    from rdkit.Chem import QED
    return QED.qed(mol)


def _bertz(mol) -> float:
    from rdkit.Chem import GraphDescriptors
    return math.log1p(GraphDescriptors.BertzCT(mol))


def _logp(mol) -> float:
    from rdkit.Chem import Crippen
    return Crippen.MolLogP(mol)


def _fsp3(mol) -> float:
    from rdkit.Chem import rdMolDescriptors
    return rdMolDescriptors.CalcFractionCSP3(mol)


def _rings(mol) -> float:
    from rdkit.Chem import rdMolDescriptors
    return float(rdMolDescriptors.CalcNumRings(mol))


_MOTIF_BITS = 1024


def _motifs(mol) -> float:
    from rdkit.Chem import rdFingerprintGenerator
    generator = rdFingerprintGenerator.GetMorganGenerator(
        radius=2, fpSize=_MOTIF_BITS)
    # the legacy generator's stream is fixed across NumPy versions
    weights = np.random.RandomState(0).standard_normal(_MOTIF_BITS)
    return float(generator.GetFingerprintAsNumPy(mol) @ weights)


#: The offline targets by name (see the module documentation).
DESCRIPTORS: Dict[str, Descriptor] = {
    'tpsa': Descriptor('TPSA', None, 'topological polar surface area '
                       '(a sum over atoms)'),
    'qed': Descriptor('QED', _qed, 'quantitative estimate of '
                      'drug-likeness'),
    'bertz': Descriptor('log1p_BertzCT', _bertz,
                        "log(1 + Bertz's complexity index)"),
    'logp': Descriptor('Crippen_logP', _logp,
                       "Crippen's logP (a sum over atoms)"),
    'fsp3': Descriptor('FractionCSP3', _fsp3,
                       'fraction of sp3 carbon atoms'),
    'rings': Descriptor('NumRings', _rings, 'number of rings (SSSR)'),
    'motifs': Descriptor('motif_activity', _motifs,
                         'a synthetic activity: a fixed random linear '
                         'function of the radius-2 substructures present'),
}


def nci_descriptor_table(target: str = 'tpsa',
                         limit: Optional[int] = None) -> MoleculeTable:
    r"""The NCI molecules that RDKit ships
    (:func:`~torch_geometric_hot.datasets.nci_tpsa_table`) with one
    descriptor of :data:`DESCRIPTORS` as their target.

    Args:
        target (str, optional): A name of :data:`DESCRIPTORS`.
            (default: ``'tpsa'``)
        limit (int, optional): Keep the first :obj:`limit` molecules.
    """
    if target not in DESCRIPTORS:
        raise ValueError(f"'target' must be one of {', '.join(DESCRIPTORS)}"
                         f", got {target!r}")
    table = nci_tpsa_table(limit=limit)
    descriptor = DESCRIPTORS[target]
    if descriptor.compute is None:
        return table
    from rdkit import Chem
    values = [descriptor.compute(Chem.MolFromSmiles(s))
              for s in table.smiles]
    return table._replace(
        targets=np.asarray(values, dtype=np.float64)[:, None],
        target_names=[descriptor.column],
        source=f'{table.source}, {descriptor.column} computed by RDKit')
