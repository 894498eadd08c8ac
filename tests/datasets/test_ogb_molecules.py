import gzip
import json
import os
import os.path as osp
import subprocess
import sys

import numpy as np
import pytest
import torch

pytest.importorskip('rdkit')
pytest.importorskip('ogb')

from ogb.graphproppred import PygGraphPropPredDataset  # noqa: E402
from ogb.lsc import PygPCQM4Mv2Dataset  # noqa: E402
from ogb.utils import smiles2graph  # noqa: E402

from torch_geometric_hot.datasets import (  # noqa: E402
    DownloadError, FolderMismatchError, IncompleteFolderError,
    load_molecule_benchmark, nci_tpsa_table, ogb_safe_globals,
    read_molecule_csv, scaffold_split, write_offline)
from torch_geometric_hot.datasets import ogb_molecules  # noqa: E402
from torch_geometric_hot.transforms import AddSecondOrderView  # noqa: E402

N = 60


@pytest.fixture(scope='module')
def table():
    return nci_tpsa_table(limit=N)


def test_ogbg_layout_reads_through_the_unmodified_loader(tmp_path, table):
    write_offline('ogbg-molhiv', str(tmp_path), table)
    with ogb_safe_globals():
        plain = PygGraphPropPredDataset('ogbg-molhiv', str(tmp_path))
        split = plain.get_idx_split()
    assert len(plain) == N
    assert sorted(torch.cat([split[k] for k in ('train', 'valid', 'test')])
                  .tolist()) == list(range(N))
    for i in (0, 17, N - 1):
        graph = smiles2graph(table.smiles[i])
        data = plain[i]
        assert torch.equal(data.x, torch.from_numpy(graph['node_feat']))
        assert torch.equal(data.edge_index,
                           torch.from_numpy(graph['edge_index']))
        assert torch.equal(data.edge_attr,
                           torch.from_numpy(graph['edge_feat']))
    median = np.median(table.targets[:, 0])
    labels = torch.cat([plain[i].y for i in range(N)]).view(-1)
    assert torch.equal(labels, torch.from_numpy(
        (table.targets[:, 0] > median).astype(np.int64)))
    with gzip.open(osp.join(tmp_path, 'ogbg_molhiv', 'mapping',
                            'mol.csv.gz'), 'rt') as f:
        assert f.readline().strip() == 'task_0,smiles,mol_id'


def test_benchmark_scores_with_the_ogb_evaluator(tmp_path, table):
    write_offline('ogbg-molesol', str(tmp_path), table)
    bench = load_molecule_benchmark('ogbg-molesol', str(tmp_path),
                                    offline=True)
    assert (bench.metric, bench.task_type, bench.num_tasks) == (
        'rmse', 'regression', 1)
    assert not bench.higher_is_better
    y = torch.cat([bench.dataset[i].y for i in range(N)])
    assert bench.evaluate(y, y + 2.0) == pytest.approx(2.0)
    assert bench.offline_source['molecules'] == N


def test_pcqm4mv2_layout(tmp_path, table):
    write_offline('pcqm4mv2', str(tmp_path), table)
    with ogb_safe_globals():
        plain = PygPCQM4Mv2Dataset(str(tmp_path))
        official = plain.get_idx_split()
    assert set(official) == {'train', 'valid', 'test-dev', 'test-challenge'}
    assert all(torch.isnan(plain[int(i)].y).all()
               for i in official['test-dev'])
    bench = load_molecule_benchmark('pcqm4mv2', str(tmp_path), offline=True)
    assert torch.equal(bench.split['test'], torch.as_tensor(
        official['valid']))
    parts = [set(bench.split[k].tolist()) for k in ('train', 'valid')]
    assert not parts[0] & parts[1]
    assert parts[0] | parts[1] == set(torch.as_tensor(
        official['train']).tolist())
    y = torch.stack([bench.dataset[int(i)].y for i in bench.split['test']])
    assert bench.metric == 'mae'
    assert bench.evaluate(y, y - 1.5) == pytest.approx(1.5)


def test_pre_transform_is_cached_per_transform(tmp_path, table):
    write_offline('ogbg-molhiv', str(tmp_path), table)
    bench = load_molecule_benchmark('ogbg-molhiv', str(tmp_path),
                                    pre_transform=AddSecondOrderView())
    assert 'pair_index' in bench.dataset[3]
    again = load_molecule_benchmark('ogbg-molhiv', str(tmp_path),
                                    pre_transform=AddSecondOrderView())
    assert torch.equal(again.dataset[3].pair_index,
                       bench.dataset[3].pair_index)
    plain = load_molecule_benchmark('ogbg-molhiv', str(tmp_path))
    assert 'pair_index' not in plain.dataset[3]


def test_no_prompt_for_a_folder_without_release_marker(tmp_path, table,
                                                       monkeypatch):
    folder = write_offline('ogbg-molhiv', str(tmp_path), table)
    import os
    os.remove(osp.join(folder, 'RELEASE_v1.txt'))

    monkeypatch.setattr('sys.stdin', None)
    with pytest.warns(UserWarning, match='release marker'):
        bench = load_molecule_benchmark('ogbg-molhiv', str(tmp_path))
    assert len(bench.dataset) == N and osp.isdir(folder)


