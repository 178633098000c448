#!/usr/bin/env bash
# The report demo: 3 models x 5 core tasks x 4 samples x up to 4 turns against the repo's fake
# OpenAI-compatible server (tests/fake_openai_server.py, behaviour demo-<skill>: answers with the
# reference solutions under tasks/solutions, probes that are wrong on purpose, PTX that does not
# compile, or no kernel), then `ptxbench report` with intervals, costs, the model comparison and the
# trajectory pages, and `ptxbench report --compare` of the strongest and weakest model.
#
#   bench/report_demo.sh [OUT_DIR]        (default: report_demo under the current directory)
#
# Environment: PTXBENCH_BUILD_DIR (default build/), PTXBENCH_DEMO_GPU=0|1 (default: 1 when nvidia-smi
# lists a GPU; 0 runs the CPU stages only, the GPU axes then read "not measured"), PTXBENCH_DEMO_SAMPLES,
# PTXBENCH_DEMO_TURNS (default 4 and 4).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${PTXBENCH_BUILD_DIR:-$root/build}
ptxbench=$build/apps/ptxbench
out=$(mkdir -p "${1:-report_demo}" && cd "${1:-report_demo}" && pwd)
samples=${PTXBENCH_DEMO_SAMPLES:-4}
turns=${PTXBENCH_DEMO_TURNS:-4}
if [ -z "${PTXBENCH_DEMO_GPU:-}" ]; then
  if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q GPU; then
    PTXBENCH_DEMO_GPU=1
  else
    PTXBENCH_DEMO_GPU=0
  fi
fi
[ -x "$ptxbench" ] || { echo "report_demo: $ptxbench not built (scripts/build.sh)" >&2; exit 3; }

rm -rf "$out/run" "$out/report" "$out/report_strong_vs_weak"
python3 "$root/tests/fake_openai_server.py" --log "$out/server.log" >"$out/server.port" &
server=$!
trap 'kill "$server" 2>/dev/null || true' EXIT
for _ in $(seq 50); do [ -s "$out/server.port" ] && break; sleep 0.1; done
port=$(head -n1 "$out/server.port")
[ -n "$port" ] || { echo "report_demo: the fake server did not start" >&2; exit 3; }

run_gpu=false
[ "$PTXBENCH_DEMO_GPU" = 1 ] && run_gpu=true
cat >"$out/run_config.json" <<JSON
{
  "endpoints": [
    {"name": "strong", "base_url": "http://127.0.0.1:$port/v1", "model": "demo-70#strong", "stream": true},
    {"name": "medium", "base_url": "http://127.0.0.1:$port/v1", "model": "demo-40#medium", "stream": true},
    {"name": "weak", "base_url": "http://127.0.0.1:$port/v1", "model": "demo-15#weak", "stream": false}
  ],
  "prices": {
    "strong": {"prompt_usd_per_mtok": 3.0, "completion_usd_per_mtok": 15.0},
    "medium": {"prompt_usd_per_mtok": 0.5, "completion_usd_per_mtok": 1.5},
    "weak": {"prompt_usd_per_mtok": 0.1, "completion_usd_per_mtok": 0.3}
  },
  "tasks": ["gemm_n7168_k5120", "mha_fwd_d128", "mha_fwd_d128_causal", "mha_bwd_d128", "mha_bwd_d128_causal"],
  "samples": $samples,
  "turns": $turns,
  "history": "full",
  "stop": {"correct": true, "targets_executed": true, "min_speedup": null},
  "concurrency": {"requests_per_endpoint": 8},
  "evaluator": {"run_gpu": $run_gpu}
}
JSON

echo "report_demo: GPU stages $([ "$run_gpu" = true ] && echo on || echo off); server on port $port"
"$ptxbench" run --config "$out/run_config.json" --out "$out/run" --progress lines >"$out/run.log" 2>&1 || {
  echo "report_demo: ptxbench run failed (exit $?); last lines of $out/run.log:" >&2
  tail -n 20 "$out/run.log" >&2
  exit 1
}
tail -n 5 "$out/run.log"
"$ptxbench" report "$out/run" --out "$out/report"
"$ptxbench" report "$out/run" --out "$out/report_strong_vs_weak" --compare strong weak
echo "report_demo: open $out/report/report.html (trajectory pages under $out/report/trajectories/)"
