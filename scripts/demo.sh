#!/usr/bin/env bash
# The side-by-side demo: HOT (kernel attention), TokenGT (Laplacian node
# identifiers) and PyG's GIN trained by the package's training command on
# RDKit's NCI molecules written in the PCQM4Mv2 layout (read by OGB's own
# loader, scored by OGB's evaluator), one seed, one split. Prints one results
# table and writes results/demo/curves.png. Extra arguments go to the
# command (python -m torch_geometric_hot.train --help lists them).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$root/scripts/bootstrap.sh"
cd "$root"
export OUTDATED_IGNORE=1  # ogb's check for a newer ogb needs the network
exec "$root/.venv/bin/python" -m torch_geometric_hot.train \
    --dataset pcqm4mv2 --root data_cache/ogb --offline \
    --model hot-kernel,tokengt-lap,gin --hidden 32 --layers 3 \
    --batch-size 64 --lr 2e-3 --epochs 6 --seed 0 --threads 2 \
    --out results/demo "$@"
