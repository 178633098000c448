#!/usr/bin/env bash
# GPU check on a CUDA machine: configure + build (Release), run the GPU test
# label (GEMM, attention, adversarial corpus), evaluate every response under
# tasks/solutions/<globs> with `ptxbench eval --json`, optionally the benchmarks,
# and print a summary (verdict table, corpus table, benchmark figures) last.
#
#   scripts/gpu_check.sh [BUILD_DIR]
# Environment:
#   OUT=dir                 where logs and verdict JSON files go (default BUILD_DIR/gpu_check)
#   GPU_CHECK_SKIP_BUILD=1  use an existing build
#   GPU_CHECK_CTEST_REGEX=  restrict ctest -L gpu to tests matching this regex
#   GPU_CHECK_SOLUTIONS=    space-separated globs TASK/SOLUTION under tasks/solutions (default "*/*": every
#                           solution and probe; "none" = no evaluations, ctest then runs solutions_gpu).
#                           tests/solutions_check.py --gpu evaluates them; its table prints per
#                           task x solution: status, the three axes, per target its warp executions and
#                           work share (FLOPs) or byte share (TMA), candidate and library ms, speedup,
#                           TFLOP/s, whether the verdict matches the folder's expected.json, wall time; a
#                           profile table before it: busiest unit and tensor pipe (yours/library), PC samples
#                           and mapped lines (or why not sampled), the hottest line, profile and sampling seconds
#   GPU_CHECK_SKIP_CTEST=1  skip the test label
#   GPU_CHECK_BENCH_BEFORE=1 with GPU_CHECK_BENCH: each bench_eval case also runs under the earlier settings
#                           (--min-seconds 0.5 --no-reuse-inputs --paired-min-samples 0 --no-prestart-cupti
#                           --wait-for-exit) right before the shipped ones, so the table compares both within
#                           one session (rows "before" / "after")
#   GPU_CHECK_CMAKE_ARGS=   extra configure arguments (e.g. -DPTXBENCH_CUDNN_FRONTEND_INCLUDE=DIR offline)
#   GPU_CHECK_BENCH=1       also bench_eval (median of 5) per family (GEMM and attention, ok and incorrect,
#                           backward; table: median wall, stages, resent-kernel cost), the
#                           cuBLASLt-vs-torch fidelity check (bench/fidelity_gemm.py) and the
#                           cuDNN-vs-torch one (bench/fidelity_attention.py); needs PyTorch + Triton.
#                           The GEMM fidelity runs once more on a back-to-back verdict (--cooldown-ratio 0)
#   GPU_CHECK_BENCH_ATTENTION=0  leave out the attention fidelity (about 90 s)
#   GPU_CHECK_BENCH_FIDELITY=0   leave out both torch fidelity checks
#   GPU_CHECK_LOOP=1        bench_orchestrator against tests/fake_openai_server.py (demo-60) with the GPU
#                           stages on, twice: --baseline (no verdict reuse, no pre-started workers, every
#                           trial, every count) and as shipped; prints busy fraction and verdicts per
#                           GPU-hour of each. GPU_CHECK_LOOP_TASKS (comma list, default the five core
#                           tasks), GPU_CHECK_LOOP_SAMPLES / _TURNS (default 4 / 4), GPU_CHECK_LOOP_LIMIT
#                           (seconds per run, default 600; a run stopped there finishes the stages in
#                           progress and prints its figures so far), GPU_CHECK_LOOP_MODES (default "baseline shipped"; one
#                           mode per call keeps a full-size pair inside a 10-minute device call)
#   GPU_CHECK_MIX=1         the realistic mix: bench_orchestrator --gpu --model mix --no-reuse against the fake
#                           server (answers drawn from the committed kernels: 30% compile errors, 25% incorrect,
#                           25% naive correct, 15% mid-speed, 5% near the library; verdict cache off) over the
#                           five core tasks; prints verdicts per GPU-hour, GPU seconds per verdict class and
#                           each stage's share of GPU time. GPU_CHECK_MIX_SAMPLES / _TURNS (default 4 / 3),
#                           GPU_CHECK_MIX_LIMIT (seconds, default 420; a run stopped there prints its figures)
#   GPU_CHECK_PROFILE_COST=1 bench/profile_cost.py: bench_eval as shipped, --no-pc-sampling and --no-profile per
#                           case (GPU_CHECK_PROFILE_COST_CASES, _RUNS; _GAP_S: seconds between evaluations, as a
#                           run's wait for the model, default 0 = back to back): what the stage adds, by phase
#   GPU_CHECK_NCU=1         bench/profile_vs_ncu.py: every profile figure next to ncu --metrics for the same
#                           kernel and shape (GPU_CHECK_NCU_CASES; reuses the verdicts of the evaluations)
#   GPU_CHECK_BORDERLINE=1  bench/borderline_repeat.py: the borderline corpus kernel evaluated
#                           GPU_CHECK_BORDERLINE_REPEATS (10) times with one run seed, then _FRESH (3) drawn seeds
#   GPU_CHECK_REPAIRS_DEMO=1 scripts/repairs_demo.sh (a student run, teacher repairs, the repair-pairs card and
#                           the report; GPU stages on) into $OUT/repairs_demo
#   GPU_CHECK_REPORT_DEMO=1 bench/report_demo.sh with the GPU stages on (3 models x 5 core tasks x 4 x 4);
#                           the run and report land in $OUT/report_demo
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${1:-$ROOT/build-gpu}
OUT=${OUT:-$BUILD/gpu_check}
mkdir -p "$OUT/verdicts"
NVCC=${NVCC:-/usr/local/cuda/bin/nvcc}

