#!/usr/bin/env bash
# A prompt-variant experiment end to end against the repo's fake OpenAI server: 2 models x 3 variants
# (different knowledge packs and history policies) x 2 GEMM tasks x 2 samples x 3 turns, then the report.
# GPU stages run where a GPU is usable, else they are reported skipped.
#
#   scripts/variants_demo.sh [BUILD_DIR] [OUT_DIR]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
out=${2:-$(mktemp -d)}
ptxbench="$build/apps/ptxbench"
[ -x "$ptxbench" ] || { echo "no $ptxbench: build first (scripts/build.sh)" >&2; exit 3; }
mkdir -p "$out"
log="$out/server.log"
coproc SERVER { exec python3 "$root/tests/fake_openai_server.py" --log "$log"; }
trap 'kill "$SERVER_PID" 2>/dev/null || true' EXIT
read -r port <&"${SERVER[0]}"
cat >"$out/variants_run.json" <<JSON
{
  "endpoints": [
    {"name": "model-a", "base_url": "http://127.0.0.1:$port/v1", "model": "repair#a"},
    {"name": "model-b", "base_url": "http://127.0.0.1:$port/v1", "model": "repair#b", "stream": false}
  ],
  "tasks": ["gemm_n7168_k5120", "gemm_n4096_k4096"],
  "samples": 2,
  "turns": 3,
  "stop": null,
  "variants": [
    {"name": "notes-full", "history": "full"},
    {"name": "packs-last", "packs": ["ptx-hopper", "patterns", "debugging"], "history": "last_attempt"},
    {"name": "bare-none", "target_notes": false, "history": "none"}
  ],
  "concurrency": {"requests_per_endpoint": 4}
}
JSON
"$ptxbench" run --config "$out/variants_run.json" --out "$out/run" --progress lines
"$ptxbench" report "$out/run" --out "$out/report"
echo
echo "run: $out/run   report: $out/report/report.md"
