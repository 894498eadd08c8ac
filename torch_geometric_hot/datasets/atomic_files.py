r"""Processed files that are whole or absent, and folders prepared by one
process at a time."""
import contextlib
import errno
import os
from typing import Iterator

try:
    import fcntl
except ImportError:  # not a POSIX system
    fcntl = None

# errors that mean "no lock here": a folder this process may not write to,
# or a file system without locks (some network file systems)
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
    processing into it at the same time. The lock is an advisory POSIX
    lock (:func:`fcntl.flock`, released when the process ends however it
    ends). The block runs unlocked without :mod:`fcntl` (Windows), where
    the lock file cannot be created (a read-only dataset folder: there is
    nothing to prepare there that another process could race) and on file
    systems without locks.

    .. code-block:: python

        with held_alone(os.path.join(root, '.ogbg-molhiv.lock')):
            ...  # write, download or process the folder
    """
    with contextlib.ExitStack() as stack:
        if fcntl is not None:
            try:
                handle = stack.enter_context(open(lock_path, 'a'))
                fcntl.flock(handle, fcntl.LOCK_EX)
                stack.callback(fcntl.flock, handle, fcntl.LOCK_UN)
            except OSError as error:
                if error.errno not in _CANNOT_LOCK:
                    raise
        yield
