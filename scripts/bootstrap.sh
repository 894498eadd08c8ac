#!/usr/bin/env bash
# Create (or reuse) the repository's virtual environment in .venv and install
# the package with the [test,ogb,examples,docs] extras.
#
# - torch==2.13.0 is installed first, on its own, so that pip never resolves
#   a different build as a dependency of torch_geometric. Which build is
#   pip's choice: from PyPI on Linux that is the CUDA build (it runs on a
#   CPU too, and pulls in the CUDA libraries); TORCH_INDEX_URL picks the
#   index, e.g. https://download.pytorch.org/whl/cpu for the CPU-only build.
# - A second run is a no-op: the stamp .venv/.installed is newer than
#   pyproject.toml. Touch pyproject.toml (or delete the stamp) to reinstall.
# - The optional torch-scatter extension is installed only from a local
#   wheelhouse (~/.cache/torch_geometric_hot/wheels, or $TGH_WHEELHOUSE);
#   it is never built here (compiling it takes ~6 minutes).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="$root/.venv"
stamp="$venv/.installed"
python="${PYTHON:-python3}"
wheelhouse="${TGH_WHEELHOUSE:-$HOME/.cache/torch_geometric_hot/wheels}"

if [[ -f "$stamp" && "$stamp" -nt "$root/pyproject.toml" ]]; then
    echo "bootstrap: reusing $venv (delete $stamp to reinstall)"
    exit 0
fi

if [[ ! -x "$venv/bin/python" ]]; then
    echo "bootstrap: creating $venv with $("$python" --version)"
    "$python" -m venv "$venv"
fi
pip_install() {
    # Quiet install; drops pip's notes about local index folders that lack
    # a package (machine configuration, harmless). Keeps pip's exit status.
    "$venv/bin/python" -m pip install --quiet "$@" 2>&1 \
        | { grep -v "^WARNING: Location 'file:" || true; }
}

if [[ -n "${TORCH_INDEX_URL:-}" ]]; then
    echo "bootstrap: installing torch==2.13.0 from $TORCH_INDEX_URL"
    pip_install --index-url "$TORCH_INDEX_URL" "torch==2.13.0"
else
    echo "bootstrap: installing torch==2.13.0 (the build pip resolves;" \
         "TORCH_INDEX_URL picks another index)"
    pip_install "torch==2.13.0"
fi
echo "bootstrap: installing torch_geometric_hot[test,ogb,examples,docs]"
pip_install -e "$root[test,ogb,examples,docs]"

if [[ -d "$wheelhouse" ]]; then
    echo "bootstrap: installing torch-scatter from $wheelhouse"
    pip_install --no-index --find-links "$wheelhouse" torch-scatter \
        || echo "bootstrap: no usable torch-scatter wheel in $wheelhouse" \
                "(continuing with the pure-torch backend)"
else
    echo "bootstrap: optional torch-scatter skipped (no wheelhouse at" \
         "$wheelhouse); the pure-torch backend is used"
fi

touch "$stamp"
echo "bootstrap: done"
