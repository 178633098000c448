// Candidate -> verdict. CPU stages (parse, static checks, compile, SASS
// listing) run in this process or its compiler subprocesses; the GPU stages
// run in a sandboxed worker subprocess (ptxbench-worker), one at a time per GPU.
#pragma once

#include <chrono>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "evaluator/candidate.hpp"
#include "evaluator/protocol/matrix_work.hpp"
#include "evaluator/protocol/policies.hpp"
#include "evaluator/sass.hpp"
#include "evaluator/verdict.hpp"
#include "tasks/task.hpp"

namespace ptxbench::evaluator {

struct CompileLimits {
  /// ms; ptxas killed past it -> compile_error "took too long"
  std::chrono::milliseconds ptxas_wall{30'000};
  std::uint64_t ptxas_address_space_bytes = 4ull << 30;  ///< bytes (RLIMIT_AS)
  std::chrono::milliseconds nvrtc_wall{60'000};          ///< ms; the NVRTC child is killed past it
  std::uint64_t nvrtc_address_space_bytes = 8ull << 30;  ///< bytes (RLIMIT_AS of the NVRTC child)
  std::size_t max_ptx_bytes = 8u << 20;                  ///< bytes of PTX accepted
  std::size_t max_ptx_instructions = 200'000;  ///< instruction statements accepted by the static stage
  /// ms; cuobjdump/nvdisasm killed past it (SASS then unavailable)
  std::chrono::milliseconds disassembler_wall{30'000};
};

/// The GPU stages' policies: one struct each, one JSON form (evaluator/protocol/policies.hpp).
using protocol::CorrectnessPolicy;
using protocol::ProfilePolicy;
using protocol::RedundantWorkPolicy;
using protocol::TimingPolicy;
using protocol::WorkerLimits;

/// What happens with a task's hidden workloads (tasks::Task::hidden_workloads): shapes the model never
/// sees, checked for the verdict's `generalizes` result beside the three axes.
struct HiddenWorkloadSettings {
  bool check = true;  ///< run the generalization stage on them (a kernel correct on the shown workloads)
  bool time = false;  ///< also time each hidden workload it gets right (figures beside the shown ones')
  /// false: feedback on a failing hidden workload names only the promised ranges and the kind of failure;
  /// true: also its symbol values (recorded in every verdict's settings)
  bool reveal = false;
  bool operator==(const HiddenWorkloadSettings &) const = default;
};

/// Everything that decides a verdict; recorded in every verdict and trace.
struct EvaluatorSettings {
  ParseLimits parse;
  CompileLimits compile;
  CorrectnessPolicy correctness;
  TimingPolicy timing;
  WorkerLimits worker;
  HiddenWorkloadSettings hidden;
  ProfilePolicy profile;
  /// The run's seed for every input the GPU stages fill: a job's base seed is task_input_seed(run_seed,
  /// task id) (the worker mixes in workload, trial and stage), so within a run a resent kernel sees the same
  /// inputs and gets the same verdict, and the model cannot predict them. `ptxbench run` and `eval` draw
  /// one (draw_run_seed) unless given; 0 = none: each GPU stage draws its own from the clock. A non-zero
  /// correctness.base_seed takes precedence (tests).
  std::uint64_t run_seed = 0;
  bool run_gpu = true;        ///< false = GPU stages skipped ("disabled by --no-gpu")
  bool run_sanitizer = true;  ///< compute-sanitizer on runtime_error / timeout / nondeterministic
  /// Fraction (0..1) of the instrumented workload's FLOPs that a tensor-core target's executed
  /// instructions must do for the target to count as executed (a wgmma run once beside an FFMA GEMM does
  /// not).
  /// 0.75 sits between the two ways attention can split its two matmuls: both on the target (share ~1,
  /// above 1 with causal diagonal tiles computed whole) and one of them elsewhere (share ~0.5), which
  /// does not count as doing the task on the target.
  double min_target_work_share = 0.75;
  /// Fraction (0..1) of the bytes read from global memory that a TMA-load target must deliver (figure
  /// byte_share: UTMALDG executions x the largest manifest box, against plain LDG/LDGSTS/LD bytes) for it
  /// to count as executed: one token box of Q beside K and V streamed by plain loads does not.
  double min_tma_byte_share = 0.5;
  /// How much multiply-add work outside the targets may run beside an executed tensor-core target
  /// (a wgmma whose results are thrown away beside the same matmuls on mma.sync does not count).
  RedundantWorkPolicy redundant_work;
  /// The SM count a manifest's `num_sms` resolves to; 0 = the task architecture's reference GPU
  /// (tasks/arch.hpp: 132 for sm_90a's H200 SXM). Set it when the GPU has another count (H100 PCIe:
  /// 114): the GPU stage warns when the device the worker finds differs from the value used.
  int num_sms = 0;
  int device = 0;                           ///< CUDA device ordinal for the GPU stage
  std::filesystem::path worker_path;        ///< empty = next to the ptxbench executable
  std::filesystem::path ptxas_path;         ///< empty = PATH, then /usr/local/cuda/bin/ptxas
  std::filesystem::path disassembler_path;  ///< cuobjdump or nvdisasm; empty = search (evaluator/sass.hpp)
  /// the ptxbench-nvrtc child that compiles ```cuda candidates; empty = next to the worker
  /// (find_worker_binary)
  std::filesystem::path nvrtc_child_path;
  std::filesystem::path lock_dir = "/tmp/ptxbench-locks";  ///< per-GPU lock files live here
  nlohmann::json to_json() const;
};

namespace detail {
struct PendingSass;  // a disassembly still running (evaluator.cpp)
}

/// The outcome of the CPU stages, carried to the GPU stage.
struct CompiledCandidate {
  Verdict verdict;  ///< parse/static/compile filled; GPU stages skipped until run
  ParsedResponse response;
  Manifest manifest;
  std::string ptx;                ///< the PTX (as given, or emitted by NVRTC)
  std::string cubin;              ///< bytes
  std::string sass;               ///< SASS listing text ("" when no disassembler)
  SassListing sass_listing;       ///< `sass` parsed (by finish_sass), for the job and the sanitizer
  std::vector<LaunchPlan> plans;  ///< one per workload
  /// One per hidden workload whose launch the manifest resolves; a hidden workload it cannot resolve
  /// (e.g. a grid that is no multiple of the cluster there) is in `hidden_plan_errors` instead: a
  /// generalization failure, never a bad_manifest verdict.
  std::vector<LaunchPlan> hidden_plans;
  std::map<std::string, std::string> hidden_plan_errors;  ///< hidden workload name -> why it did not resolve
  /// Set while the SASS listing is still being made (run_cpu_stages with defer_sass); finish_sass ends it.
  std::shared_ptr<detail::PendingSass> pending_sass;
  bool ready_for_gpu() const;  ///< compiled and every plan resolved
};

/// A response through the parse stage, once per verdict: the verdict cache's key (VerdictCache::key),
/// the CPU stages and the run's record all take it, so no reader parses the response again.
struct ParsedCandidate {
  /// the parse stage's result (timed); status ok: every field below is filled; failed: `response` holds
  /// what the text split into (kernel and manifest text) when it got that far
  StageResult parse;
  ParsedResponse response;
  Manifest manifest;
  std::vector<LaunchPlan> plans;         ///< one per workload (ptx_type still empty: the PTX declares it)
  std::vector<LaunchPlan> hidden_plans;  ///< one per hidden workload the manifest resolves
  std::map<std::string, std::string> hidden_plan_errors;  ///< hidden workload name -> why it did not resolve
  bool parsed() const { return parse.status == Status::ok; }
};

/// The parse stage alone. `settings`: its parse limits and num_sms (the device symbols); pass the same
/// settings to run_cpu_stages and VerdictCache::key.
ParsedCandidate parse_candidate(const tasks::Task &task, std::string_view response,
                                const EvaluatorSettings &settings);
/// For a response read by read_response (one over the size limit fails the stage by its size alone).
ParsedCandidate parse_candidate(const tasks::Task &task, const ResponseInput &response,
                                const EvaluatorSettings &settings);

/// Parse, static checks, compile. With defer_sass the disassembly of the cubin (nvdisasm takes about
/// half a second) keeps running after the return, so that it overlaps the GPU stage; the compile
/// stage's SASS figures are filled by finish_sass (run_gpu_stages and evaluate call it).
CompiledCandidate run_cpu_stages(const tasks::Task &task, std::string_view response,
                                 const EvaluatorSettings &settings, bool defer_sass = false);
/// The stages after parse, for a response parse_candidate parsed with the same settings.
CompiledCandidate run_cpu_stages(const tasks::Task &task, ParsedCandidate parsed,
                                 const EvaluatorSettings &settings, bool defer_sass = false);

/// Waits for a deferred SASS listing and fills the compile stage's SASS figures, diagnostics and
/// summary, and `sass`. Returns the listing's error ("" when it is there or none was pending).
std::string finish_sass(CompiledCandidate &c);

/// Runs the GPU stages in a worker subprocess (holding the per-GPU lock) and
/// fills correctness/execution/timing/sanitizer, the axes and the final status.
/// Without a usable GPU the stages are skipped with the reason.
void run_gpu_stages(CompiledCandidate &candidate, const tasks::Task &task, const EvaluatorSettings &settings);

/// Both, in order.
Verdict evaluate(const tasks::Task &task, std::string_view response, const EvaluatorSettings &settings);
/// Both, in order, for a response read by read_response: one over the size limit gets the parse stage's
/// verdict (no_kernel, with its size) without its text.
Verdict evaluate(const tasks::Task &task, const ResponseInput &response, const EvaluatorSettings &settings);
/// Both, in order, for a response parse_candidate parsed with the same settings.
Verdict evaluate(const tasks::Task &task, ParsedCandidate parsed, const EvaluatorSettings &settings);

/// A job's base seed: a hash of the run seed and the task id (never 0, which would mean "from the clock").
std::uint64_t task_input_seed(std::uint64_t run_seed, std::string_view task_id);

/// A fresh run seed from the operating system's random source (std::random_device; never 0).
std::uint64_t draw_run_seed();

/// The ptxbench-worker executable: settings.worker_path, $PTXBENCH_WORKER, next to
/// this executable, or the build tree's evaluator/worker/ (nullopt = not found).
std::optional<std::filesystem::path> find_worker_binary(const EvaluatorSettings &settings);

/// The ptxbench-nvrtc child: settings.nvrtc_child_path, else the one next to the worker
/// (find_worker_binary), which is where the build and an install put it (nullopt = not found).
std::optional<std::filesystem::path> find_nvrtc_child(const EvaluatorSettings &settings);

/// Is there a GPU the worker can use? ("" if yes, else the reason, e.g. "no CUDA driver (libcuda.so.1 not
/// found)").
std::string gpu_unavailable_reason(const EvaluatorSettings &settings);
/// Why the CUDA driver offers no usable device `device` ("" = it does); unlike gpu_unavailable_reason, says
/// nothing about the worker binary, so a GPU test can tell "no GPU here" (skip) from "worker not built"
/// (fail).
std::string gpu_driver_unavailable_reason(int device);

}  // namespace ptxbench::evaluator