def test_clear_errors(tmp_path, table):
    with pytest.raises(ValueError, match="unknown OGB molecule dataset"):
        load_molecule_benchmark('ogbg-molnope', str(tmp_path))
    afile = tmp_path / 'file'
    afile.write_text('x')
    with pytest.raises(NotADirectoryError, match="'root'"):
        load_molecule_benchmark('ogbg-molhiv', str(afile))
    (tmp_path / 'ogbg_molhiv').mkdir()
    with pytest.raises(FileNotFoundError, match="'root'.*lacks"):
        load_molecule_benchmark('ogbg-molhiv', str(tmp_path))
    # incomplete, whether offline or not
    with pytest.raises(IncompleteFolderError, match="'root'.*lacks"):
        load_molecule_benchmark('ogbg-molhiv', str(tmp_path), offline=True)
    folder = write_offline('ogbg-molesol', str(tmp_path), table)
    os.remove(osp.join(folder, 'SOURCE.json'))  # as a real download
    with pytest.raises(ValueError, match="'root'.*did not write.*drop "
                       "'offline'"):
        load_molecule_benchmark('ogbg-molesol', str(tmp_path), offline=True)


def _offline(root, **kw):
    return load_molecule_benchmark('ogbg-molesol', str(root), offline=True,
                                   **kw)


def test_an_offline_root_keeps_the_molecules_it_was_written_with(tmp_path):
    assert len(_offline(tmp_path, offline_molecules=N).dataset) == N
    with pytest.raises(FolderMismatchError, match=(
            f"'offline_molecules': .*ogbg_molesol holds {N} molecules .*not "
            f"the first {N + 1} NCI molecules: give another 'root', or "
            f"delete")):
        _offline(tmp_path, offline_molecules=N + 1)
    # the same number, or none, reads the root as it is
    assert len(_offline(tmp_path, offline_molecules=N).dataset) == N
    assert len(_offline(tmp_path).dataset) == N
    # a root written with more molecules than there are holds them all
    path = tmp_path / 'ogbg_molesol' / 'SOURCE.json'
    source = json.loads(path.read_text())
    assert source['offline_molecules'] == N
    path.write_text(json.dumps({**source, 'offline_molecules': 2 * N}))
    assert len(_offline(tmp_path, offline_molecules=3 * N).dataset) == N
    with pytest.raises(FolderMismatchError):
        _offline(tmp_path, offline_molecules=N - 1)


def test_an_offline_root_keeps_the_table_it_was_written_from(tmp_path,
                                                             table):
    def csv(name, rows):
        path = tmp_path / name
        path.write_text('smiles,y\n' + ''.join(
            f'{smi},{k}\n' for k, smi in enumerate(table.smiles[:rows])))
        return read_molecule_csv(str(path), 'smiles', ['y'])

    root = tmp_path / 'root'
    assert len(_offline(root, offline_table=csv('a.csv', N)).dataset) == N
    # the same table from another file is the same data
    assert len(_offline(root, offline_table=csv('b.csv', N)).dataset) == N
    with pytest.raises(FolderMismatchError, match=(
            f"'offline_table': .*holds {N} molecules .*a.csv.*, not "
            f".*c.csv \\({N - 1} molecules")):
        _offline(root, offline_table=csv('c.csv', N - 1))
    with pytest.raises(FolderMismatchError, match="'offline_molecules'"):
        _offline(root, offline_molecules=N)
    assert len(_offline(root).dataset) == N  # nothing asked: as it is
    nci = tmp_path / 'nci'
    _offline(nci, offline_molecules=N)
    with pytest.raises(FolderMismatchError, match="'offline_table'.*NCI"):
        _offline(nci, offline_table=csv('a.csv', N))


def test_a_failed_offline_write_leaves_no_folder(tmp_path):
    path = tmp_path / 'mols.csv'
    path.write_text('smiles,y\nCCO,1\nCCN,3\nCCC,4\n')
    few = read_molecule_csv(str(path), 'smiles', ['y'])
    with pytest.raises(ValueError, match='scaffold split.*empty'):
        _offline(tmp_path, offline_table=few)
    assert not (tmp_path / 'ogbg_molesol').exists()
    assert len(_offline(tmp_path, offline_molecules=N).dataset) == N


def _no_network(monkeypatch):
    # OGB fetches through urllib.request.urlopen (ogb.utils.url's
    # decide_download, then download_url), after PyG made the raw folder
    import urllib.error
    import urllib.request
    calls = []

    def urlopen(url, *args, **kw):
        calls.append(url)
        raise urllib.error.URLError('no network here')

    monkeypatch.setattr(urllib.request, 'urlopen', urlopen)
    return calls


