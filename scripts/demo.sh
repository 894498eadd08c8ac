#!/usr/bin/env bash
# Train the invariant MLP on the NCI/TPSA molecules shipped with RDKit and
# write results/tpsa_mlp_curve.png. Extra arguments go to the training script
# (e.g. --quick, --epochs 5).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$root/scripts/bootstrap.sh"
cd "$root"
exec "$root/.venv/bin/python" examples/train_tpsa.py --model mlp "$@"
