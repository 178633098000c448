#!/usr/bin/env bash
# Builds the libFuzzer targets (fuzz/) with clang in build-fuzz (ASan + libFuzzer coverage on every
# module) and runs each one for a bounded time on its seed corpus (fuzz/corpus/<target>/, plus the
# regression inputs of fuzz/regressions/<target>/). A crash, leak, escaped exception or timeout of any
# target makes the script exit non-zero; the reproducer is left in build-fuzz/findings/<target>/.
#
#   scripts/fuzz.sh [seconds per target (default 30)] [target ...]
# Env: CXX (clang++), BUILD (build-fuzz), JOBS (build jobs, default 2), CCACHE=1 (use ccache),
#      CUDNN_FE_INCLUDE (cudnn_frontend headers; default: third_party/cudnn_frontend/include when present,
#      else the configure step downloads the pinned wheel; the fuzzed modules do not use them).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-$ROOT/build-fuzz}
SECONDS_PER_TARGET=${1:-30}
shift || true
TARGETS=("$@")
[[ ${#TARGETS[@]} -gt 0 ]] || TARGETS=(fuzz_response fuzz_ptx fuzz_manifest fuzz_run_config fuzz_task)
CXX=${CXX:-$(command -v clang++-14 || command -v clang++)}
JOBS=${JOBS:-2}
[[ -z "${CUDNN_FE_INCLUDE:-}" && -d "$ROOT/third_party/cudnn_frontend/include" ]] &&
  CUDNN_FE_INCLUDE="$ROOT/third_party/cudnn_frontend/include"

SAN="-fsanitize=fuzzer-no-link,address -fno-omit-frame-pointer"
# The CUDA language is enabled project-wide, but none of the fuzzed modules is CUDA code.
mkdir -p "$BUILD"
cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPTXBENCH_FUZZ=ON \
  -DCMAKE_CXX_COMPILER="$CXX" -DCMAKE_CXX_FLAGS="$SAN" -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address" \
  -DCMAKE_CUDA_COMPILER="${NVCC:-/usr/local/cuda/bin/nvcc}" -DBUILD_TESTING=OFF \
  ${CUDNN_FE_INCLUDE:+-DPTXBENCH_CUDNN_FRONTEND_INCLUDE="$CUDNN_FE_INCLUDE"} \
  ${CCACHE:+-DCMAKE_CXX_COMPILER_LAUNCHER=ccache} >"$BUILD/configure.log" 2>&1 ||
  { tail -30 "$BUILD/configure.log"; echo "fuzz.sh: configure failed"; exit 2; }
cmake --build "$BUILD" -j"$JOBS" --target "${TARGETS[@]}"

# The evaluator links the CUDA driver; machines without a driver get the toolkit's stub (never called here).
if ! ldconfig -p 2>/dev/null | grep -q "libcuda.so.1 "; then
  stub=$(ls "${CUDA_HOME:-/usr/local/cuda}"/lib*/stubs/libcuda.so 2>/dev/null | head -1 || true)
  if [[ -n "$stub" ]]; then
    mkdir -p "$BUILD/cuda-stub"
    ln -sf "$stub" "$BUILD/cuda-stub/libcuda.so.1"
    export LD_LIBRARY_PATH="$BUILD/cuda-stub${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  fi
fi

status=0
for t in "${TARGETS[@]}"; do
  corpus="$BUILD/corpus/$t"
  findings="$BUILD/findings/$t"
  mkdir -p "$corpus" "$findings"
  seeds=("$ROOT/fuzz/corpus/${t#fuzz_}")
  [[ -d "$ROOT/fuzz/regressions/${t#fuzz_}" ]] && seeds+=("$ROOT/fuzz/regressions/${t#fuzz_}")
  echo "== $t: ${SECONDS_PER_TARGET}s"
  # -rss_limit_mb / -timeout: a slow or memory-hungry input is a finding too (inputs are bounded by -max_len).
  if ! "$BUILD/fuzz/$t" "$corpus" "${seeds[@]}" -max_total_time="$SECONDS_PER_TARGET" -max_len=65536 \
      -timeout=10 -rss_limit_mb=2048 -artifact_prefix="$findings/" -print_final_stats=1 \
      >"$BUILD/$t.log" 2>&1; then
    echo "!! $t found a problem (reproducer in $findings/):"
    grep -E "ERROR|SUMMARY|==[0-9]+==|terminate|Test unit written" "$BUILD/$t.log" | head -20 || tail -5 "$BUILD/$t.log"
    status=1
  else
    grep -E "stat::number_of_executed_units|stat::new_units_added" "$BUILD/$t.log" | tr '\n' ' ' || true
    echo
  fi
done
exit $status
