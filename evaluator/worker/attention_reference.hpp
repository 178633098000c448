// Our own float32 reference for attention (the values candidates are judged
// against; cuDNN only sets the speed). Inputs bf16 [B, H, S, D], D contiguous;
// LSE fp32 [B, H, S]; every product and sum in fp32, exp/log in full precision
// (no fast-math). Conventions as in cudnn_sdpa.hpp: scores s_ij = scale·q_i·k_j,
// top-left causal mask, LSE = natural-log log-sum-exp of the scaled scores.
//
// Cost: forward 4·S²·D FLOP per head, backward about 14·S²·D (scores and dP are
// recomputed in two passes, so no atomics and bit-reproducible results). At the
// core shape (B=4, H=48, S=4096, D=128) that is ~1.6e12 / ~5.8e12 FLOP, well under
// a second each on an H200, so callers normally compute every head. `heads`
// restricts the work to a subset of (b·H + h) heads (larger shapes, tests); the
// other heads' outputs are left untouched.
#pragma once

#include <cstdint>
#include <vector>

#include <cuda_runtime_api.h>

namespace ptxbench::worker::attention_reference {

struct Problem {
  std::int64_t batch = 0;     ///< B
  std::int64_t heads = 0;     ///< H
  std::int64_t seq_len = 0;   ///< S
  std::int64_t head_dim = 0;  ///< D: 64, 128 or 256
  float softmax_scale = 0;    ///< multiplies Q·Kᵀ
  bool causal = false;        ///< top-left causal mask
};

/// Largest subset `heads` may name (larger subsets: pass {} and compute all).
inline constexpr int kMaxHeadSubset = 256;

/// "" if the reference supports the problem, else why not.
const char *unsupported_reason(const Problem &problem);

/// O and LSE. `o_f32` and/or `o_bf16` (either may be null) receive O; `lse` may be null.
/// `heads`: flat b·H + h indices to compute ({} = all).
void forward(const void *q, const void *k, const void *v, float *o_f32, void *o_bf16, float *lse,
             const Problem &problem, const std::vector<int> &heads, cudaStream_t stream);

/// dQ, dK, dV (fp32) from Q, K, V, O, dO (bf16) and LSE (fp32), with O and LSE as given
/// (Delta_i = Σ_d dO_id·O_id, P_ij = exp(s_ij - LSE_i)).
void backward(const void *q, const void *k, const void *v, const void *o, const void *d_o, const float *lse,
              float *dq, float *dk, float *dv, const Problem &problem, const std::vector<int> &heads,
              cudaStream_t stream);

}  // namespace ptxbench::worker::attention_reference
