#!/usr/bin/env bash
# Builds the libFuzzer targets (fuzz/) with clang (ASan + libFuzzer coverage) and runs each one for a
# bounded time on its seed corpus (fuzz/corpus/<name>/) plus the regression inputs (fuzz/regressions/<name>/).
# A crash, leak, escaped exception, slow input (>10 s) or memory blow-up (>2 GiB) is a finding: the script
# exits 1 and prints the reproducer path and the command that replays it.
#
#   scripts/fuzz.sh [--build-only | --run-only] [--skip-without-clang] [SECONDS] [TARGET ...]
#     SECONDS   per target (default 30; the environment's PTXBENCH_FUZZ_SECONDS wins when set)
#     TARGET    fuzz_response fuzz_ptx fuzz_manifest fuzz_run_config fuzz_task (default: all)
#     --build-only          configure + build, run nothing (ctest's fuzz_build fixture)
#     --run-only            run targets already built in BUILD (ctest's fuzz_<target> tests)
#     --skip-without-clang  exit 77 (ctest: skipped) instead of 2 when no clang with libFuzzer is found
# Exit: 0 clean, 1 finding, 2 build or usage error, 77 skipped.
# Env: BUILD (build dir, default build-fuzz), CXX (clang++), JOBS (build jobs, default 2),
#      FUZZ_OPT (optimization, default -O1), CCACHE (1/0; default: 1 when ccache is installed), NVCC, CUDNN_FE_INCLUDE (cudnn_frontend headers,
#      only so the project configures; default third_party/cudnn_frontend/include when present, else the
#      configure step downloads the pinned wheel).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
ALL_TARGETS=(fuzz_response fuzz_ptx fuzz_manifest fuzz_run_config fuzz_task)

mode=all
skip_rc=2
args=()
for a in "$@"; do
  case "$a" in
    --build-only) mode=build ;;
    --run-only) mode=run ;;
    --skip-without-clang) skip_rc=77 ;;
    -h | --help) sed -n '2,17p' "$0"; exit 0 ;;
    -*) echo "fuzz.sh: unknown option $a (see --help)" >&2; exit 2 ;;
    *) args+=("$a") ;;
  esac
