// cuDNN scaled-dot-product attention (forward with statistics, backward) as
// the speed reference for the attention tasks, behind a plain-pointer API.
//
// Layout: Q, K, V, O, dO, dQ, dK, dV are bf16 [B, H, S, D] with D contiguous;
// LSE is fp32 [B, H, S] holding the natural-log log-sum-exp of each row of the
// scaled scores: LSE[i] = max_j s_ij + ln Σ_j exp(s_ij - max_j s_ij), with
// s_ij = softmax_scale · q_i·k_j (cuDNN's "Stats" output is exactly this; the
// GPU test checks it against our reference). Causal = top-left aligned mask
// (key j visible to query i iff j <= i).
//
// Graphs are built through the cuDNN frontend graph API (sdpa /
// sdpa_backward), once per (direction, shape, scale, causal); every execution
// plan the heuristics offer is built and timed on the caller's buffers and the
// fastest is kept (the first call for a shape therefore launches many times).
// The frontend lives entirely in cudnn_sdpa.cpp (it compiles slowly).
//
// cuDNN is loaded at run time: the newest libcudnn.so.9 among
// $PTXBENCH_CUDNN_LIBRARY (if set: only that one), the loader's default, the
// build machine's cuDNN folder, $PTXBENCH_CUDNN_SEARCH_DIRS (colon-separated
// folders) and the nvidia-cudnn Python wheels of known virtual environments.
// Failures throw WorkerError with kind "library" (cuDNN missing or refusing the
// shape) or "runtime_error" (a CUDA error).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <cuda_runtime_api.h>
#include <nlohmann/json.hpp>

namespace ptxbench::worker::cudnn_sdpa {

struct Problem {
  std::int64_t batch = 0;     ///< B
  std::int64_t heads = 0;     ///< H
  std::int64_t seq_len = 0;   ///< S (queries and keys)
  std::int64_t head_dim = 0;  ///< D (64, 128 or 256)
  float softmax_scale = 0;    ///< multiplies Q·Kᵀ before the softmax (usually 1/sqrt(D))
  bool causal = false;        ///< top-left causal mask
};

/// The execution plan chosen for one (direction, problem) and how it was chosen.
struct PlanChoice {
  std::string name;                  ///< cuDNN's engine/knob tag of the chosen plan
  std::int64_t index = -1;           ///< its index in the heuristics' list (0 = heuristics' first choice)
  double median_ms = 0;              ///< milliseconds, median of the selection samples
  double heuristic_first_ms = 0;     ///< milliseconds, the heuristics' first plan (same protocol)
  std::int64_t workspace_bytes = 0;  ///< bytes of workspace the chosen plan needs
  int plans_timed = 0;               ///< plans built and timed successfully
  bool from_cache = false;           ///< chosen by an earlier worker (selection cache): only it was built
  nlohmann::json candidates = nlohmann::json::array();  ///< [{index, name, median_ms | error}]
  nlohmann::json to_json() const;
};

struct Versions {
  std::string cudnn;                                    ///< run-time cuDNN, e.g. "9.19.0"
  std::string cudnn_library;                            ///< path of the libcudnn.so.9 loaded
  std::string frontend;                                 ///< frontend headers compiled in, e.g. "1.32.0"
  nlohmann::json candidates = nlohmann::json::array();  ///< every cuDNN found: [{path, version | error}]
};

/// Loads cuDNN if needed (throws WorkerError "library" when none is usable) and says which.
const Versions &versions();

/// O = softmax(scale·Q·Kᵀ [+mask])·V and LSE. Asynchronous on `stream`
/// except the first call per problem, which selects the plan (and synchronizes).
const PlanChoice &forward(const void *q, const void *k, const void *v, void *o, float *lse,
                          const Problem &problem, cudaStream_t stream);

/// dQ, dK, dV from Q, K, V, O, dO and the forward's LSE (same conventions).
const PlanChoice &backward(const void *q, const void *k, const void *v, const void *o, const void *d_o,
                           const float *lse, void *dq, void *dk, void *dv, const Problem &problem,
                           cudaStream_t stream);

/// Loads cuDNN and creates the current device's handle ahead of any job (a pre-started worker);
/// "" when done, else why not (the job then fails or skips as without it).
std::string prewarm();

/// Drops every cached graph and workspace (the handle stays).
void clear_cache();

}  // namespace ptxbench::worker::cudnn_sdpa
