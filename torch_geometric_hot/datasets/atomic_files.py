r"""Processed files that are whole or absent, and folders prepared by one
process at a time."""
import contextlib
import errno
import os
from typing import Iterator

import filelock

# errors that mean "no lock here": a lock file this process may not write
# to, or a file system without locks (some network file systems)
_CANNOT_LOCK = (errno.EACCES, errno.EPERM, errno.EROFS, errno.ENOLCK,
                errno.EOPNOTSUPP)


@contextlib.contextmanager
def written_atomically(path: str) -> Iterator[str]:
    r"""Yields a path of this process to write the file to, renamed to
    :obj:`path` when the block ends without an error (removed otherwise).
    Another run on the same root that processes or loads at the same time,
    or a later run after this one was interrupted while writing, then finds
    the file whole or not at all, never truncated.

    .. code-block:: python

        with written_atomically(self.processed_paths[0]) as partial:
            self.save(data_list, partial)
    """
    partial = f'{path}.{os.getpid()}.partial'
    try:
        yield partial
        os.replace(partial, path)
    finally:
        if os.path.exists(partial):
            os.remove(partial)


@contextlib.contextmanager
def held_alone(lock_path: str) -> Iterator[None]:
    r"""Runs the block while this process holds the lock file
    :obj:`lock_path` (created if missing, kept afterwards): a block of
    another process that holds the same lock file waits until this one
    ends. Separate commands started together on a cold root thus prepare a
    dataset folder once, one after the other, instead of each writing and
    processing into it at the same time. The lock is
    :class:`filelock.FileLock`'s (released when the process ends however
    it ends, on POSIX systems and Windows alike). The block runs unlocked
    where the lock file cannot be written (a read-only dataset folder:
    there is nothing to prepare there that another process could race)
    and on file systems without locks. A missing folder is an error.

    .. code-block:: python

        with held_alone(os.path.join(root, '.ogbg-molhiv.lock')):
            ...  # write, download or process the folder
    """
    folder = os.path.dirname(os.path.abspath(lock_path))
    if not os.path.isdir(folder):
        raise FileNotFoundError(errno.ENOENT, "the lock file's folder does "
                                "not exist", folder)
    lock = None
    if os.access(folder, os.W_OK):
        try:
            lock = filelock.FileLock(lock_path)
            lock.acquire()
        except OSError as error:
            if error.errno not in _CANNOT_LOCK:
                raise
            lock = None
    try:
        yield
    finally:
        if lock is not None:
            lock.release()
