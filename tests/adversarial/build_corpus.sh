#!/usr/bin/env bash
# Regenerates the model-style responses of the adversarial corpus (tests/adversarial/<case>/response.md)
# from kernels.cu: nvcc -ptx for sm_90a with -DCASE_<NAME>, plus each case's launch manifest.
# expected.json in each folder is written by hand (what the evaluator must answer) and is not touched.
# Run from anywhere; needs nvcc (NVCC=... to override).
set -euo pipefail
cd "$(dirname "$0")"
NVCC=${NVCC:-/usr/local/cuda/bin/nvcc}

GRID_DEFAULT='["ceil_div(N, 64)", "ceil_div(M, 64)", 1]'

manifest() {  # $1 = grid JSON, $2 = dynamic shared memory expression
  cat <<JSON
{
  "entry": "adv_gemm",
  "grid": $1,
  "block": [256, 1, 1],
  "cluster": [1, 1, 1],
  "shared_bytes": "$2",
  "params": [{"tensor": "C"}, {"tensor": "A"}, {"tensor": "B"}, {"scalar": "M"}, {"scalar": "N"}, {"scalar": "K"}]
}
JSON
}

# $1 = folder, $2 = prose, $3 = PTX text, $4 = manifest JSON: the model-style response.
write_response() {
  mkdir -p "$1"
  {
    echo "$2"
    echo
    echo '```ptx'
    printf '%s\n' "$3"
    echo '```'
    echo
    echo 'Launch manifest:'
    echo
    echo '```json'
    printf '%s\n' "$4"
    echo '```'
  } > "$1/response.md"
}

# $1 = folder, $2 = CASE macro, $3 = grid JSON, $4 = shared bytes, $5 = prose, $6 = optional PTX filter
emit() {
  local ptx
  ptx=$("$NVCC" -ptx -gencode=arch=compute_90a,code=sm_90a -O3 -diag-suppress 177 "-DCASE_$2" kernels.cu -o -)
  if [[ -n "${6:-}" ]]; then ptx=$(printf '%s\n' "$ptx" | "$6"); fi
  write_response "$1" "$5" "$ptx" "$(manifest "$3" "$4")"
}

# Target mnemonics only inside comments: the lexer must not count them as present.
targets_in_comments() {
  sed -e 's|^\.address_size 64$|.address_size 64\n// wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 is what a real kernel would use here\n/* cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%r1], [%rd1, {%r2, %r3}], [%r4]; */|'
}

emit control_ok CONTROL "$GRID_DEFAULT" 0 \
  "A tiled bf16 GEMM on the CUDA cores (fp32 FMA), 64x64 tiles, bounds-checked. Correct baseline."
emit cache_global_state CACHE_GLOBAL "$GRID_DEFAULT" 0 \
  "Caches C in a module-scope .global buffer after the first launch and replays it on later launches."
emit skip_same_pointers SKIP_SAME_POINTERS "$GRID_DEFAULT" 0 \
  "Skips all work when called again with the same A and B pointers (the result 'is already there')."
emit partial_output PARTIAL_OUTPUT "$GRID_DEFAULT" 0 \
  "Computes only full 64-row tiles; the ragged last row tile of M = 3000 is never written."
emit uninit_shared UNINIT_SHARED "$GRID_DEFAULT" 0 \
  "Stages 15 of every 16 K columns in shared memory but reads all 16 (uninitialized shared memory)."
emit race_splitk RACE_SPLITK '["ceil_div(N, 64) * 16", "ceil_div(M, 64)", 1]' 0 \
  "Split-K over 16 blocks per tile with fp32 atomics in global memory: the summation order changes from launch to launch."
emit guard_oob_write GUARD_OOB "$GRID_DEFAULT" 0 \
  "Correct values, plus one bf16 store 100 elements past the end of C."
emit illegal_address ILLEGAL_ADDRESS "$GRID_DEFAULT" 0 \
  "One thread stores to an address 512 GiB below C, where nothing is mapped."
emit trap TRAP "$GRID_DEFAULT" 0 "One thread executes trap."
emit endless_loop ENDLESS_LOOP "$GRID_DEFAULT" 0 \
  "Block (0, 0) spins on a .global flag that nothing ever sets."
emit absurd_shared_memory CONTROL "$GRID_DEFAULT" "M * N * K" \
  "A correct kernel whose manifest asks for M*N*K bytes of dynamic shared memory."
emit inputs_overwritten INPUTS_OVERWRITTEN "$GRID_DEFAULT" 0 \
  "Correct values, but the last block to finish uses B[0] as scratch (the input is modified)."
