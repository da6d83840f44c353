#!/usr/bin/env bash
# The evaluator's GPU check: one table of fits/s (warm and cold) and value-only
# node-evaluations/s for device=gpu (vmap layout) at n = 1e4 and 1e5 rows and batches of 256,
# 1024 and 4096 formulas, in under 8 minutes on one H200. Needs only JAX (with CUDA), numpy,
# sympy and scipy; no Ray, Hydra, duckdb or jsonschema, no pip install, no network.
#
#   bench/gpu_check.sh               # on the GPU machine, from anywhere in the repo
#   bench/gpu_check.sh --dry-run     # CPU smoke run in seconds (or GPU_CHECK_DRY_RUN=1)
#
# Other arguments go to bench/gpu_evaluator.py (--rows, --batches, --budget-s, ...). With $OUT
# set, the table is also written to $OUT/gpu_check.md (and the cells to $OUT/gpu_check.json).
# PYTHON picks the interpreter (default python3).
set -euo pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
PYTHON="${PYTHON:-python3}"

dry="${GPU_CHECK_DRY_RUN:-0}"
args=()
for arg in "$@"; do
  if [ "$arg" = "--dry-run" ]; then dry=1; else args+=("$arg"); fi
done

if [ "$dry" = 1 ]; then
  export JAX_PLATFORMS=cpu
  exec "$PYTHON" bench/gpu_evaluator.py --dry-run ${args[@]+"${args[@]}"}
fi
# More of the GPU's memory for the widest batches than JAX's default 75%.
export XLA_PYTHON_CLIENT_MEM_FRACTION="${XLA_PYTHON_CLIENT_MEM_FRACTION:-0.9}"
exec "$PYTHON" bench/gpu_evaluator.py --device gpu ${args[@]+"${args[@]}"}
