r"""Executes the notebooks of this folder with a real Jupyter kernel
(nbclient + ipykernel) running the Python that runs this script, and writes
their outputs back into the .ipynb files.

Each notebook runs in a fresh kernel with one torch thread, in an empty
working folder, with its data cached in a fresh temporary folder, so the
stored outputs come from the current code only. The wall time of each
notebook is printed.
"""
import argparse
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, Optional, Tuple

NOTEBOOKS = Path(__file__).resolve().parent
KERNEL_NAME = 'python3'


def kernel_spec_manager(folder: Path):
    r"""A kernel spec manager whose only kernel, ``python3``, is an ipykernel
    started by :data:`sys.executable` (so the kernel sees the same packages,
    whatever other kernel specs the machine has registered)."""
    from ipykernel.kernelspec import write_kernel_spec
    from jupyter_client.kernelspec import KernelSpecManager
    write_kernel_spec(folder / KERNEL_NAME)
    return KernelSpecManager(kernel_dirs=[str(folder)],
                             ensure_native_kernel=False)


def execute(path: Path, quick: bool, data_dir: Path, work_dir: Path,
            extra_code: Optional[str] = None, timeout: int = 1200
            ) -> Tuple[object, float]:
    r"""Runs the notebook at :obj:`path` top to bottom and returns it with
    its new outputs (not saved) and the wall time in seconds.

    Args:
        path (Path): The notebook.
        quick (bool): The notebook's smaller setting
            (``TORCH_GEOMETRIC_HOT_QUICK=1``).
        data_dir (Path): ``TORCH_GEOMETRIC_HOT_DATA``: where the notebook
            caches its datasets.
        work_dir (Path): The kernel's working folder; the kernel spec is
            written to ``work_dir/kernels``.
        extra_code (str, optional): A code cell appended at the end and run
            in the same kernel (the returned notebook includes it).
        timeout (int, optional): Seconds allowed per cell.
    """
    import nbformat
    from jupyter_client.manager import KernelManager
    from nbclient import NotebookClient

    book = nbformat.read(path, as_version=4)
    if extra_code is not None:
        book.cells.append(nbformat.v4.new_code_cell(extra_code))
    manager = KernelManager(
        kernel_name=KERNEL_NAME,
        kernel_spec_manager=kernel_spec_manager(work_dir / 'kernels'))
    env = dict(os.environ, TORCH_GEOMETRIC_HOT_QUICK='1' if quick else '0',
               TORCH_GEOMETRIC_HOT_DATA=str(data_dir), OMP_NUM_THREADS='1',
               MKL_NUM_THREADS='1')
    env.pop('MPLBACKEND', None)  # the kernel's inline backend draws figures
    client = NotebookClient(book, km=manager, timeout=timeout,
                            record_timing=False,
                            resources={'metadata': {'path': str(work_dir)}})
    start = time.perf_counter()
    client.execute(env=env)
    return book, time.perf_counter() - start


def main(argv=None) -> Dict[str, float]:
    parser = argparse.ArgumentParser(
        description=__doc__.split('\n\n')[0].replace('\n', ' '))
    parser.add_argument('notebooks', nargs='*', type=Path,
                        help='notebooks to run (default: every .ipynb file '
                        'of examples/notebooks)')
    parser.add_argument('--quick', action='store_true',
                        help='run the smaller setting '
                        '(TORCH_GEOMETRIC_HOT_QUICK=1) and save nothing')
    args = parser.parse_args(argv)
    import nbformat
    paths = args.notebooks or sorted(NOTEBOOKS.glob('*.ipynb'))
    times = {}
    for path in paths:
        with tempfile.TemporaryDirectory(prefix='tgh_notebook_') as tmp:
            work = Path(tmp)
            (work / 'run').mkdir()
            book, seconds = execute(path, args.quick, work / 'data',
                                    work / 'run')
        times[path.name] = seconds
        if not args.quick:
            nbformat.write(book, path)
        print(f'{path.name}: {seconds:.0f} s'
              f'{"" if args.quick else ", outputs saved"}', flush=True)
    return times


if __name__ == '__main__':
    main(sys.argv[1:])