def test_a_failed_download_leaves_nothing_it_created(tmp_path, monkeypatch):
    calls = _no_network(monkeypatch)
    (tmp_path / 'esol').mkdir()  # OGB's archive folder, there before
    (tmp_path / 'esol' / 'mine.txt').write_text('kept')
    with pytest.raises(DownloadError, match=(
            "'name': downloading ogbg-molesol into .* failed .*no network "
            "here.*pass 'offline'.*as 'root' the folder that holds a copy")
            ) as info:
        load_molecule_benchmark('ogbg-molesol', str(tmp_path))
    assert isinstance(info.value, ConnectionError) and calls
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        '.ogbg-molesol.lock', 'esol']
    assert (tmp_path / 'esol' / 'mine.txt').read_text() == 'kept'
    # a root this call made goes too, with its parents it made
    fresh = tmp_path / 'new' / 'root'
    with pytest.raises(DownloadError, match='pcqm4mv2'):
        load_molecule_benchmark('pcqm4mv2', str(fresh))
    assert not (tmp_path / 'new').exists()
    # the next call is not misled by a half-made folder
    assert len(_offline(tmp_path, offline_molecules=N).dataset) == N


def test_molecule_csv(tmp_path):
    path = tmp_path / 'mols.csv'
    path.write_text('smiles,logp,other\nCCO,0.5,1\nnot_a_smiles,1.0,2\n'
                    'c1ccccc1,,3\n')
    table = read_molecule_csv(str(path), 'smiles', ['logp', 'other'])
    assert table.smiles == ['CCO', 'c1ccccc1']
    assert table.skipped == [(3, 'not_a_smiles')]
    assert np.isnan(table.targets[1, 0]) and table.targets[1, 1] == 3
    with pytest.raises(ValueError, match=r"no column\(s\) \['gap'\]"):
        read_molecule_csv(str(path), 'smiles', ['gap'])
    bad = tmp_path / 'bad.csv'
    bad.write_text('smiles,y\nCCO,high\n')
    with pytest.raises(ValueError, match="row 2: column 'y'"):
        read_molecule_csv(str(bad), 'smiles', ['y'])


def test_scaffold_split_keeps_scaffolds_apart(table):
    from rdkit.Chem.Scaffolds import MurckoScaffold
    split = scaffold_split(table.smiles)
    scaffold = [MurckoScaffold.MurckoScaffoldSmiles(smiles=s,
                                                    includeChirality=True)
                for s in table.smiles]
    seen = {k: {scaffold[i] for i in v} for k, v in split.items()}
    assert not seen['train'] & seen['test']
    assert not seen['train'] & seen['valid']
    assert sum(len(v) for v in split.values()) == N
    again = scaffold_split(table.smiles)
    assert all(np.array_equal(split[k], again[k]) for k in split)


def test_source_records_skips(tmp_path, table):
    path = tmp_path / 'mols.csv'
    rows = [f'{smi},{k}' for k, smi in enumerate(table.smiles)]
    rows.insert(2, 'C(,2')
    path.write_text('smiles,y\n' + '\n'.join(rows) + '\n')
    mine = read_molecule_csv(str(path), 'smiles', ['y'])
    folder = write_offline('ogbg-molesol', str(tmp_path / 'r'), mine,
                           derive_labels=False)
    with open(osp.join(folder, 'SOURCE.json')) as f:
        source = json.load(f)
    assert source['skipped'] == [[4, 'C(']] and source['molecules'] == N


def test_too_few_scaffolds_is_a_clear_error(tmp_path):
    path = tmp_path / 'mols.csv'
    path.write_text('smiles,y\nCCO,1\nCCN,3\nCCC,4\n')
    with pytest.raises(ValueError, match='scaffold split.*empty'):
        write_offline('ogbg-molesol', str(tmp_path / 'r'),
                      read_molecule_csv(str(path), 'smiles', ['y']))


def test_the_folder_is_prepared_under_the_lock(tmp_path, monkeypatch):
    fcntl = pytest.importorskip('fcntl')
    lock = tmp_path / '.ogbg-molesol.lock'
    held = []

    def open_ogb(*args):
        # another process's lock attempt meets this one's lock
        with open(lock, 'a') as handle:
            with pytest.raises(BlockingIOError):
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        held.append(True)
        return open_unlocked(*args)

    open_unlocked = ogb_molecules._open_ogb
    monkeypatch.setattr(ogb_molecules, '_open_ogb', open_ogb)
    load_molecule_benchmark('ogbg-molesol', str(tmp_path), offline=True,
                            offline_molecules=N,
                            pre_transform=AddSecondOrderView())
    assert held == [True]


def test_separate_commands_on_a_cold_root(tmp_path):
    # started together, the first prepares the folder (OGB processes it
    # once) and the others load it
    code = ('import sys; from torch_geometric_hot.datasets import '
            'load_molecule_benchmark as load; '
            f'b = load("ogbg-molesol", sys.argv[1], offline=True, '
            f'offline_molecules={N}); print(len(b.dataset))')
    runs = [subprocess.Popen([sys.executable, '-c', code, str(tmp_path)],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True) for _ in range(3)]
    outs = []
    for run in runs:
        out, err = run.communicate(timeout=300)
        assert run.returncode == 0, err
        assert out.split()[-1] == str(N)
        outs.append(out)
    assert sum('Loading necessary files' in out for out in outs) == 1
