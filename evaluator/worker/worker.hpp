// The GPU worker's entry points (ptxbench-worker).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "evaluator/protocol/result.hpp"

namespace ptxbench::worker {

/// Exit codes: protocol::exit_code (evaluator/protocol/result.hpp).

/// Runs the job; writes result.json atomically after each stage, then says `finished N` on the
/// protocol channel when it was given one. Never runs a shell.
int run_job_file(const std::string &job_path, const std::string &result_path);

/// A pre-started worker: takes the GPU lock at `lock_path` (if given) while it creates the CUDA
/// context, the cuBLASLt and cuDNN handles (and, with `cupti`, the CUPTI profiler set-up), releases
/// it, says "ready" on the protocol channel (protocol::kChannelFdEnv; without one it refuses to start)
/// (with `warm_cublaslt`, then runs one tiny cuBLASLt matmul unless the job is already waiting), then
/// reads one line "JOB<TAB>RESULT" from stdin and runs that job as run_job_file would. EOF instead of a
/// job: exits 0 without touching the GPU again. One job per process, as ever.
int serve_prestarted(int device, const std::string &lock_path, bool cupti, bool warm_cublaslt);

/// GPU, driver, CUDA, cuBLASLt, cuDNN and CUPTI facts; with `cupti_probe` a tiny
/// kernel with a dead branch runs under SASS metrics (can CUPTI count here?).
nlohmann::json probe(int device, bool cupti_probe);

/// Our reference GEMM against cuBLASLt on a few shapes (bf16 and fp8): per case
/// max errors and mismatches. Used by tests/test_gpu_gemm.cpp and doctor.
nlohmann::json check_reference_gemm(int device);

}  // namespace ptxbench::worker
