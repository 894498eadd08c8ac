#!/usr/bin/env bash
# Build the documentation site into docs/_build/html, offline, with warnings
# as errors, then run the examples on its pages as doctests. Extra
# arguments are passed to both sphinx-build runs (e.g. -j 2).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$root/scripts/bootstrap.sh"
cd "$root"
py="$root/.venv/bin/python"

echo "docs: building docs/_build/html (warnings are errors)"
"$py" -m sphinx -W --keep-going -q -b html docs docs/_build/html "$@"
echo "docs: running the doctests"
"$py" -m sphinx -W --keep-going -q -b doctest docs docs/_build/doctest "$@"
tail -n 6 docs/_build/doctest/output.txt
echo "docs: open docs/_build/html/index.html"
