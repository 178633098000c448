#!/usr/bin/env bash
# Builds and runs the attention reference checks on a GPU machine, then the
# cuDNN-vs-PyTorch fidelity table. Logs go to ${OUT:-./attention-gpu-out}.
#   bench/run_attention_gpu.sh            (from the repository root)
# Without PyPI, the cuDNN frontend headers must be unpacked at
# third_party/cudnn_frontend/include (see cmake/CudnnFrontend.cmake).
# Builds only the target test_gpu_attention (and what it links) in build-attn; a build that fails
# stops the script with the log's tail and exit 1 (there is no hand-made fallback build).
# Exit: the test's status, else the fidelity table's.
set -uo pipefail
out=${OUT:-./attention-gpu-out}
mkdir -p "$out"
build=build-attn
jobs=$(nproc)
fe=()
[ -f third_party/cudnn_frontend/include/cudnn_frontend.h ] && fe=(-DPTXBENCH_CUDNN_FRONTEND_INCLUDE=third_party/cudnn_frontend)

if ! cmake -S . -B $build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc \
     "${fe[@]}" >"$out/cmake.log" 2>&1; then
  echo "configure failed:"
  tail -40 "$out/cmake.log"
  exit 1
fi
if ! cmake --build $build -j"$jobs" --target test_gpu_attention >"$out/build.log" 2>&1; then
  echo "build of test_gpu_attention failed:"
  tail -40 "$out/build.log"
  exit 1
fi
bin=$build/tests/test_gpu_attention

"$bin" 2>&1 | tee "$out/test.log" | tail -40
test_rc=${PIPESTATUS[0]}
echo "test rc=$test_rc"
PYTHONUNBUFFERED=1 python3 bench/fidelity_attention.py --binary "$bin" --json "$out/fidelity.json" 2>&1 |
  tee "$out/fidelity.log"
fidelity_rc=${PIPESTATUS[0]}
[ "$test_rc" -ne 0 ] && exit "$test_rc"
exit "$fidelity_rc"
