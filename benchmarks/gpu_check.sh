#!/usr/bin/env bash
# The GPU check, in this order, everything written under one folder:
#   0. the synchronisation tests on the GPU (a training step of every
#      model under torch.cuda.set_sync_debug_mode('error'), kept index
#      copies), first, so that a time limit never stops them -> sync_tests.log
#   1. the test suite on the GPU (tests/ops tests/nn tests/models
#      tests/devices but those, TORCH_GEOMETRIC_HOT_TEST_DEVICE=cuda; all
#      of it, every failure with its short traceback)          -> tests.log
#   2. the molecule table, eager, medians of 5 rounds, and the
#      device's busy fraction of each model's training step
#      (--busy: torch.profiler, kernel time over step time), and the
#      host's share of it (--host: the time until the step is queued
#      against the time until it has run, the host's top events) -> molecules_eager.json
#   3. the molecule table compiled (--compile: padded batches,
#      torch.compile with CUDA graphs), medians of 5 rounds,
#      and the busy fraction and host share of the compiled steps -> molecules_compiled.json
#   4. aten operators of one training step per model           -> count_ops.json
#   5. hot_scaling.py on the GPU at 1e4 and 1e5 edges          -> hot_scaling.json
#   6. if the time so far leaves room within GPU_CHECK_SECONDS (default
#      540): hot_scaling.py --compile (CUDA graphs) at 1e4 edges,
#      HOT kernel and GATConv (PyG's Performer does not compile) -> hot_scaling_compiled.json
# with each step's output in <step>.log and its time in times.txt; a
# failing step is recorded (status.txt) and the next one runs. Every step
# stops at GPU_CHECK_SECONDS at the latest (its own limit, or the time left
# if that is less; a step with under 10 s left is skipped), so the script
# always ends soon after it: at the end the folder is also packed into one
# file beside it, OUT.tgz.
#
# Usage:  benchmarks/gpu_check.sh [OUT]            (OUT: $1, else $OUT,
#                                                    else ./gpu_check)
#         benchmarks/gpu_check.sh --device cpu OUT  (a dry run of the same
#                                                    steps at tiny sizes,
#                                                    nothing installed)
# PYTHON picks the interpreter (default python3).
#
# Offline: nothing is downloaded. The package is installed with
# `pip install --no-deps --no-build-isolation -e .` (or, failing that,
# imported through PYTHONPATH); torch and torch_geometric must be there.
# The molecule benchmarks read NCITPSA where RDKit and OGB are installed
# and synthetic molecule-like graphs otherwise (--synthetic; printed at
# the top of molecules_eager.log); scripts/offline_wheels.sh downloads
# their wheels for a machine that lacks them. Budget: GPU_CHECK_SECONDS
# (9 minutes) and the packing; about 8 minutes on one H200 (each step has
# its own time limit below; the compiled table's is the largest, as
# inductor compiles each model's training and inference graphs cold: on a
# 2-core CPU HOT's take about 2 minutes per model; step 6 runs only when
# it ends within GPU_CHECK_SECONDS).
set -u
DEVICE=cuda
if [ "${1:-}" = "--device" ]; then DEVICE=$2; shift 2; fi
OUT_DIR=${1:-${OUT:-gpu_check}}
mkdir -p "$OUT_DIR"
OUT_DIR=$(cd "$OUT_DIR" && pwd)
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}

if [ "$DEVICE" != cuda ]; then  # dry run: the tree through PYTHONPATH
    echo "dry run: no install, PYTHONPATH" > "$OUT_DIR/install.log"
elif ! $PY -m pip install --no-deps --no-build-isolation -e . \
        > "$OUT_DIR/install.log" 2>&1; then
    echo "pip install failed: using PYTHONPATH" >> "$OUT_DIR/install.log"
fi
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}

COMPILED_MODELS="gin,gps_multihead,hot_kernel,hot_softmax,tokengt_softmax"
if [ "$DEVICE" = cuda ]; then
    TEST_LIMIT=140; TABLE="--rounds 5 --batches 4 --busy 10 --host 5"
    OPS=""
    SIZES="1e4,1e5"; SCALE_LIMIT=75; MEMORY="--max-mem-gb 100"
    COMPILED_SIZES="1e4"; COMPILED_SCALE_LIMIT=150; BACKEND=inductor
    COMPILED_VARIANTS="hot_kernel,gat"
    TESTS="tests/ops tests/nn tests/models tests/devices"
    # the suite in 12 processes where pytest-xdist is installed (on one
    # H200: about 80 s)
    if $PY -c "import xdist" 2>/dev/null; then TESTS="-n 12 $TESTS"; fi
