#!/usr/bin/env bash
# Regenerates the fixture responses of tests/test_gpu_gemm.cpp from gemm_fixtures.cu
# (nvcc -ptx for sm_90a). Run from anywhere; needs nvcc.
set -euo pipefail
cd "$(dirname "$0")"
NVCC=${NVCC:-/usr/local/cuda/bin/nvcc}
manifest() {  # $1 = block x, $2 = block y
  cat <<JSON
{
  "entry": "gemm_fixture",
  "grid": ["ceil_div(N, $1)", "ceil_div(M, $2)", 1],
  "block": [$1, $2, 1],
  "cluster": [1, 1, 1],
  "shared_bytes": "0",
  "params": [{"tensor": "C"}, {"tensor": "A"}, {"tensor": "B"}, {"scalar": "M"}, {"scalar": "N"}, {"scalar": "K"}]
}
JSON
}
emit() {  # $1 = name, $2 = define, $3 $4 = block
  local ptx
  ptx=$("$NVCC" -ptx -gencode=arch=compute_90a,code=sm_90a -O3 ${2:+-D$2} gemm_fixtures.cu -o -)
  {
    echo "Fixture '$1' (tests/data/gpu/gemm_fixtures.cu${2:+, -D$2})."
    echo
    echo '```ptx'
    echo "$ptx"
    echo '```'
    echo
    echo '```json'
    manifest "$3" "$4"
    echo '```'
  } > "$1.response.md"
}
emit naive_ok "" 16 16
emit wrong_column VARIANT_WRONG 16 16
emit launch_error VARIANT_REGS 32 32
emit endless_loop VARIANT_HANG 16 16
emit dead_branch VARIANT_DEAD 16 16
