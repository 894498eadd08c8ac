import pytest
import torch
from torch_geometric.loader import DataLoader
from torch_geometric.transforms import BaseTransform

pytest.importorskip('rdkit')
pytest.importorskip('ogb')

from torch_geometric_hot.datasets import NCITPSA  # noqa: E402

LIMIT = 30


class _Mark(BaseTransform):
    def __init__(self, value: int):
        self.value = value

    def forward(self, data):
        data.mark = torch.tensor([self.value])
        return data

    def __repr__(self):
        return f'{self.__class__.__name__}({self.value})'


@pytest.fixture(scope='module')
def root(tmp_path_factory):
    return str(tmp_path_factory.mktemp('nci_tpsa'))


def test_loads_with_ogb_features(root):
    dataset = NCITPSA(root, limit=LIMIT)
    assert len(dataset) == LIMIT
    assert str(dataset) == f'NCITPSA({LIMIT})'
    data = dataset[0]
    assert data.x.dtype == torch.long and data.x.shape == (data.num_nodes, 9)
    num_edges = data.edge_index.size(1)
    assert data.edge_index.dtype == torch.long
    assert data.edge_attr.dtype == torch.long
    assert data.edge_attr.shape == (num_edges, 3)
    assert data.y.dtype == torch.float and data.y.shape == (1, 1)
    # The first row of the CSV: CC1=CC(=O)C=CC1=O, TPSA 34.14 (9 atoms,
    # 9 bonds stored in both directions).
    assert data.smiles == 'CC1=CC(=O)C=CC1=O'
    assert data.num_nodes == 9 and num_edges == 18
    assert data.y.item() == pytest.approx(34.14)
    batch = next(iter(DataLoader(dataset, batch_size=4)))
    assert batch.num_graphs == 4 and batch.y.shape == (4, 1)


def test_split_is_disjoint_complete_and_deterministic(root):
    dataset = NCITPSA(root, limit=LIMIT)
    split = dataset.get_idx_split()
    again = NCITPSA(root, limit=LIMIT).get_idx_split()
    other = NCITPSA(root, limit=LIMIT, split_seed=1).get_idx_split()
    sizes = [split[k].numel() for k in ('train', 'val', 'test')]
    assert sizes == [24, 3, 3]
    everything = torch.cat([split['train'], split['val'], split['test']])
    assert torch.equal(everything.sort().values, torch.arange(LIMIT))
    for key in split:
        assert torch.equal(split[key], again[key])
    assert not torch.equal(split['train'], other['train'])

    val = NCITPSA(root, split='val', limit=LIMIT)
    assert len(val) == 3
    expected = [dataset[int(i)].smiles for i in split['val']]
    assert [data.smiles for data in val] == expected


def test_pre_transform_and_limit_are_not_stale(root):
    first = NCITPSA(root, limit=5, pre_transform=_Mark(1))
    second = NCITPSA(root, limit=5, pre_transform=_Mark(2))
    assert first[0].mark.item() == 1
    assert second[0].mark.item() == 2
    assert first.processed_dir != second.processed_dir
    assert len(NCITPSA(root, limit=7, pre_transform=_Mark(2))) == 7


def test_skips_unparsable_smiles(tmp_path):
    raw = tmp_path / 'raw'
    raw.mkdir()
    (raw / 'first_5k.tpsa.csv').write_text(
        '# header comment\nCCO,20.23\n[Al](C)(C)(C)(C)(C)C,0.0\nC,0.0\n')
    dataset = NCITPSA(str(tmp_path))
    assert [data.smiles for data in dataset] == ['CCO', 'C']
    assert dataset.skipped == ['[Al](C)(C)(C)(C)(C)C']
    assert dataset[1].edge_index.shape == (2, 0)


def test_bad_arguments(root):
    with pytest.raises(ValueError, match='split'):
        NCITPSA(root, split='training', limit=LIMIT)
    with pytest.raises(ValueError, match='limit'):
        NCITPSA(root, limit=0)


def test_missing_extra_is_a_clear_error(tmp_path, monkeypatch):
    import sys
    monkeypatch.setitem(sys.modules, 'ogb.utils', None)
    with pytest.raises(ImportError, match=r"torch_geometric_hot\[ogb\]"):
        NCITPSA(str(tmp_path), limit=3)
