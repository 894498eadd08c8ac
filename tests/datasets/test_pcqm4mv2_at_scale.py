import numpy as np
import pytest
import torch

pytest.importorskip('rdkit')
pytest.importorskip('ogb')

from ogb.lsc import PygPCQM4Mv2Dataset  # noqa: E402

from torch_geometric_hot.datasets import (  # noqa: E402
    PCQM4MV2_MOLECULES, PCQM4MV2_SPLIT_SIZES, load_molecule_benchmark,
    nci_tpsa_table, ogb_safe_globals, repeated_table, wehi_table,
    write_pcqm4mv2_at_scale)
from torch_geometric_hot.datasets.ogb_layout import (  # noqa: E402
    pcqm4mv2_fractions)

PARTS = ('train', 'valid', 'test-dev', 'test-challenge')


def test_the_real_size_gives_the_real_split_sizes():
    assert PCQM4MV2_MOLECULES == 3_746_620
    fractions = pcqm4mv2_fractions()
    sizes = [int(round(f * PCQM4MV2_MOLECULES)) for f in fractions[:-1]]
    sizes.append(PCQM4MV2_MOLECULES - sum(sizes))
    assert sizes == [PCQM4MV2_SPLIT_SIZES[p] for p in PARTS]


def test_repeated_table_cycles_the_molecules():
    table = nci_tpsa_table(limit=7)
    more = repeated_table(table, 17)
    assert more.smiles == (table.smiles * 3)[:17]
    assert np.array_equal(more.targets[:, 0], np.tile(table.targets[:, 0],
                                                      3)[:17])
    assert 'repeated to 17' in more.source
    assert repeated_table(table, 5).source == table.source
    with pytest.raises(ValueError, match='num_molecules'):
        repeated_table(table, 0)


def test_wehi_molecules_have_their_tpsa():
    table = wehi_table(limit=20)
    from rdkit import Chem
    from rdkit.Chem.rdMolDescriptors import CalcTPSA
    assert len(table.smiles) == 20 and table.target_names == ['TPSA']
    for smi, value in zip(table.smiles, table.targets[:, 0]):
        assert value == pytest.approx(CalcTPSA(Chem.MolFromSmiles(smi)))


def test_written_set_reads_through_ogb_with_the_real_proportions(tmp_path):
    table = nci_tpsa_table(limit=40)
    n = 130  # the 40 molecules three times over and 10 more
    folder = write_pcqm4mv2_at_scale(str(tmp_path), n, table=table)
    with ogb_safe_globals():
        dataset = PygPCQM4Mv2Dataset(str(tmp_path))
        split = dataset.get_idx_split()
    assert len(dataset) == n
    sizes = {p: split[p].numel() for p in PARTS}
    expected = [int(round(f * n)) for f in pcqm4mv2_fractions()[:-1]]
    assert [sizes[p] for p in PARTS[:3]] == expected
    assert sum(sizes.values()) == n and min(sizes.values()) >= 1
    every = torch.cat([torch.as_tensor(split[p]) for p in PARTS])
    assert sorted(every.tolist()) == list(range(n))
    # molecule i is molecule i % 40 of the table: the same graph
    for i in (3, 43, 83, 123):
        assert torch.equal(dataset[i].x, dataset[3].x)
        assert torch.equal(dataset[i].edge_index, dataset[3].edge_index)
    y = torch.stack([dataset[i].y for i in range(n)]).view(-1)
    hidden = torch.cat([torch.as_tensor(split['test-dev']),
                        torch.as_tensor(split['test-challenge'])])
    assert bool(torch.isnan(y[hidden]).all())
    known = torch.cat([torch.as_tensor(split['train']),
                       torch.as_tensor(split['valid'])])
    targets = torch.tensor(np.tile(table.targets[:, 0], 4)[:n],
                           dtype=torch.float)
    assert torch.allclose(y[known], targets[known])
    # and through the library's loader
    bench = load_molecule_benchmark('pcqm4mv2', str(tmp_path))
    assert bench.folder == folder and len(bench.dataset) == n
    assert 'repeated to 130' in bench.offline_source['source']


def test_too_few_molecules_is_a_clear_error(tmp_path):
    with pytest.raises(ValueError, match='at least 26'):
        write_pcqm4mv2_at_scale(str(tmp_path), 20,
                                table=nci_tpsa_table(limit=20))