else  # dry run: tiny sizes, a few tests
    TEST_LIMIT=300; TABLE="--quick --busy 2 --host 2"
    OPS="--batch-size 8 --width 16 --layers 2"
    SIZES="1e2,1e3"; SCALE_LIMIT=150; MEMORY=""
    COMPILED_SIZES="1e2"; COMPILED_SCALE_LIMIT=150; BACKEND=aot_eager
    COMPILED_VARIANTS="hot_kernel"
    TESTS="tests/devices/test_device_fixture.py"
    COMPILED_MODELS="gin,gps_multihead,tokengt_softmax"
    export OMP_NUM_THREADS=1
fi

: > "$OUT_DIR/status.txt"; : > "$OUT_DIR/times.txt"
DEADLINE=${GPU_CHECK_SECONDS:-540}
# step NAME LIMIT COMMAND...: COMMAND for LIMIT seconds, or for the time
# left before the deadline if that is less
step() {
    local name=$1 limit=$2; shift 2
    local start=$SECONDS left=$((DEADLINE - SECONDS))
    if [ "$left" -lt 10 ]; then
        echo "$name skipped (${SECONDS} s so far)" \
            | tee -a "$OUT_DIR/status.txt"
        return
    fi
    [ "$left" -lt "$limit" ] && limit=$left
    timeout "$limit" "$@" > "$OUT_DIR/$name.log" 2>&1
    local rc=$?
    echo "$name $((SECONDS - start)) s" >> "$OUT_DIR/times.txt"
    echo "$name rc=$rc" >> "$OUT_DIR/status.txt"
    echo "$name: rc=$rc, $((SECONDS - start)) s"
}

$PY -c "import torch, torch_geometric, torch_geometric_hot as t; \
print(torch.__version__, torch_geometric.__version__, t.__file__, \
torch.cuda.get_device_name(0) if torch.cuda.is_available() else 'no GPU')" \
    > "$OUT_DIR/versions.txt" 2>&1

SYNC_TESTS="tests/models/test_step_synchronisation.py tests/ops/test_row_selection.py"
step sync_tests 60 env TORCH_GEOMETRIC_HOT_TEST_DEVICE=$DEVICE \
    $PY -m pytest $SYNC_TESTS -q -p no:cacheprovider --tb=short -rfE
step tests "$TEST_LIMIT" env TORCH_GEOMETRIC_HOT_TEST_DEVICE=$DEVICE \
    $PY -m pytest $TESTS -q -p no:cacheprovider --tb=short -rfE \
    --durations=15 $(printf -- ' --ignore=%s' $SYNC_TESTS)
step molecules_eager 90 $PY benchmarks/molecule_batches.py \
    --device "$DEVICE" $TABLE --no-memory \
    --out "$OUT_DIR/molecules_eager.json"
step molecules_compiled 240 $PY benchmarks/molecule_batches.py \
    --device "$DEVICE" $TABLE --no-memory --compile \
    --models "$COMPILED_MODELS" --out "$OUT_DIR/molecules_compiled.json"
step count_ops 30 $PY benchmarks/molecule_batches.py --count-ops \
    --device "$DEVICE" $OPS --out "$OUT_DIR/count_ops.json"
step hot_scaling "$SCALE_LIMIT" $PY benchmarks/hot_scaling.py \
    --device "$DEVICE" --sizes "$SIZES" --max-seconds 15 $MEMORY \
    --variants hot_kernel,hot_softmax,gps_performer \
    --out "$OUT_DIR/hot_scaling.json"
if [ $((SECONDS + COMPILED_SCALE_LIMIT)) -le "$DEADLINE" ]
then
    step hot_scaling_compiled "$COMPILED_SCALE_LIMIT" $PY \
        benchmarks/hot_scaling.py --device "$DEVICE" \
        --sizes "$COMPILED_SIZES" --max-seconds 15 $MEMORY \
        --compile "$BACKEND" --variants "$COMPILED_VARIANTS" \
        --out "$OUT_DIR/hot_scaling_compiled.json"
else
    echo "hot_scaling_compiled skipped (${SECONDS} s so far)" \
        | tee -a "$OUT_DIR/status.txt"
fi
tar czf "$OUT_DIR.tgz" -C "$(dirname "$OUT_DIR")" "$(basename "$OUT_DIR")"
echo "done: $OUT_DIR ($OUT_DIR.tgz)"
cat "$OUT_DIR/status.txt"