if [[ -z ${GPU_CHECK_SKIP_BUILD:-} ]]; then
  echo "== configure + build ($BUILD)"
  # shellcheck disable=SC2086
  if ! (cd "$ROOT" && cmake --preset gpu -B "$BUILD" -DCMAKE_CUDA_COMPILER="$NVCC" \
      ${GPU_CHECK_CMAKE_ARGS:-}) >"$OUT/configure.log" 2>&1; then
    tail -30 "$OUT/configure.log"; exit 3
  fi
  if ! cmake --build "$BUILD" -j"$(nproc)" --target ptxbench ptxbench-worker ptxbench-nvrtc test_gpu_gemm test_gpu_attention test_adversarial bench_eval bench_orchestrator -- -k 0 \
      >"$OUT/build.log" 2>&1; then
    grep -E "error|FAILED" "$OUT/build.log" | head -30
    [[ -x $BUILD/apps/ptxbench && -x $BUILD/evaluator/worker/ptxbench-worker ]] || exit 3
  fi
fi
PTXBENCH="$BUILD/apps/ptxbench"
export PTXBENCH_WORKER="$BUILD/evaluator/worker/ptxbench-worker"

echo "== doctor"
"$PTXBENCH" doctor | tee "$OUT/doctor.log"

if [[ -z ${GPU_CHECK_SKIP_CTEST:-} ]]; then
  echo "== ctest -L gpu ${GPU_CHECK_CTEST_REGEX:+-R $GPU_CHECK_CTEST_REGEX}"
  # -V: the adversarial corpus prints its table (response | expected | got) even when every case passes.
  # solutions_gpu is the evaluation step below (the same script); it runs here only when that step is off.
  skip_solutions=()
  [[ ${GPU_CHECK_SOLUTIONS:-} != none ]] && skip_solutions=(-E solutions_gpu)
  (cd "$BUILD" && ctest -L gpu -V ${GPU_CHECK_CTEST_REGEX:+-R "$GPU_CHECK_CTEST_REGEX"} "${skip_solutions[@]}" --output-on-failure \
    --timeout 900) >"$OUT/ctest.log" 2>&1
  grep -E "tests passed|Passed|Failed|SKIPPED|\*\*\*|ERROR|CHECK" "$OUT/ctest.log" | head -40
  # The adversarial corpus table (response | expected | got | seconds | detail) for the summary.
  grep -E "^([0-9]+: )?[a-z0-9_ (),]+ +\| " "$OUT/ctest.log" | sed -E 's/^[0-9]+: //' >"$OUT/adversarial_table.txt" || true
fi

if [[ ${GPU_CHECK_SOLUTIONS:-} != none ]]; then
  echo "== evaluations (tests/solutions_check.py --gpu: every verdict against its folder's expected.json)"
  read -ra globs <<<"${GPU_CHECK_SOLUTIONS:-*/*}"  # split on spaces without expanding here
  python3 "$ROOT/tests/solutions_check.py" "$PTXBENCH" --gpu --solutions "${globs[@]}" --out "$OUT/verdicts" \
    >"$OUT/verdict_table.txt" 2>&1
  echo "solutions_check exit $?" >>"$OUT/verdict_table.txt"
  cat "$OUT/verdict_table.txt"
fi

