import math

import numpy as np
import pytest
import torch

pytest.importorskip('rdkit')
pytest.importorskip('ogb')

from rdkit import Chem  # noqa: E402
from rdkit.Chem import QED, Crippen, GraphDescriptors  # noqa: E402
from rdkit.Chem import rdMolDescriptors  # noqa: E402

from torch_geometric_hot.datasets import (  # noqa: E402
    load_molecule_benchmark, nci_tpsa_table)
from torch_geometric_hot.datasets.nci_descriptors import (  # noqa: E402
    DESCRIPTORS, nci_descriptor_table)
from torch_geometric_hot.train.cli import parse_args  # noqa: E402

N = 60


def _motifs(mol):
    from rdkit.Chem import AllChem, DataStructs
    bits = AllChem.GetMorganFingerprintAsBitVect(mol, 2, nBits=1024)
    present = np.zeros(1024)
    DataStructs.ConvertToNumpyArray(bits, present)
    return float(present @ np.random.RandomState(0).standard_normal(1024))


DIRECT = {  # each descriptor computed here without the module
    'qed': QED.qed,
    'bertz': lambda m: math.log1p(GraphDescriptors.BertzCT(m)),
    'logp': Crippen.MolLogP,
    'fsp3': rdMolDescriptors.CalcFractionCSP3,
    'rings': lambda m: float(rdMolDescriptors.CalcNumRings(m)),
    'motifs': _motifs,
}


@pytest.mark.parametrize('target', sorted(DIRECT))
def test_descriptor_values(target):
    table = nci_descriptor_table(target, limit=N)
    plain = nci_tpsa_table(limit=N)
    assert table.smiles == plain.smiles
    assert table.target_names == [DESCRIPTORS[target].column]
    expected = [DIRECT[target](Chem.MolFromSmiles(s)) for s in table.smiles]
    np.testing.assert_allclose(table.targets[:, 0], expected, rtol=1e-12)
    # not the shipped polar surface area, and not constant
    assert not np.allclose(table.targets[:, 0], plain.targets[:, 0])
    assert np.std(table.targets[:, 0]) > 0


def test_tpsa_is_the_shipped_table():
    table, plain = nci_descriptor_table('tpsa', N), nci_tpsa_table(N)
    assert table.smiles == plain.smiles
    np.testing.assert_array_equal(table.targets, plain.targets)


def test_unknown_target_is_a_clear_error():
    with pytest.raises(ValueError, match="'target' must be one of"):
        nci_descriptor_table('solubility')


def test_offline_benchmark_labelled_with_a_descriptor(tmp_path):
    bench = load_molecule_benchmark('ogbg-molesol', str(tmp_path),
                                    offline=True, offline_molecules=N,
                                    offline_target='bertz')
    labels = torch.cat([bench.dataset[i].y for i in range(N)]).view(-1)
    table = nci_descriptor_table('bertz', N)
    # the raw layout keeps 6 significant digits
    np.testing.assert_allclose(labels.numpy(), table.targets[:, 0],
                               rtol=1e-5)
    assert bench.offline_source['target_names'] == ['log1p_BertzCT']
    # the root keeps its target: another one is refused, the same one read
    with pytest.raises(ValueError, match='labelled with log1p_BertzCT'):
        load_molecule_benchmark('ogbg-molesol', str(tmp_path), offline=True,
                                offline_target='qed')
    again = load_molecule_benchmark('ogbg-molesol', str(tmp_path),
                                    offline=True, offline_target='bertz')
    assert len(again.dataset) == N


def test_command_line():
    args = parse_args(['--dataset', 'ogbg-molesol', '--offline',
                       '--offline-target', 'qed'])
    assert args.offline_target == 'qed'
    assert parse_args([]).offline_target == 'tpsa'
    with pytest.raises(SystemExit):
        parse_args(['--offline-target', 'qed'])  # needs --offline
    with pytest.raises(SystemExit):
        parse_args(['--offline', '--offline-target', 'mass'])
