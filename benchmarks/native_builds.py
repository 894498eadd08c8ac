r"""Two builds of the native kernels side by side in one process.

This machine's speed swings by up to 1.5x within minutes, so two timings
taken one after the other compare the moments more than the code. This
script builds the kernel sources of two versions (a folder or a git
revision each; by default the revision given and the working tree), then
runs forward+backward passes of ``hot_scaling.py``'s HOT kernel model
(``4 x Enc2->2 + Enc2->0``, width 32, 4 heads x 8, FAVOR+) alternating
between the builds pass by pass, so that a drift of the machine hits both
alike. It prints each build's minimum and median and their ratio (second
/ first; below 1: faster), checks that the two builds compute the same
output and input gradient, and writes JSON.

The two builds are called through the Python side of the working tree:
they must have the same function signatures (a change to a kernel's
arguments needs its Python side in both), and a source file that a
version lacks (a kernel added since) is taken from the working tree.

Usage::

    python benchmarks/native_builds.py 7df5daf           # that revision vs now
    python benchmarks/native_builds.py old_src/ new_src/ --size 3e4
    python benchmarks/native_builds.py --quick           # now vs itself
"""
import argparse
import ctypes
import os
import subprocess
import sys
import tempfile
import time
from typing import Callable, Dict, List

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.dirname(HERE)]  # harness, package
from harness import alternation_times, format_alternation, \
    software_versions, write_json  # noqa: E402
from hot_scaling import BAGraph, hot_model  # noqa: E402

from torch_geometric_hot.data import PairView  # noqa: E402
from torch_geometric_hot.ops import native  # noqa: E402

REPOSITORY = os.path.dirname(HERE)
SOURCE_DIR = 'torch_geometric_hot/ops/native'  # in the repository


def sources(version: str, folder: str) -> List[str]:
    r"""The kernel sources of :obj:`version` (a folder holding them, or a
    git revision of this repository), written to :obj:`folder`; a source
    the version lacks (a kernel added since) is the working tree's."""
    paths = []
    for source in native._SOURCES:
        name = os.path.basename(source)
        if os.path.isdir(version):
            found = os.path.join(version, name)
            with open(found if os.path.exists(found) else source, 'rb') as f:
                text = f.read()
        else:
            shown = subprocess.run(
                ['git', 'show', f'{version}:{SOURCE_DIR}/{name}'],
                cwd=REPOSITORY, capture_output=True)
            if shown.returncode == 0:
                text = shown.stdout
            else:
                with open(source, 'rb') as f:
                    text = f.read()
        paths.append(os.path.join(folder, name))
        with open(paths[-1], 'wb') as f:
            f.write(text)
    return paths


def build(paths: List[str], target: str):
    r"""The kernels compiled from :obj:`paths` as the library compiles
    them, loaded and declared."""
    compiler = native._compiler()
    if compiler is None:
        raise RuntimeError('no C compiler')
    error = native._compile(compiler, native._FLAGS[0], paths, target)
    if error is not None:
        raise RuntimeError(f'compiling {paths} failed:\n{error}')
    return native._declare(ctypes.CDLL(target))


def compare(libraries: Dict[str, object], step: Callable[[], torch.Tensor],
            x: torch.Tensor, repeats: int) -> Dict:
    r"""Alternating passes of :obj:`step` (whose input :obj:`x` requires
    grad) with each library; their times and whether they agree."""
    original = native._function
    current = ['']

    def function(name, dtype):
        suffix = 'f32' if dtype == torch.float32 else 'f64'
        return getattr(libraries[current[0]], f'{name}_{suffix}')

    times: Dict[str, List[float]] = {name: [] for name in libraries}
    results = {}
    native._function = function
    try:
        for rep in range(repeats + 1):  # the first round warms up
            for name in libraries:
                current[0] = name
                x.grad = None
                start = time.perf_counter()
                out = step()
                out.sum().backward()
                elapsed = time.perf_counter() - start
                if rep:
                    times[name].append(elapsed)
                else:
                    results[name] = (out.detach(), x.grad.clone())
    finally:
        native._function = original
    (a, (out_a, grad_a)), (b, (out_b, grad_b)) = results.items()
    record = dict(threads=torch.get_num_threads(), builds=[a, b],
                  max_abs_diff_out=float((out_a - out_b).abs().max()),
                  max_abs_diff_grad=float((grad_a - grad_b).abs().max()))
    record.update(alternation_times(times, a, b, ('a', 'b')))
    return record


def format_record(r: Dict) -> str:
    return (format_alternation(r, ('a', 'b'),
                               [f'{build}:' for build in r['builds']]) +
            f" (min / median; max |diff| out {r['max_abs_diff_out']:.1e}, "
            f"grad {r['max_abs_diff_grad']:.1e})")


def main(argv=None) -> List[Dict]:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('versions', nargs='*',
                        help='one or two folders or git revisions (one: '
                        'it against the working tree; none: the working '
                        'tree against itself)')
    parser.add_argument('--size', type=float, default=1e5,
                        help='directed edges of the graph')
    parser.add_argument('--repeats', type=int, default=4)
    parser.add_argument('--threads', type=int, default=1)
    parser.add_argument('--quick', action='store_true',
                        help='3*10^3 edges, two rounds (seconds)')
    parser.add_argument('--out', default=None, help='JSON output path')
    args = parser.parse_args(argv)
    if len(args.versions) > 2:
        parser.error('at most two versions')
    torch.set_num_threads(args.threads)
    working_tree = os.path.join(REPOSITORY, SOURCE_DIR)
    versions = args.versions or [working_tree]
    if len(versions) == 1:
        versions.append(working_tree)
    size = 3000 if args.quick else int(args.size)
    repeats = 2 if args.quick else args.repeats
    with tempfile.TemporaryDirectory() as folder:
        libraries = {}
        for k, version in enumerate(versions):
            sub = os.path.join(folder, str(k))
            os.makedirs(sub)
            label = f'{k}:{os.path.normpath(version)}'
            libraries[label] = build(sources(version, sub),
                                     os.path.join(sub, 'kernels.so'))
        graph, model = BAGraph(size), hot_model('kernel')
        view = PairView.build(graph.edge_index, graph.num_nodes)
        graph.x.requires_grad_()
        record = compare(libraries,
                         lambda: model(graph.x, graph.edge_index, view=view),
                         graph.x,
                         repeats)
    record.update(benchmark='native_builds', variant='hot_kernel',
                  device='cpu', versions=software_versions(), **graph.fields)
    print(format_record(record))
    if args.out:
        write_json(args.out, [record])
    return [record]


if __name__ == '__main__':
    main()