if [[ -n ${GPU_CHECK_BENCH:-} ]]; then
  echo "== bench_eval (median of 5 full evaluations per case)"
  mkdir -p "$OUT/bench"
  : >"$OUT/bench_eval.log"
  for c in gemm_n7168_k5120/wgmma_tma gemm_n7168_k5120/probe_guard_oob mha_fwd_d128/wgmma_tma mha_fwd_d128/flash_fwd \
      mha_fwd_d128/probe_lse_log2 mha_bwd_d128/wgmma ${GPU_CHECK_BENCH_EXTRA:-}; do
    [[ -f $ROOT/tasks/solutions/$c/response.md ]] || continue
    if [[ -n ${GPU_CHECK_BENCH_BEFORE:-} ]]; then
      "$BUILD/bench/bench_eval" --task "${c%%/*}" --runs 5 --tasks-dir "$ROOT/tasks" --min-seconds 0.5 \
        --no-reuse-inputs --paired-min-samples 0 --no-prestart-cupti --wait-for-exit \
        --response "$ROOT/tasks/solutions/$c/response.md" \
        >"$OUT/bench/bench_eval.${c/\//.}.before.log" 2>&1
      tail -1 "$OUT/bench/bench_eval.${c/\//.}.before.log" >>"$OUT/bench_eval.log"
    fi
    "$BUILD/bench/bench_eval" --task "${c%%/*}" --runs 5 --tasks-dir "$ROOT/tasks" \
      --response "$ROOT/tasks/solutions/$c/response.md" >"$OUT/bench/bench_eval.${c/\//.}.log" 2>&1
    tail -1 "$OUT/bench/bench_eval.${c/\//.}.log" >>"$OUT/bench_eval.log"
  done
  # One line per case: median wall, status, the median run's stages (s), speedup repeatability, resend.
  python3 - "$OUT/bench_eval.log" <<'PY' | tee "$OUT/bench_eval_table.txt"
import json, sys
print(f"{'case':40} {'policy':6} {'median s':>8} {'gpu s':>6} {'status':10} {'compile':>7} {'correct':>7} "
      f"{'timing':>7} {'sampl':>6} {'inputs':>6} {'libsel':>6} {'exec':>6} {'outside':>7} {'speedup':>8} "
      f"{'range':>6} {'resend s':>8}")
for line in open(sys.argv[1]):
    try:
        d = json.loads(line)
    except ValueError:
        continue
    st = d["profile"]["stages"]
    ph = st["timing"].get("phases", {})
    gpu = d["profile"].get("gpu_stage", {})
    outside = d["profile"]["wall_s"] - sum(v["s"] for v in st.values())
    name = d["task"] + "/" + d["response"].split("/")[-2]
    policy = "before" if not d.get("timing_policy", {}).get("reuse_correctness_inputs", True) else "after"
    print(f"{name:40} {policy:6} {d['median_wall_s']:8.3f} {gpu.get('worker_run_seconds', 0):6.3f} "
          f"{d['status']:10} {st['compile']['s']:7.3f} {st['correctness']['s']:7.3f} {st['timing']['s']:7.3f} "
          f"{ph.get('sampling', 0):6.3f} {ph.get('inputs', 0):6.3f} {ph.get('library_selection', 0):6.3f} "
          f"{st['execution']['s']:6.3f} {outside:7.3f} {d['speedup_median']:8.4f} "
          f"{d['speedup_rel_range']:6.4f} {d['resend_s']:8.4f}")
PY
  if [[ ${GPU_CHECK_BENCH_FIDELITY:-1} != 0 ]]; then
  echo "== fidelity: our cuBLASLt vs torch.matmul (do_bench)"
  for t in gemm_n7168_k5120 gemm_n4096_k4096; do
    v="$OUT/verdicts/$t.wgmma_tma.json"
    [[ -f $v ]] && python3 "$ROOT/bench/fidelity_gemm.py" --verdict "$v" --task "$ROOT/tasks/$t.json" \
      | tee -a "$OUT/fidelity.log"
  done
  # The same comparison with back-to-back timing (cooldown ratio 0): the card ends up under its power cap
  # (H200: 1590 MHz after timing), though less deep than in do_bench's 300 ms; README "On a GPU machine".
  mkdir -p "$OUT/bench"
  v="$OUT/bench/gemm_n7168_k5120.wgmma_tma.back_to_back.json"
  "$PTXBENCH" eval --task gemm_n7168_k5120 --json --cooldown-ratio 0 --tasks-dir "$ROOT/tasks" \
    --response "$ROOT/tasks/solutions/gemm_n7168_k5120/wgmma_tma/response.md" >"$v" 2>"$OUT/bench/back_to_back.err"
  echo "(back to back: ptxbench eval --cooldown-ratio 0)" | tee -a "$OUT/fidelity.log"
  python3 "$ROOT/bench/fidelity_gemm.py" --verdict "$v" --task "$ROOT/tasks/gemm_n7168_k5120.json" \
    | tee -a "$OUT/fidelity.log"
  if [[ -x $BUILD/tests/test_gpu_attention && ${GPU_CHECK_BENCH_ATTENTION:-1} != 0 ]]; then
    echo "== fidelity: our cuDNN SDPA vs torch (cuDNN backend, do_bench)"
    python3 "$ROOT/bench/fidelity_attention.py" --binary "$BUILD/tests/test_gpu_attention" \
      --json "$OUT/fidelity_attention.json" 2>&1 | tee "$OUT/fidelity_attention.log" | tail -8
  fi
  fi
