#!/usr/bin/env bash
# Repair-conditioned training data end to end against the repo's fake OpenAI server: a weak student
# (demo-P) on the core tasks, then `ptxbench repairs` with a fake teacher that fixes some failure
# categories and not others, then the repair-pairs export (its card printed) and the report. GPU stages
# run where a GPU is usable (with none, no repair can be verified and the card says so).
#
#   scripts/repairs_demo.sh [BUILD_DIR] [OUT_DIR]
#
# Sizes (environment): TASKS (core), STUDENT_SKILL (25: the demo model's P), STUDENT_SAMPLES (2),
# STUDENT_TURNS (2), MAX_SEEDS (8), CAP_PER_CATEGORY (4), CAP_PER_TASK (2), SEED (1), TEACHER_SAMPLES (1),
# TEACHER_TURNS (2), TEACHER_FIXES (compile_error+no_kernel+targets_not_executed),
# TEACHER_REASONING (server: the server returns reasoning | synthesized: it does not, and ptxbench asks
# for an explanation of each verified repair), TIMING_MAX_SECONDS (2: caps each timed measurement).
# With the defaults: at most 20 student and 16 teacher verdicts, a few minutes of GPU time on an H200.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
out=${2:-$(mktemp -d)}
ptxbench="$build/apps/ptxbench"
[ -x "$ptxbench" ] || { echo "no $ptxbench: build first (scripts/build.sh)" >&2; exit 3; }
tasks=${TASKS:-core}
skill=${STUDENT_SKILL:-25}
fixes=${TEACHER_FIXES:-compile_error+no_kernel+targets_not_executed}
reasoning=${TEACHER_REASONING:-server}
timing_max=${TIMING_MAX_SECONDS:-2}
mkdir -p "$out"
rm -rf "$out/student" "$out/repairs" "$out/report" "$out/repair_pairs.jsonl" "$out/repair_pairs.card.md"
coproc SERVER { exec python3 "$root/tests/fake_openai_server.py" --log "$out/server.log"; }
trap 'kill "$SERVER_PID" 2>/dev/null || true' EXIT
read -r port <&"${SERVER[0]}"
tasks_json=$(python3 -c 'import json,sys; print(json.dumps(sys.argv[1].split(",")))' "$tasks")
evaluator="{\"timing\": {\"max_seconds\": $timing_max}}"

cat >"$out/student.json" <<JSON
{
  "endpoints": [{"name": "student", "base_url": "http://127.0.0.1:$port/v1", "model": "demo-$skill"}],
  "tasks": $tasks_json,
  "samples": ${STUDENT_SAMPLES:-2},
  "turns": ${STUDENT_TURNS:-2},
  "concurrency": {"requests_per_endpoint": 4},
  "evaluator": $evaluator
}
JSON
teacher_model="teacher.$fixes"
synthesize=()
if [ "$reasoning" = synthesized ]; then
  teacher_model="teacher-plain.$fixes"
  synthesize=(--synthesize-reasoning)
fi
cat >"$out/teacher.json" <<JSON
{
  "endpoints": [{"name": "teacher", "base_url": "http://127.0.0.1:$port/v1", "model": "$teacher_model"}],
  "prices": {"teacher": {"prompt_usd_per_mtok": 3.0, "completion_usd_per_mtok": 15.0}},
  "concurrency": {"requests_per_endpoint": 4},
  "evaluator": $evaluator
}
JSON

start=$(date +%s)
echo "== student run ($tasks, demo-$skill)"
"$ptxbench" run --config "$out/student.json" --out "$out/student" --progress lines || [ $? -eq 4 ]
echo
echo "== ptxbench repairs (teacher fixes: $fixes; reasoning: $reasoning)"
"$ptxbench" repairs --from "$out/student" --teacher "$out/teacher.json" --samples "${TEACHER_SAMPLES:-1}" \
  --turns "${TEACHER_TURNS:-2}" --max-seeds "${MAX_SEEDS:-8}" --cap-per-category "${CAP_PER_CATEGORY:-4}" \
  --cap-per-task "${CAP_PER_TASK:-2}" --seed "${SEED:-1}" "${synthesize[@]}" --out "$out/repairs" \
  --progress lines || [ $? -eq 4 ]
echo
echo "== export --format repair-pairs (the dataset card)"
"$ptxbench" export "$out/repairs" --format repair-pairs --out "$out/repair_pairs.jsonl"
echo
echo "== report"
"$ptxbench" report "$out/repairs" --out "$out/report"
sed -n '/^## Repairs/,/^## Trajectories/p' "$out/report/report.md" | sed '$d'
echo
echo "wall: $(( $(date +%s) - start )) s"
echo "student: $out/student   repairs: $out/repairs   pairs: $out/repair_pairs.jsonl   report: $out/report/report.md"
