#!/usr/bin/env bash
# Wheels of the [ogb] extra for a machine without network access that
# already has PyTorch, PyG and the PyData stack (numpy, pandas, scikit-learn,
# requests, Pillow): OGB, RDKit and the two small packages OGB needs besides
# those. Downloaded here, for the target's Python and platform, into one
# folder to copy there. Without them the molecule benchmarks there fall back
# to synthetic molecule-like graphs (molecule_batches.py --synthetic), and
# their figures are then not comparable with NCITPSA's.
#
# Usage:  scripts/offline_wheels.sh [DIR] [PYTHON_VERSION]
#         (DIR: default .whl, ignored by git; PYTHON_VERSION: default 3.12)
# There:  python3 -m pip install --no-index --no-deps --target /tmp/site \
#             DIR/*.whl && export PYTHONPATH=/tmp/site
#
# The versions are pinned to those the tests here run with (move them
# together), so that the offline data (RDKit's NCI molecules) and its
# featurisation are the same on both machines.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dir="${1:-$root/.whl}"
version="${2:-3.12}"
python="${PYTHON:-$root/.venv/bin/python}"
[[ -x "$python" ]] || python=python3

packages=(ogb==1.3.6 outdated==0.2.2 littleutils==0.2.4 rdkit==2026.9.1)
platforms=()
for tag in manylinux_2_28 manylinux_2_27 manylinux_2_17 manylinux2014 \
           manylinux1; do
    platforms+=(--platform "${tag}_x86_64")
done

mkdir -p "$dir"
"$python" -m pip download --quiet --no-deps --only-binary=:all: \
    --python-version "$version" --implementation cp "${platforms[@]}" \
    --dest "$dir" "${packages[@]}" 2>&1 \
    | { grep -v "^WARNING: Location 'file:" || true; }
echo "offline_wheels: $(ls "$dir"/*.whl | wc -l) wheels in $dir" \
     "($(du -sh "$dir" | cut -f1)) for Python $version"
