// What the worker's stages share over one job: the job, the device, the loaded candidate kernel and the
// family handler, the result file written after each stage, the launches and buffers every stage makes
// the same way, the correctness inputs kept for timing, and the launch times later stages size their
// budgets and deadlines by. The stages themselves are objects of their own (correctness_stage.hpp,
// generalization_stage.hpp, timing_stage.hpp, execution_stage.hpp, profile_stage.hpp), each given this
// context by reference; the running order is Worker::run's (stage_runner.hpp).
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "evaluator/worker/detail/candidate_kernel.hpp"
#include "evaluator/worker/detail/device_tensor.hpp"
#include "evaluator/worker/detail/protocol_names.hpp"
#include "evaluator/worker/detail/worker_support.hpp"

namespace ptxbench::worker {
class FamilyHandler;  // family.hpp
}  // namespace ptxbench::worker

namespace ptxbench::worker::detail {

/// Seconds per phase of a stage, for finding where evaluation time goes. Each mark waits for the
/// stream, so GPU work is charged to the phase that queued it.
struct PhaseSeconds {
  cudaStream_t stream;
  Clock::time_point last = Clock::now();
  json seconds = json::object();  ///< phase name -> s
  void mark(const char *phase) {
    PTXB_CUDA(cudaStreamSynchronize(stream));
    const auto now = Clock::now();
    seconds[phase] = seconds.value(phase, 0.0) + std::chrono::duration<double>(now - last).count();
    last = now;
  }
};

/// A correctness trial's inputs and fp32 reference, kept as one of the timing stage's input sets.
struct KeptInputs {
  TensorSet inputs;   ///< non-output tensors only
  ReferenceSet refs;  ///< fp32 reference of each output
};

class StageContext {
 public:
  /// Seeds the job (a base seed of 0 draws one), opens the selection cache, picks the family handler and
  /// writes the first result file.
  StageContext(Job job, std::string result_path, Device device, json worker_figures);
  ~StageContext();
  StageContext(const StageContext &) = delete;
  StageContext &operator=(const StageContext &) = delete;

  /// Hidden workload i is keyed kHiddenIndexBase + i for its trial seeds and kept inputs, apart from
  /// the shown workloads' indices.
  static constexpr std::size_t kHiddenIndexBase = 1'000'000;

  Job &job() { return job_; }  ///< mutable: the execution stage takes the SASS listing in late
  const Device &device() const { return device_; }
  cudaStream_t stream() const { return device_.stream; }  ///< the stream every stage's GPU work goes on
  /// The task family's inputs, reference and library; nullptr when this worker has none for the job.
  FamilyHandler *family() const { return family_.get(); }
  CandidateKernel &kernel() { return kernel_; }
  /// The result as written so far (the runner records whole-job figures and stages it fails at once).
  protocol::WorkerResult &result() { return result_; }

  // ---- result bookkeeping ---------------------------------------------------------------
  void flush();
  void set_stage(const std::string &name, protocol::StageResult stage);
  void finish();
  /// Keeps `held` alive until finish() has written the result, then destroys it there: for tear-down
  /// (a PC-sampling session, module copies) that need not delay the verdict.
  void release_after_finish(std::shared_ptr<void> held) { after_finish_.push_back(std::move(held)); }
  /// A stage ended the worker (runtime_error, timeout, launch_error): record and exit now.
  /// _Exit: no destructors, since a faulted or hung context must not be touched again.
  [[noreturn]] void fatal(const std::string &stage, Status status, const std::string &summary,
                          json figures = json::object());

  // ---- the candidate's launches -----------------------------------------------------------
  std::string launch_context(const JobWorkload &w, const std::string &what) const;

  /// Launches the candidate and waits with the hang deadline; any failure ends the worker.
  /// deadline_ms < 0: the job's kernel-hang limit. instrumented: a launch under CUPTI, whose slowness is
  /// the instrumentation's, so running past the deadline skips the stage instead of calling it a hang.
  void launch_and_wait(const std::string &stage, const JobWorkload &w, detail::PackedParams &params,
                       const std::string &what, double deadline_ms = -1, bool instrumented = false);

  void wait_candidate(const std::string &stage, const JobWorkload &w, const std::string &what,
                      double deadline_ms = -1, bool instrumented = false);

  void prepare(const std::string &stage, const JobWorkload &w);

  void pack(const std::string &stage, const JobWorkload &w, const TensorSet &tensors,
            detail::PackedParams &out);

  double kernel_hang_ms() const;  ///< ms

  // ---- buffers --------------------------------------------------------------------------
  void fill_inputs(const WorkloadSpec &spec, const TensorSet &tensors, std::uint64_t seed);

  void poison_outputs(const WorkloadSpec &spec, const TensorSet &tensors);

  /// The workload's workspace (launch.workspace_bytes > 0), allocated from `pool` with guard regions
  /// and added to `tensors` under protocol::kWorkspaceName; nothing when the launch declares none.
  void add_workspace(const JobWorkload &w, BufferPool &pool, TensorSet &tensors);
  /// Zero-fills the workspace in `tensors` (if any) on the stream: called before every candidate
  /// launch, and in the timing stage before the L2 flush and the start event, so it is never timed.
  void reset_workspace(const TensorSet &tensors);

  /// Shown workload `wi`'s tensors from `pool`: its inputs copied from the first correctness trial kept for
  /// timing, or freshly filled (seed: the base seed ^ `seed_salt`) when none was kept; outputs not poisoned.
  TensorSet workload_tensors(std::size_t wi, BufferPool &pool, std::uint64_t seed_salt);

  std::uint64_t input_checksum(const WorkloadSpec &spec, const TensorSet &tensors);

  // ---- the correctness inputs kept for timing -------------------------------------------
  // A correctness trial's inputs and fp32 reference, kept (copied before the candidate ran) as one of
  // the timing stage's input sets: see TimingPolicy::reuse_correctness_inputs. Kept only while the GPU
  // has room for them beside 2 GiB of headroom; otherwise timing draws its own sets.
  void keep_for_timing(std::size_t wi, int trial, const WorkloadSpec &spec, const TensorSet &tensors,
                       const ReferenceSet &reference);
  /// Workload `wi`'s kept trials, in trial order; nullptr when none was kept.
  const std::vector<KeptInputs> *kept_inputs(std::size_t wi) const;

  // ---- launch times later stages read -----------------------------------------------------
  /// ms: slowest median candidate launch timed so far (sizes the instrumented deadline).
  double slowest_launch_ms() const { return slowest_launch_ms_; }
  void note_timed_launch(double median_ms) { slowest_launch_ms_ = std::max(slowest_launch_ms_, median_ms); }
  /// ms: slowest correctness launch, wall clock (launch + wait).
  double correctness_launch_ms() const { return correctness_launch_ms_; }
  void note_correctness_launch(double ms) { correctness_launch_ms_ = std::max(correctness_launch_ms_, ms); }

 private:
  Job job_;
  std::string result_path_;
  Device device_;
  protocol::WorkerResult result_;
  double slowest_launch_ms_ = 0;                         ///< ms: see slowest_launch_ms()
  double correctness_launch_ms_ = 0;                     ///< ms: see correctness_launch_ms()
  std::map<std::size_t, std::vector<KeptInputs>> kept_;  ///< workload index -> kept trials, in trial order
  std::unique_ptr<BufferPool> kept_pool_;                ///< owns kept_'s buffers
  std::unique_ptr<FamilyHandler> family_;
  detail::CandidateKernel kernel_;
  std::vector<std::shared_ptr<void>> after_finish_;  ///< see release_after_finish()
};

}  // namespace ptxbench::worker::detail
