#!/usr/bin/env bash
# Configures and builds PTXBench into ${PTXBENCH_BUILD_DIR:-build} (Release).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${PTXBENCH_BUILD_DIR:-$root/build}
jobs=${PTXBENCH_JOBS:-$(nproc)}
preset=release
[ "${CI:-}" = true ] && preset=ci  # warnings as errors
extra=()
# ccache with paths relative to the checkout, so a fresh clone elsewhere reuses earlier objects.
export CCACHE_BASEDIR="$root"
command -v ccache >/dev/null && extra+=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
if [ ! -f "$build/build.ninja" ]; then
  (cd "$root" && cmake --preset "$preset" -B "$build" "${extra[@]}" ${PTXBENCH_CMAKE_ARGS:-})
fi
cmake --build "$build" -j "$jobs"