fi

if [[ -n ${GPU_CHECK_PROFILE_COST:-} ]]; then
  echo "== profile cost: bench_eval as shipped, --no-pc-sampling, --no-profile (median of ${GPU_CHECK_PROFILE_COST_RUNS:-5})"
  python3 "$ROOT/bench/profile_cost.py" "$BUILD/bench/bench_eval" --runs "${GPU_CHECK_PROFILE_COST_RUNS:-5}" \
    --gap-s "${GPU_CHECK_PROFILE_COST_GAP_S:-0}" --out "$OUT/profile_cost" --cases ${GPU_CHECK_PROFILE_COST_CASES:-gemm_n4096_k4096/wgmma_tma \
    gemm_n7168_k5120/wgmma_tma gemm_n7168_k5120/mma_sync mha_fwd_d128/flash_fwd} 2>"$OUT/profile_cost.progress" \
    | tee "$OUT/profile_cost_table.txt"
fi

if [[ -n ${GPU_CHECK_NCU:-} ]]; then
  echo "== profile vs ncu --metrics (same kernel, same shape; verdicts reused from the evaluations above)"
  python3 "$ROOT/bench/profile_vs_ncu.py" "$PTXBENCH" --worker "$PTXBENCH_WORKER" --verdicts "$OUT/verdicts" \
    --out "$OUT/ncu" --cases ${GPU_CHECK_NCU_CASES:-gemm_n7168_k5120/simple gemm_n7168_k5120/mma_sync \
    gemm_n7168_k5120/wgmma_tma mha_fwd_d128/flash_fwd mha_fwd_d128/wgmma_tma mha_bwd_d128/wgmma} \
    2>"$OUT/ncu.progress" | tee "$OUT/ncu_table.txt"
fi

if [[ -n ${GPU_CHECK_BORDERLINE:-} ]]; then
  echo "== borderline kernel: ${GPU_CHECK_BORDERLINE_REPEATS:-10} evaluations with one run seed, then drawn seeds"
  python3 "$ROOT/bench/borderline_repeat.py" "$PTXBENCH" --task gemm_n4096_k4096 \
    --response "$ROOT/tests/adversarial/borderline_truncated_store/response.md" \
    --repeats "${GPU_CHECK_BORDERLINE_REPEATS:-10}" --fresh-seeds "${GPU_CHECK_BORDERLINE_FRESH:-3}" \
    --out "$OUT/borderline" 2>"$OUT/borderline.progress" | tee "$OUT/borderline_table.txt"
fi

if [[ -n ${GPU_CHECK_REPAIRS_DEMO:-} ]]; then
  echo "== repairs demo (student run, teacher repairs, card, report; GPU stages on)"
  bash "$ROOT/scripts/repairs_demo.sh" "$BUILD" "$OUT/repairs_demo" >"$OUT/repairs_demo.log" 2>&1
  echo "repairs_demo exit $?" >>"$OUT/repairs_demo.log"
  tail -n 30 "$OUT/repairs_demo.log"
fi

if [[ -n ${GPU_CHECK_REPORT_DEMO:-} ]]; then
  echo "== report demo (3 models x 5 core tasks x 4 samples x 4 turns, GPU stages on)"
  PTXBENCH_BUILD_DIR=$BUILD PTXBENCH_DEMO_GPU=1 bash "$ROOT/bench/report_demo.sh" "$OUT/report_demo" \
    >"$OUT/report_demo.log" 2>&1
  echo "report_demo exit $?" >>"$OUT/report_demo.log"
  tail -n 8 "$OUT/report_demo.log"
fi

