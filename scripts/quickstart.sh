#!/usr/bin/env bash
# README command 1: install what is missing, build, and run the main job on
# the embedded default (scripted model, built-in tasks). Extra arguments go
# to `ptxbench run` (e.g. --config my_run.json).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bash "$root/scripts/install_deps.sh"
bash "$root/scripts/build.sh"
exec "${PTXBENCH_BUILD_DIR:-$root/build}/apps/ptxbench" run "$@"
