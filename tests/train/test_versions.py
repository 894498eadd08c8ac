import os.path as osp
import shutil
import subprocess

import pytest
import torch
import torch_geometric

import torch_geometric_hot
from torch_geometric_hot.train.versions import (software_versions,
                                                source_commit)

needs_git = pytest.mark.skipif(shutil.which('git') is None,
                               reason='git is not installed')


def git(cwd, *args):
    return subprocess.run(['git', '-c', 'user.name=t', '-c',
                           'user.email=t@example.com', *args], cwd=cwd,
                          check=True, capture_output=True,
                          text=True).stdout.strip()


def checkout(path):
    r"""A git checkout at :obj:`path` holding a package ``pkg``."""
    package = path / 'pkg'
    package.mkdir(parents=True)
    (package / '__init__.py').write_text('x = 1\n')
    git(path, 'init', '-q')
    git(path, 'add', '.')
    git(path, 'commit', '-q', '-m', 'first')
    return str(package)


def test_software_versions_name_the_running_libraries():
    versions = software_versions()
    assert versions['torch'] == torch.__version__
    assert versions['torch_geometric'] == torch_geometric.__version__
    assert versions['torch_geometric_hot'] == torch_geometric_hot.__version__
    assert set(versions) == {'python', 'torch', 'torch_geometric',
                             'torch_geometric_hot', 'source'}
    # plain strings: a checkpoint loaded with weights_only=True holds them
    assert all(type(v) is str or v is None for v in versions.values())


@needs_git
def test_source_commit_of_a_checkout_and_of_its_changes(tmp_path):
    package = checkout(tmp_path / 'repo')
    head = git(tmp_path / 'repo', 'rev-parse', 'HEAD')
    assert source_commit(package) == head
    with open(osp.join(package, '__init__.py'), 'a') as f:
        f.write('y = 2\n')
    source_commit.cache_clear()
    assert source_commit(package) == head + '-dirty'
    # untracked files are not changes to the code that ran
    git(tmp_path / 'repo', 'checkout', '-q', '--', '.')
    (tmp_path / 'repo' / 'notes.txt').write_text('scratch')
    source_commit.cache_clear()
    assert source_commit(package) == head


@needs_git
def test_no_source_commit_outside_a_checkout_of_the_package(tmp_path):
    plain = tmp_path / 'plain' / 'pkg'
    plain.mkdir(parents=True)
    assert source_commit(str(plain)) is None
    # an installed copy inside some other checkout is not that checkout's
    outer = tmp_path / 'outer'
    checkout(outer)
    nested = outer / 'venv' / 'site-packages' / 'pkg'
    nested.mkdir(parents=True)
    source_commit.cache_clear()
    assert source_commit(str(nested)) is None
