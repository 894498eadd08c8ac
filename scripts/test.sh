#!/usr/bin/env bash
# Run the whole test suite in .venv (created by bootstrap.sh if needed).
# The suite runs first with the default backends (torch_scatter when it is
# installed, the native kernel-attention kernels when a C compiler builds
# them), then the core test directories run a second time with
# TORCH_GEOMETRIC_HOT_SCATTER=torch and TORCH_GEOMETRIC_HOT_NATIVE=off, so
# that the pure-torch fallbacks are exercised too. Before them, flake8
# checks the style and the documentation site is built and its doctests
# run. Both pytest runs spread the tests over one worker process per core
# (pytest-xdist; every test runs on one torch thread, see tests/conftest.py);
# TEST_WORKERS sets the number of workers, 0 runs them in this process.
# Extra arguments are passed to pytest.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$root/scripts/bootstrap.sh"
cd "$root"
py="$root/.venv/bin/python"

# The style check (flake8, configured in setup.cfg) and the documentation
# site with its doctests (scripts/docs.sh) first, so that pytest's summary
# stays the last thing printed.
"$py" -m flake8 torch_geometric_hot tests examples benchmarks scripts
echo "test: flake8 found nothing"
"$root/scripts/docs.sh"

# pytest's exit code 5 ("no tests collected") is a failure here: the suite
# is never empty, so an empty run means something is broken.
workers=(-n "${TEST_WORKERS:-auto}")
"$py" -m pytest "${workers[@]}" tests "$@"

core=()
for d in tests/ops tests/nn tests/data tests/devices; do
    [[ -d "$d" ]] && core+=("$d")
done
echo "test: re-running ${core[*]} with the pure-torch backends" \
     "(TORCH_GEOMETRIC_HOT_SCATTER=torch, TORCH_GEOMETRIC_HOT_NATIVE=off)"
TORCH_GEOMETRIC_HOT_SCATTER=torch TORCH_GEOMETRIC_HOT_NATIVE=off \
    "$py" -m pytest "${workers[@]}" "${core[@]}" "$@"
