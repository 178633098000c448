// The job file the orchestrator (evaluator/gpu_stage.cpp) writes for one
// candidate, and the result file the worker writes back. Both are JSON; the
// worker rewrites the result atomically after each stage, so a crash keeps
// the stages that finished.
//
// job.json:
//   {version: 1, task_id, family, reference, mode: "full"|"sanitize", device,
//    cubin_path, entry, stages: ["correctness","execution","timing"],
//    workloads: [{name, symbols{}, flops, bytes, causal,
//                 tensors: [{name, dtype, shape[], role: "input"|"output", distribution, atol, rtol}],
//                 scalars: [{name, type, value}],
//                 launch: {grid[3], block[3], cluster[3], shared_bytes,
//                          params: [{kind: "tensor"|"scalar"|"tensor_map", name, ptx_type,
//                                    dims[], strides_bytes[], box[], swizzle, l2_promotion,
//                                    oob_fill, interleave}]}}],
//    targets: [{name, sass_families[]}],
//    sass: [{function, offset, opcode, family}]   (the SASS listing, one entry per instruction),
//    sass_path: FILE  (instead of sass: the listing is still being made; FILE appears, written
//                      atomically, holding {sass: [...]} or {error: "why"}, before the execution stage),
//    correctness: CorrectnessPolicy, timing: TimingPolicy, kernel_hang_ms,
//    incorrect_execution_budget_ms, cache_dir (library selections kept across workers),
//    task: Task::to_json (recorded, not read)}
// result.json:
//   {environment{...}, seed, stages: {correctness|execution|timing: {status, summary,
//    diagnostics: [{severity, text, line}], figures{...}, wall_seconds}}, finished: bool,
//    worker: {prestarted, phase_seconds{start, context, handles, cupti, job}} (where the worker's own
//    time went before the stages)}
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "evaluator/worker/family.hpp"

namespace ptxbench::worker {

struct LaunchParam {
  std::string kind;  ///< "tensor" | "scalar" | "tensor_map"
  std::string name;
  std::string ptx_type;
  std::vector<std::int64_t> dims, strides_bytes, box;  ///< tensor_map: innermost first
  std::string swizzle = "none", l2_promotion = "none", oob_fill = "zero", interleave = "none";
};

struct LaunchSpec {
  std::array<std::int64_t, 3> grid{1, 1, 1}, block{1, 1, 1}, cluster{1, 1, 1};
  std::int64_t shared_bytes = 0;  ///< dynamic shared memory, bytes
  std::vector<LaunchParam> params;
};

struct JobWorkload {
  WorkloadSpec spec;
  LaunchSpec launch;
};

struct SassInstruction {
  std::string function;
  std::uint32_t offset = 0;  ///< byte offset from the function start
  std::string opcode;        ///< full opcode with modifiers, e.g. "HGMMA.64x128x16.F32.BF16"
  std::string family;        ///< opcode up to the first '.', e.g. "HGMMA"
};

struct TargetSpec {
  std::string name;
  std::vector<std::string> sass_families;
};

struct CorrectnessSettings {
  int trials = 3;
  std::uint64_t base_seed = 0;
  std::size_t guard_bytes = 4096;
  bool check_determinism = true;
  bool all_trials = false;  ///< false: the first failing trial ends the stage (the rest are skipped)
};

struct TimingSettings {
  int warmup_launches = 3;
  int min_samples = 10;
  double target_rel_spread = 0.005;
  double min_seconds = 0.25;
  double max_seconds = 15.0;
  double l2_flush_factor = 2.0;
  int input_sets = 2;
  bool reverify_random_launch = true;
  double sol_slack = 0.9;
  double cooldown_ratio = 1.0;           // idle time after each timed launch, as a multiple of its time
  double cooldown_max_ms = 1.0;          // ms; cap on that idle time
  bool library_preroll = true;           // untimed library launch + L2 flush before each timed library launch
  bool reuse_correctness_inputs = true;  // timing's input sets are the first correctness trials' inputs
};

struct Job {
  std::string task_id, family, reference, mode = "full";
  int device = 0;
  std::string cubin_path, entry;
  std::vector<std::string> stages;
  std::vector<JobWorkload> workloads;
  std::vector<TargetSpec> targets;
  std::vector<SassInstruction> sass;
  std::string sass_path;  // "" = the listing is in `sass`
  CorrectnessSettings correctness;
  TimingSettings timing;
  double kernel_hang_ms = 10'000;
  /// ms; an incorrect kernel's instruction counts are taken only when the instrumented launch is
  /// expected to take at most this long (200x its measured launch time)
  double incorrect_execution_budget_ms = 250;
  std::string cache_dir;  ///< library selections (cuBLASLt algorithm, cuDNN plan) are kept here; "" = none
  bool wants(const std::string &stage) const;
};

/// Throws WorkerError("internal", ...) naming the field on malformed input.
Job parse_job(const nlohmann::json &j);

/// The SASS entries of a job's `sass` array; throws WorkerError("internal", ...) when malformed.
std::vector<SassInstruction> parse_sass_entries(const nlohmann::json &array);

/// Splits "HGMMA.64x128x16.F32.BF16" -> "HGMMA".
std::string opcode_family(const std::string &opcode);

}  // namespace ptxbench::worker
