#!/usr/bin/env bash
# Regenerates the SASS listings the redundant-work tests read (tests/test_execution_figures.cpp): ptxas for
# sm_90a and nvdisasm -c -ndf (as the evaluator runs it), with runs of blanks collapsed to keep the files
# small (the listing parser reads either). Needs ptxas and nvdisasm (PTXAS=..., NVDISASM=... to override).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
PTXAS=${PTXAS:-/usr/local/cuda/bin/ptxas}
NVDISASM=${NVDISASM:-$(command -v nvdisasm || true)}
[[ -x "$NVDISASM" ]] || { echo "no nvdisasm: set NVDISASM" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

listing() {  # $1 = output name, $2 = PTX file
  "$PTXAS" -arch=sm_90a "$2" -o "$tmp/k.cubin"
  "$NVDISASM" -c -ndf "$tmp/k.cubin" | sed -e 's/^[[:space:]]*//' -e 's/[[:space:]][[:space:]]*/ /g' \
    > "$here/$1.sass"
}

# The adversarial decoy: mma.sync does the GEMM, a discarded wgmma runs beside it.
sed -n '/^```ptx$/,/^```$/p' "$root/tests/adversarial/decoy_wgmma_discarded/response.md" | sed '1d;$d' \
  > "$tmp/decoy.ptx"
listing decoy_wgmma_discarded "$tmp/decoy.ptx"
# Honest ones: attention forward on wgmma alone, Q·Kᵀ on wgmma with P·V on mma.sync, backward on wgmma.
listing mha_fwd_d128_wgmma_tma "$root/tasks/solutions/mha_fwd_d128/wgmma_tma/kernel.ptx"
listing mha_fwd_d128_probe_pv_mma_sync "$root/tasks/solutions/mha_fwd_d128/probe_pv_mma_sync/kernel.ptx"
listing mha_bwd_d128_wgmma "$root/tasks/solutions/mha_bwd_d128/wgmma/kernel.ptx"
