r"""Processed files that are whole or absent."""
import contextlib
import os
from typing import Iterator


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
