#!/usr/bin/env bash
# Same-machine A/B of bench_eval between another source tree (A, e.g. an earlier commit: `git worktree add
# ../ptxbench-a <commit>`, or a copy carried to the GPU machine) and this one (B): builds both, then for each case
# runs A and B alternately (the order flips every round), so clocks, thermals and the selection cache
# affect both alike. Prints one row per case and side: median wall, the stages, speedup median and range.
#
#   scripts/bench_ab.sh A_SRC [TASK/SOLUTION ...]
# Cases default to the verdict-cost set: the naive kernels and the fast reference solutions of the core tasks.
# Environment:
#   OUT=dir              logs and the summary (default build-ab/out)
#   AB_RUNS=3            bench_eval --runs per round; AB_ROUNDS=2 rounds (A,B then B,A)
#   AB_A_ARGS= AB_B_ARGS=  extra bench_eval arguments per side (e.g. AB_B_ARGS=--no-hidden to leave out the
#                        hidden-workload check that A does not have)
#   AB_CMAKE_ARGS=       extra configure arguments for both (e.g. -DPTXBENCH_CUDNN_FRONTEND_INCLUDE=DIR offline)
#   AB_A_BUILD= AB_B_BUILD=  build folders to use instead of A_SRC/build-ab and build-ab; a side whose folder
#                        already holds bench_eval and the worker is not built again
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
A_SRC=$(cd "${1:?usage: scripts/bench_ab.sh A_SRC [TASK/SOLUTION ...]}" && pwd)
shift
CASES=("$@")
[[ ${#CASES[@]} -gt 0 ]] || CASES=(gemm_n7168_k5120/simple mha_fwd_d128/simple_fwd mha_bwd_d128/simple_bwd
  gemm_n7168_k5120/wgmma_tma gemm_n7168_k5120/mma_sync mha_fwd_d128/wgmma_tma mha_fwd_d128/flash_fwd mha_bwd_d128/wgmma)
OUT=${OUT:-$ROOT/build-ab/out}
mkdir -p "$OUT"
JOBS=$(nproc)
build() {  # SRC BUILD_DIR LOG
  (cd "$1" && cmake --preset gpu -B "$2" ${AB_CMAKE_ARGS:-} && \
    cmake --build "$2" -j"$((JOBS / 2 > 0 ? JOBS / 2 : 1))" --target ptxbench ptxbench-worker ptxbench-nvrtc bench_eval) \
    >"$3" 2>&1
}
A_BUILD=${AB_A_BUILD:-$A_SRC/build-ab}
B_BUILD=${AB_B_BUILD:-$ROOT/build-ab}
built() { [[ -x $1/bench/bench_eval && -x $1/evaluator/worker/ptxbench-worker ]]; }
pa='' pb=''
built "$A_BUILD" || { build "$A_SRC" "$A_BUILD" "$OUT/build_a.log" & pa=$!; }
built "$B_BUILD" || { build "$ROOT" "$B_BUILD" "$OUT/build_b.log" & pb=$!; }
[[ -z $pa ]] || wait $pa || { echo "A build failed: $OUT/build_a.log"; tail -20 "$OUT/build_a.log"; exit 3; }
[[ -z $pb ]] || wait $pb || { echo "B build failed: $OUT/build_b.log"; tail -20 "$OUT/build_b.log"; exit 3; }

: >"$OUT/summary.jsonl"
run_side() {  # SIDE CASE ROUND
  local side=$1 c=$2 r=$3 src build extra
  if [[ $side == A ]]; then src=$A_SRC build=$A_BUILD extra=${AB_A_ARGS:-}; else src=$ROOT build=$B_BUILD extra=${AB_B_ARGS:-}; fi
  # shellcheck disable=SC2086
  PTXBENCH_WORKER=$build/evaluator/worker/ptxbench-worker "$build/bench/bench_eval" --task "${c%%/*}" \
    --runs "${AB_RUNS:-3}" --tasks-dir "$src/tasks" --worker "$build/evaluator/worker/ptxbench-worker" \
    --response "$ROOT/tasks/solutions/$c/response.md" $extra >"$OUT/${c/\//.}.$side.$r.log" 2>&1
  tail -1 "$OUT/${c/\//.}.$side.$r.log" | python3 -c "
import json, sys
try: d = json.loads(sys.stdin.read())
except ValueError: sys.exit(0)
d['side'] = '$side'; print(json.dumps(d))" >>"$OUT/summary.jsonl"
}
for c in "${CASES[@]}"; do
  for r in $(seq "${AB_ROUNDS:-2}"); do
    if (( r % 2 )); then run_side A "$c" "$r"; run_side B "$c" "$r"; else run_side B "$c" "$r"; run_side A "$c" "$r"; fi
  done
done
python3 - "$OUT/summary.jsonl" <<'PY' | tee "$OUT/ab_table.txt"
import json, statistics, sys
rows = {}
for line in open(sys.argv[1]):
    d = json.loads(line)
    key = (d["task"] + "/" + d["response"].split("/")[-2], d["side"])
    rows.setdefault(key, []).append(d)
print(f"{'case':36} {'side':4} {'wall s':>7} {'speedup':>8} {'range':>6} status")
for (case, side), ds in sorted(rows.items()):
    walls = [w for d in ds for w in d["walls"]]
    sp = [s for d in ds for s in d["speedups"] if s]
    med = statistics.median(sp) if sp else 0
    rng = (max(sp) - min(sp)) / med if sp and med else 0
    print(f"{case:36} {side:4} {statistics.median(walls):7.3f} {med:8.4f} {rng:6.3f} {ds[0]['status']}")
PY
