r"""The software a run or a benchmark ran with, recorded beside its
results.

A training run with the same seed and data reproduces bit for bit on the
same code, but a change in the order of floating-point sums (another
kernel path, another library version) moves what 40 epochs of training
end at, so every result file names the code that produced it: the
versions of Python, torch, PyG and this package, and, when the package is
imported from a git checkout, the checkout's commit (with ``-dirty`` when
tracked files differ from it).
"""
import functools
import os.path as osp
import platform
import subprocess
from typing import Dict, List, Optional

import torch
import torch_geometric

from torch_geometric_hot import __version__

PACKAGE_DIR = osp.dirname(osp.dirname(osp.abspath(__file__)))


def _git(args: List[str], cwd: str) -> Optional[str]:
    try:
        done = subprocess.run(['git', *args], cwd=cwd, capture_output=True,
                              text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


@functools.lru_cache(maxsize=None)
def source_commit(package_dir: str = PACKAGE_DIR) -> Optional[str]:
    r"""The commit of the git checkout that ``package_dir`` (the package's
    own folder by default) is the top-level package of, with ``-dirty``
    when tracked files differ from it; :obj:`None` when the package is not
    imported from a checkout (an installed wheel) or git is missing.

    Args:
        package_dir (str): the folder of the package.
    """
    root = osp.dirname(package_dir)
    top = _git(['rev-parse', '--show-toplevel'], root)
    # a checkout that holds the package, not one that happens to hold an
    # installed copy of it further down
    if top is None or osp.realpath(top) != osp.realpath(root):
        return None
    commit = _git(['rev-parse', 'HEAD'], root)
    if commit is None:
        return None
    changed = _git(['status', '--porcelain', '--untracked-files=no'], root)
    return commit + ('-dirty' if changed else '')


def software_versions() -> Dict[str, Optional[str]]:
    r"""The versions a result was produced with: ``python``, ``torch``,
    ``torch_geometric``, ``torch_geometric_hot`` and ``source``
    (:func:`source_commit`)."""
    # plain strings (torch.__version__ is a str subclass that checkpoints
    # loaded with weights_only=True cannot hold)
    return {'python': platform.python_version(),
            'torch': str(torch.__version__),
            'torch_geometric': str(torch_geometric.__version__),
            'torch_geometric_hot': str(__version__),
            'source': source_commit()}
