#!/usr/bin/env bash
# README command 2: install what is missing, build, run every test. GPU tests
# (label gpu) report "skipped" on a machine without a GPU.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
PTXBENCH_WITH_CHROMIUM=1 bash "$root/scripts/install_deps.sh"
bash "$root/scripts/build.sh"
cd "${PTXBENCH_BUILD_DIR:-$root/build}"
ctest --output-on-failure -j "${PTXBENCH_TEST_JOBS:-2}" "$@"