done
SECONDS_PER_TARGET=30
if [[ ${#args[@]} -gt 0 && ${args[0]} =~ ^[0-9]+$ ]]; then
  SECONDS_PER_TARGET=${args[0]}
  args=("${args[@]:1}")
fi
SECONDS_PER_TARGET=${PTXBENCH_FUZZ_SECONDS:-$SECONDS_PER_TARGET}
[[ $SECONDS_PER_TARGET =~ ^[0-9]+$ && $SECONDS_PER_TARGET -ge 1 ]] ||
  { echo "fuzz.sh: seconds per target must be a positive integer, got '$SECONDS_PER_TARGET'" >&2; exit 2; }
TARGETS=("${args[@]}")
[[ ${#TARGETS[@]} -gt 0 ]] || TARGETS=("${ALL_TARGETS[@]}")
for t in "${TARGETS[@]}"; do
  [[ " ${ALL_TARGETS[*]} " == *" $t "* ]] ||
    { echo "fuzz.sh: unknown target '$t' (known: ${ALL_TARGETS[*]})" >&2; exit 2; }
done
BUILD=${BUILD:-$ROOT/build-fuzz}
JOBS=${JOBS:-2}
mkdir -p "$BUILD"

# Exits (skip_rc) unless a clang++ that links libFuzzer + ASan is found; sets CXX.
require_libfuzzer_clang() {
  CXX=${CXX:-$(command -v clang++ || ls /usr/bin/clang++-[0-9]* 2>/dev/null | sort -V | tail -1 || true)}
  if [[ -z "$CXX" ]] || ! command -v "$CXX" >/dev/null; then
    echo "fuzz.sh: $([[ $skip_rc == 77 ]] && echo "SKIPPED: ")no clang++ found; the fuzz targets need clang's libFuzzer" \
      "(scripts/install_deps.sh installs the Debian packages clang and libclang-rt-dev)"
    exit "$skip_rc"
  fi
  # clang without its runtime libraries (libclang-rt-*-dev, only "recommended" by Debian) cannot link.
  local probe="$BUILD/libfuzzer-probe"
  if ! printf 'extern "C" int LLVMFuzzerTestOneInput(const unsigned char *, unsigned long) { return 0; }\n' |
      "$CXX" -x c++ -fsanitize=fuzzer,address - -o "$probe" >"$probe.log" 2>&1; then
    echo "fuzz.sh: $([[ $skip_rc == 77 ]] && echo "SKIPPED: ")$CXX cannot link -fsanitize=fuzzer,address (install libclang-rt-dev):"
    tail -3 "$probe.log"
    exit "$skip_rc"
  fi
}

if [[ $mode != run ]]; then
  require_libfuzzer_clang

  [[ -z "${CUDNN_FE_INCLUDE:-}" && -d "$ROOT/third_party/cudnn_frontend/include" ]] &&
    CUDNN_FE_INCLUDE="$ROOT/third_party/cudnn_frontend/include"
  launcher=()
  if [[ "${CCACHE:-auto}" == 1 || ("${CCACHE:-auto}" == auto && -n "$(command -v ccache)") ]]; then
    launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
    # Paths relative to the checkout and no working directory in the hash: a fresh clone (CI) hits the
    # objects of an earlier one. The cost: debug line tables may name the earlier checkout's folder.
    export CCACHE_BASEDIR="$ROOT" CCACHE_NOHASHDIR=1
  fi
  # Line tables only (symbolized stacks) and asserts on; FUZZ_OPT -O1 fuzzes faster, -O0 (CI) compiles in
  # half the time. The project enables CUDA, but no fuzzed source is CUDA code.
  SAN="-fsanitize=fuzzer-no-link,address -fno-omit-frame-pointer"
  OPT=${FUZZ_OPT:--O1}
  start=$(date +%s)
  (cd "$ROOT" && cmake --preset fuzz -B "$BUILD" -DCMAKE_CXX_FLAGS_RELEASE="$OPT -gline-tables-only" \
    -DCMAKE_CXX_COMPILER="$CXX" -DCMAKE_CXX_FLAGS="$SAN" \
    -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address" -DCMAKE_CUDA_COMPILER="${NVCC:-/usr/local/cuda/bin/nvcc}" \
    ${CUDNN_FE_INCLUDE:+-DPTXBENCH_CUDNN_FRONTEND_INCLUDE="$CUDNN_FE_INCLUDE"} "${launcher[@]}") \
    >"$BUILD/configure.log" 2>&1 ||
    { tail -30 "$BUILD/configure.log"; echo "fuzz.sh: configure failed (log: $BUILD/configure.log)"; exit 2; }
  if ! cmake --build "$BUILD" -j"$JOBS" --target "${TARGETS[@]}" >"$BUILD/build.log" 2>&1; then
    grep -E "error|undefined reference" "$BUILD/build.log" | head -30 || tail -30 "$BUILD/build.log"
    echo "fuzz.sh: build failed (log: $BUILD/build.log; an undefined reference usually means a fuzzed" \
      "function moved to a file that fuzz/CMakeLists.txt does not list yet)"
    exit 2
  fi
  echo "fuzz.sh: built ${TARGETS[*]} with $("$CXX" --version | head -1) in $(($(date +%s) - start)) s ($BUILD)"
  [[ $mode == build ]] && exit 0
fi

for t in "${TARGETS[@]}"; do
  if [[ ! -x "$BUILD/fuzz/$t" ]]; then
    require_libfuzzer_clang # no clang explains it: skipped like the build
    echo "fuzz.sh: $BUILD/fuzz/$t is not built (scripts/fuzz.sh --build-only builds it)"
    exit 2
  fi
done
# The CUDA driver library may be needed to load a binary on a machine without a driver: the toolkit's stub
# (never called by the fuzzed code).
if ! ldconfig -p 2>/dev/null | grep -q "libcuda.so.1 "; then
  stub=$(ls "${CUDA_HOME:-/usr/local/cuda}"/lib*/stubs/libcuda.so 2>/dev/null | head -1 || true)
  if [[ -n "$stub" ]]; then
    mkdir -p "$BUILD/cuda-stub"
    ln -sf "$stub" "$BUILD/cuda-stub/libcuda.so.1"
    export LD_LIBRARY_PATH="$BUILD/cuda-stub${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  fi
fi
symbolizer=$(command -v llvm-symbolizer || ls /usr/bin/llvm-symbolizer-[0-9]* 2>/dev/null | sort -V | tail -1 || true)
[[ -n "$symbolizer" ]] && export ASAN_SYMBOLIZER_PATH="$symbolizer"

status=0
for t in "${TARGETS[@]}"; do
  name=${t#fuzz_}
  corpus="$BUILD/corpus/$t" # grows across local runs; the committed seeds stay read-only
  findings="$BUILD/findings/$t"
  log="$BUILD/$t.log"
  mkdir -p "$corpus" "$findings"
  seeds=("$ROOT/fuzz/corpus/$name")
  [[ -d "$ROOT/fuzz/regressions/$name" ]] && seeds+=("$ROOT/fuzz/regressions/$name")
  before=$(ls "$findings" | sort)
  start=$(date +%s)
  if "$BUILD/fuzz/$t" "$corpus" "${seeds[@]}" -max_total_time="$SECONDS_PER_TARGET" -max_len=65536 \
      -timeout=10 -rss_limit_mb=2048 -artifact_prefix="$findings/" -print_final_stats=1 >"$log" 2>&1; then
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
    added=$(sed -n 's/^stat::new_units_added: *//p' "$log")
    echo "$t: clean after $(($(date +%s) - start)) s, ${execs:-?} inputs run, ${added:-?} new corpus units" \
      "(seconds per target: $SECONDS_PER_TARGET)"
  else
    status=1
    echo "!! $t: FINDING after $(($(date +%s) - start)) s (log: $log)"
    { grep -E -A25 "==[0-9]+==ERROR|deadly signal|ALARM|out-of-memory|terminate called|uncaught exception" \
      "$log" || tail -20 "$log"; } | head -40
    new=$(comm -13 <(echo "$before") <(ls "$findings" | sort) || true)
    for f in $new; do
      echo "   reproducer: $findings/$f"
      echo "   replay:     $BUILD/fuzz/$t $findings/$f"
      echo "   then keep it as a regression input: cp $findings/$f $ROOT/fuzz/regressions/$name/<what_it_is>"
    done
    [[ -n "$new" ]] || echo "   (no reproducer written; see the log)"
  fi
done
exit $status
