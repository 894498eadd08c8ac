import errno
import os

import pytest
import torch
from torch_geometric.data import InMemoryDataset

from torch_geometric_hot.datasets import DelaunaySets
from torch_geometric_hot.datasets.atomic_files import held_alone, \
    written_atomically


def test_the_file_appears_whole_when_the_block_ends(tmp_path):
    path = tmp_path / 'data.pt'
    with written_atomically(str(path)) as partial:
        torch.save(torch.arange(5), partial)
        assert not path.exists()  # nothing at the path while writing
    assert torch.equal(torch.load(path), torch.arange(5))
    assert os.listdir(tmp_path) == ['data.pt']


def test_an_interrupted_write_leaves_no_file(tmp_path):
    path = tmp_path / 'data.pt'
    with pytest.raises(KeyboardInterrupt):
        with written_atomically(str(path)) as partial:
            with open(partial, 'wb') as f:
                f.write(b'PK\x03\x04 truncated')
            raise KeyboardInterrupt
    assert os.listdir(tmp_path) == []


def test_dataset_interrupted_while_saving_processes_again(tmp_path,
                                                          monkeypatch):
    # a run stopped while writing its processed file must not leave a
    # truncated file that every later run fails to load
    pytest.importorskip('scipy')
    save = InMemoryDataset.save.__func__

    def interrupted(cls, data_list, path):
        with open(path, 'wb') as f:
            f.write(b'PK\x03\x04 truncated')
        raise KeyboardInterrupt

    monkeypatch.setattr(DelaunaySets, 'save', classmethod(interrupted))
    with pytest.raises(KeyboardInterrupt):
        DelaunaySets(str(tmp_path), 'train', 3, 6, seed=0)
    monkeypatch.setattr(DelaunaySets, 'save', classmethod(save))
    dataset = DelaunaySets(str(tmp_path), 'train', 3, 6, seed=0)
    assert len(dataset) == 3 and dataset[0].num_nodes == 6


def _taken(lock_path) -> bool:
    # whether another holder has the lock (flock locks of two open files
    # conflict, in one process too)
    fcntl = pytest.importorskip('fcntl')
    with open(lock_path, 'a') as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(handle, fcntl.LOCK_UN)
        return False


def test_the_lock_is_held_for_the_block_only(tmp_path):
    lock = tmp_path / '.data.lock'
    with held_alone(str(lock)):
        assert _taken(lock)
    assert not _taken(lock)
    with pytest.raises(KeyboardInterrupt):
        with held_alone(str(lock)):
            raise KeyboardInterrupt
    assert not _taken(lock)


def test_a_folder_that_cannot_hold_the_lock_runs_unlocked(
        tmp_path, monkeypatch):
    # a read-only dataset folder still loads; a missing one is an error
    access = os.access

    def read_only(path, mode, **kwargs):
        return mode != os.W_OK and access(path, mode, **kwargs)

    monkeypatch.setattr(os, 'access', read_only)
    ran = []
    with held_alone(str(tmp_path / '.data.lock')):
        ran.append(True)
    assert ran == [True] and not (tmp_path / '.data.lock').exists()
    monkeypatch.undo()
    with pytest.raises(FileNotFoundError):
        with held_alone(str(tmp_path / 'missing' / '.data.lock')):
            pass


def test_a_file_system_without_locks_runs_unlocked(tmp_path, monkeypatch):
    fcntl = pytest.importorskip('fcntl')

    def no_locks(handle, operation):
        raise OSError(errno.ENOLCK, 'No locks available')

    monkeypatch.setattr(fcntl, 'flock', no_locks)
    ran = []
    with held_alone(str(tmp_path / '.data.lock')):
        ran.append(True)
    assert ran == [True]