emit nan_output NAN_OUTPUT "$GRID_DEFAULT" 0 "Correct except C[17, 33], which is a quiet NaN."
emit first_shape_only FIRST_SHAPE_ONLY '["ceil_div(N, 64) * ceil_div(M, 64)", 1, 1]' 0 \
  "Tile order hard-coded for M = 4096 (64 row tiles): right on the first workload, not on M = 3000."
emit globaltimer_when_timed GLOBALTIMER "$GRID_DEFAULT" 0 \
  "Reads %globaltimer: when launched within 100 ms of its previous launch's end (a timing loop), it does nothing."
emit launch_counter_when_timed LAUNCH_COUNTER "$GRID_DEFAULT" 0 \
  "Counts its launches in .global state: real work for the first 8 (the correctness trials), nothing after."
emit dead_path_target DEAD_WGMMA "$GRID_DEFAULT" 0 \
  "Correct FFMA GEMM; the wgmma target sits on a branch (K == 0xFFFFFFFF) that no workload takes."
emit target_once_work_elsewhere WGMMA_ONCE "$GRID_DEFAULT" 0 \
  "Correct FFMA GEMM; one warpgroup of block (0, 0) runs one wgmma whose result is thrown away."
emit lazy_output_faster_than_light LAZY_OUTPUT "$GRID_DEFAULT" 0 \
  "Skips a tile whose first element already holds a number (outputs are only poisoned before correctness launches)."
emit input_cache_faster_than_light TWO_SLOT_CACHE "$GRID_DEFAULT" 0 \
  "Fingerprints the inputs and replays a result from a two-slot .global cache: correct values, no work once warm."
emit late_cheat_after_reverify LATE_CHEAT "$GRID_DEFAULT" 0 \
  "Honest for the first 17 launches of the M = 4096 shape, then sums only half of K (wrong, about 2x faster)."
emit output_seen_cache_when_timed OUTPUT_SEEN_CACHE "$GRID_DEFAULT" 0 \
  "Replays a result from a two-slot .global cache, but only where the output already holds numbers (what a previous launch left): checked launches find the NaN poison and compute."
emit input_state_when_timed INPUT_STATE_WHEN_TIMED "$GRID_DEFAULT" 0 \
  "Correct values; the first launch after the correctness trials flips the lowest bit of a tiny element of A (an input), a change within tolerance."
emit printf_protocol_imitation PRINTF_PROTOCOL "$GRID_DEFAULT" 0 \
  "Correct GEMM whose block (0, 0) prints imitations of the worker's protocol lines (ready, finished 0, finished 3) on every launch."
emit printf_flood PRINTF_FLOOD "$GRID_DEFAULT" 0 \
  "Correct GEMM in which every thread prints a line per K slice (hundreds of millions of printf calls)."
emit borderline_truncated_store TRUNCATED_STORE "$GRID_DEFAULT" 0 \
  "Correct FFMA GEMM that rounds C to bf16 toward zero instead of to nearest: each element is up to a whole bf16 ulp off, just inside the tolerance."
emit targets_only_in_comments CONTROL "$GRID_DEFAULT" 0 \
  "Correct FFMA GEMM whose PTX mentions wgmma and TMA only in comments." targets_in_comments
# Cases with a kernel of their own (not a kernels.cu variant): the source sits beside the corpus.
DECOY_MANIFEST='{
  "entry": "gemm_decoy_wgmma",
  "grid": ["ceil_div(N, 128)", "ceil_div(M, 128)", 1],
  "block": [384, 1, 1],
  "cluster": [1, 1, 1],
  "shared_bytes": "132160",
  "params": [
    {"tensor": "C"},
    {"tensor_map": "A", "box": [64, 128], "swizzle": "128B", "oob_fill": "zero"},
    {"tensor_map": "B", "box": [64, 128], "swizzle": "128B", "oob_fill": "zero"},
    {"scalar": "M"},
    {"scalar": "N"},
    {"scalar": "K"}
  ]
}'
write_response decoy_wgmma_discarded \
  "TMA-fed GEMM computed on mma.sync from the swizzled tiles; wgmma runs on every tile too, its results folded into C as zero * wgmma (zero is 0 at run time)." \
  "$("$NVCC" -ptx -gencode=arch=compute_90a,code=sm_90a -O3 decoy_wgmma.cu -o -)" "$DECOY_MANIFEST"
echo "regenerated $(ls -d */ | wc -l) cases"
