#!/usr/bin/env bash
# Configures and builds PTXBench into ${PTXBENCH_BUILD_DIR:-build} (Release).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${PTXBENCH_BUILD_DIR:-$root/build}
jobs=${PTXBENCH_JOBS:-$(nproc)}
extra=()
[ "${CI:-}" = true ] && extra+=(-DPTXBENCH_WERROR=ON)
# ccache with paths relative to the checkout, so a fresh clone elsewhere reuses earlier objects.
export CCACHE_BASEDIR="$root"
command -v ccache >/dev/null && extra+=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
if [ ! -f "$build/build.ninja" ]; then
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
        -DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc "${extra[@]}" ${PTXBENCH_CMAKE_ARGS:-}
fi
cmake --build "$build" -j "$jobs"
