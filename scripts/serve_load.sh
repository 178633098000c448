#!/usr/bin/env bash
# Load test of `ptxbench serve` (tests/serve_load.py): N concurrent Python clients send M answers drawn from the
# committed solutions, probes, adversarial corpus and model-style answers (endless loops and printf floods
# included; a GPU worker is killed mid-run when the GPU stages run); then `ptxbench eval` on each distinct
# answer with the same seed. Checks every request answered within its deadline, verdicts identical to eval's,
# queue figures during the run, verdicts per GPU-hour, p50/p95 latency, /healthz after; ends with a table.
#
# usage: scripts/serve_load.sh [BUILD_DIR] [serve_load.py flags...]      (BUILD_DIR default: build-gpu)
#   env: SERVE_LOAD_CLIENTS (64), SERVE_LOAD_ANSWERS (500), SERVE_LOAD_GPU (auto|on|off), SERVE_LOAD_POOL
#        (core|all), SERVE_LOAD_SEED, SERVE_LOAD_WORKERS (serve --workers, 6), SERVE_LOAD_DEADLINE (600),
#        SERVE_LOAD_SHORT_DEADLINE (4), SERVE_LOAD_KILL_AT (0.3,0.6), SERVE_LOAD_EVAL_JOBS (4),
#        SERVE_LOAD_SANITIZER (1: keep the sanitizer rerun), SERVE_LOAD_URL (a running service or balancer),
#        SERVE_LOAD_OUT (default BUILD_DIR/serve_load); flags win over them (serve_load.py --help).
# Needs BUILD_DIR/apps/ptxbench; with the GPU stages also BUILD_DIR/evaluator/worker/ptxbench-worker (and
# ptxbench-nvrtc beside it): cmake --build BUILD_DIR --target ptxbench ptxbench-worker ptxbench-nvrtc
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=$ROOT/build-gpu
if [[ $# -gt 0 && $1 != -* ]]; then
  BUILD=$(cd "$1" && pwd)
  shift
fi
PTXBENCH=${PTXBENCH:-$BUILD/apps/ptxbench}
if [[ ! -x $PTXBENCH ]]; then
  echo "serve_load: no $PTXBENCH; build it: cmake --build $BUILD --target ptxbench ptxbench-worker ptxbench-nvrtc" >&2
  exit 3
fi
WORKER=$BUILD/evaluator/worker/ptxbench-worker
if [[ -x $WORKER ]]; then
  export PTXBENCH_WORKER=${PTXBENCH_WORKER:-$WORKER}
elif [[ ${SERVE_LOAD_GPU:-auto} != off ]] && command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1; then
  echo "serve_load: a GPU is here but $WORKER is not built: cmake --build $BUILD --target ptxbench-worker" >&2
  exit 3
fi
export SERVE_LOAD_OUT=${SERVE_LOAD_OUT:-$BUILD/serve_load}
exec python3 "$ROOT/tests/serve_load.py" "$PTXBENCH" "$@"