# tests/fake_openai_server.py in the background, logging into DIR: sets $server (its pid) and $port.
start_fake_server() {
  mkdir -p "$1"
  python3 "$ROOT/tests/fake_openai_server.py" --log "$1/server.log" >"$1/server.port" &
  server=$!
  for _ in $(seq 50); do [[ -s $1/server.port ]] && break; sleep 0.1; done
  port=$(head -n1 "$1/server.port")
}

if [[ -n ${GPU_CHECK_LOOP:-} ]]; then
  echo "== loop: bench_orchestrator --gpu against the fake server (baseline, then as shipped)"
  start_fake_server "$OUT/loop"
  tasks=${GPU_CHECK_LOOP_TASKS:-gemm_n7168_k5120,mha_fwd_d128,mha_fwd_d128_causal,mha_bwd_d128,mha_bwd_d128_causal}
  for mode in ${GPU_CHECK_LOOP_MODES:-baseline shipped}; do
    rm -rf "$OUT/loop/$mode"
    timeout -k 120 "${GPU_CHECK_LOOP_LIMIT:-600}" "$BUILD/bench/bench_orchestrator" --gpu --model demo-60 \
      --base-url "http://127.0.0.1:$port/v1" --tasks "$tasks" --samples "${GPU_CHECK_LOOP_SAMPLES:-4}" \
      --turns "${GPU_CHECK_LOOP_TURNS:-4}" --out "$OUT/loop/$mode" $([[ $mode == baseline ]] && echo --baseline) \
      >"$OUT/loop/$mode.log" 2>"$OUT/loop/$mode.progress"
    echo "$mode exit $? (124: stopped at GPU_CHECK_LOOP_LIMIT, figures so far; last progress: $(tail -n1 "$OUT/loop/$mode.progress"))" \
      >>"$OUT/loop/$mode.log"
  done
  kill "$server" 2>/dev/null
  for mode in ${GPU_CHECK_LOOP_MODES:-baseline shipped}; do cat "$OUT/loop/$mode.log"; done >"$OUT/loop_table.txt"
  cat "$OUT/loop_table.txt"
fi

if [[ -n ${GPU_CHECK_MIX:-} ]]; then
  echo "== realistic mix: bench_orchestrator --gpu --model mix --no-reuse against the fake server"
  start_fake_server "$OUT/mix"
  timeout -k 120 "${GPU_CHECK_MIX_LIMIT:-420}" "$BUILD/bench/bench_orchestrator" --gpu --model mix --no-reuse \
    --base-url "http://127.0.0.1:$port/v1" \
    --tasks gemm_n7168_k5120,mha_fwd_d128,mha_fwd_d128_causal,mha_bwd_d128,mha_bwd_d128_causal \
    --samples "${GPU_CHECK_MIX_SAMPLES:-4}" --turns "${GPU_CHECK_MIX_TURNS:-3}" --out "$OUT/mix/run" \
    >"$OUT/mix_table.txt" 2>"$OUT/mix/progress"
  echo "mix exit $? (124: stopped at GPU_CHECK_MIX_LIMIT, figures so far)" >>"$OUT/mix_table.txt"
  kill "$server" 2>/dev/null
  cat "$OUT/mix_table.txt"
fi

echo
echo "================ summary ($OUT)"
[[ -f $OUT/verdict_table.txt ]] && cat "$OUT/verdict_table.txt"
[[ -s $OUT/adversarial_table.txt ]] && { echo; cat "$OUT/adversarial_table.txt"; }
[[ -f $OUT/ctest.log ]] && { echo; grep -E "tests passed|tests failed|\(Failed\)|Not Run|Skipped" "$OUT/ctest.log"; }
[[ -f $OUT/bench_eval_table.txt ]] && { echo; cat "$OUT/bench_eval_table.txt"; }
[[ -f $OUT/fidelity.log ]] && { echo; grep -v '^{' "$OUT/fidelity.log"; }
[[ -f $OUT/mix_table.txt ]] && { echo; cat "$OUT/mix_table.txt"; }
[[ -f $OUT/fidelity_attention.log ]] && { echo; tail -6 "$OUT/fidelity_attention.log"; }
[[ -f $OUT/repairs_demo.log ]] && { echo; tail -n 12 "$OUT/repairs_demo.log"; }
[[ -f $OUT/report_demo.log ]] && { echo; tail -n 8 "$OUT/report_demo.log"; }
[[ -f $OUT/loop_table.txt ]] && { echo; cat "$OUT/loop_table.txt"; }
exit 0
