#!/usr/bin/env bash
# Run the whole test suite in .venv (created by bootstrap.sh if needed).
# With the optional torch_scatter extension installed, the suite runs first
# with the default backend (torch_scatter) and the core test directories run
# a second time with TORCH_GEOMETRIC_HOT_SCATTER=torch, so that both scatter
# backends are exercised. Extra arguments are passed to pytest.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$root/scripts/bootstrap.sh"
cd "$root"
py="$root/.venv/bin/python"

# pytest's exit code 5 ("no tests collected") is a failure here: the suite
# is never empty, so an empty run means something is broken.
"$py" -m pytest tests "$@"

if "$py" -c "import torch_scatter" 2>/dev/null && [[ -d tests/ops ]]; then
    core=()
    for d in tests/ops tests/nn tests/data; do
        [[ -d "$d" ]] && core+=("$d")
    done
    echo "test: torch_scatter found; re-running ${core[*]} with the" \
         "pure-torch scatter backend"
    TORCH_GEOMETRIC_HOT_SCATTER=torch "$py" -m pytest "${core[@]}" "$@"
else
    echo "test: torch_scatter not installed; the pure-torch backend was" \
         "tested (one run)"
fi
