// The stages' shared context: the result file, the candidate's launches, buffers and kept inputs.
#include "evaluator/worker/detail/stage_context.hpp"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>

#include "evaluator/worker/family.hpp"
#include "evaluator/worker/selection_cache.hpp"

namespace ptxbench::worker::detail {

StageContext::StageContext(Job job, std::string result_path, Device device, json worker_figures)
    : job_(std::move(job)), result_path_(std::move(result_path)), device_(std::move(device)) {
  result_.environment = device_.facts.to_json();
  result_.worker = std::move(worker_figures);
  set_selection_cache(job_.cache_dir, device_.facts.uuid + "|driver " +
                                          std::to_string(device_.facts.driver_version) + "|runtime " +
                                          std::to_string(device_.facts.runtime_version));
  family_ = make_family_handler(job_.family, job_.reference);
  if (job_.correctness.base_seed == 0)
    job_.correctness.base_seed = mix(static_cast<std::uint64_t>(Clock::now().time_since_epoch().count()) ^
                                     static_cast<std::uint64_t>(getpid()));
  result_.base_seed = job_.correctness.base_seed;
  flush();
}

// Out of line: FamilyHandler is complete here.
StageContext::~StageContext() = default;

void StageContext::flush() {
  write_atomic(result_path_, json(result_).dump(1));
}

void StageContext::set_stage(const std::string &name, protocol::StageResult stage) {
  result_.stages[name] = std::move(stage);
  flush();
}

void StageContext::finish() {
  result_.finished = true;
  result_.worker["clock"]["finished"] = monotonic_seconds();
  flush();
  after_finish_.clear();
}

void StageContext::fatal(const std::string &stage, Status status, const std::string &summary, json figures) {
  json diagnostics = json::array({diag(summary)});
  // A stage that wrote figures as it went (the generalization stage's workloads so far) keeps them.
  if ((figures.is_null() || figures.empty()) && result_.stages.contains(stage))
    figures = result_.stages.at(stage).figures;
  result_.stages[stage] = stage_json(status, summary, diagnostics, std::move(figures), 0);
  result_.fatal = protocol::FatalStage{stage, status};
  try {
    flush();
  } catch (...) {
  }
  std::fflush(stdout);
  std::fflush(stderr);
  std::_Exit(exit_code::kStopped);
}

std::string StageContext::launch_context(const JobWorkload &w, const std::string &what) const {
  return "workload " + w.spec.name + ", " + what + ", grid " + dims_text(w.launch.grid) + ", block " +
         dims_text(w.launch.block) +
         (w.launch.cluster[0] * w.launch.cluster[1] * w.launch.cluster[2] > 1
              ? ", cluster " + dims_text(w.launch.cluster)
              : "");
}

void StageContext::launch_and_wait(const std::string &stage, const JobWorkload &w,
                                   detail::PackedParams &params, const std::string &what, double deadline_ms,
                                   bool instrumented) {
  const CUresult r = kernel_.launch(w.launch, params, device_.stream);
  if (r != CUDA_SUCCESS) {
    if (detail::is_sticky(r))
      fatal(stage, Status::runtime_error,
            "the kernel faulted: " + detail::describe(r) + " (" + launch_context(w, what) + ")");
    fatal(stage, Status::launch_error,
          "the device refused the launch: " + detail::describe(r) + " (" + launch_context(w, what) + ")");
  }
  wait_candidate(stage, w, what, deadline_ms, instrumented);
}

void StageContext::wait_candidate(const std::string &stage, const JobWorkload &w, const std::string &what,
                                  double deadline_ms, bool instrumented) {
  if (deadline_ms < 0) deadline_ms = kernel_hang_ms();
  const detail::WaitOutcome o = detail::wait_with_deadline(device_.stream, deadline_ms);
  if (o.kind == detail::WaitOutcome::hang && instrumented) {
    // The same launch finished uninstrumented; counting every instruction made it this slow.
    const std::string why = "the instrumented launch ran past " + fmt_num(deadline_ms / 1000.0) +
                            " s (the kernel is too slow to count instructions within the limit)";
    result_.stages[stage] = stage_json(Status::skipped, why, json::array({diag(why, "warning")}));
    try {
      flush();
    } catch (...) {
    }
    std::fflush(stderr);
    std::_Exit(exit_code::kStopped);  // the context is busy with the kernel: leave, results are written
  }
  if (o.kind == detail::WaitOutcome::hang)
    fatal(stage, Status::timeout,
          "the kernel did not finish within " + fmt_num(kernel_hang_ms() / 1000.0) + " s (" +
              launch_context(w, what) +
              "): an endless loop or a deadlock, e.g. an mbarrier wait whose phase never completes");
  if (o.kind == detail::WaitOutcome::fault)
    fatal(stage, Status::runtime_error,
          "the kernel faulted: " + detail::describe(o.error) + " (" + launch_context(w, what) + ")");
}

void StageContext::prepare(const std::string &stage, const JobWorkload &w) {
  if (std::string why = kernel_.prepare_launch(w.launch); !why.empty())
    fatal(stage, Status::launch_error, "workload " + w.spec.name + ": " + why);
}

void StageContext::pack(const std::string &stage, const JobWorkload &w, const TensorSet &tensors,
                        detail::PackedParams &out) {
  if (std::string why = kernel_.pack(w.launch, w.spec, tensors, out); !why.empty())
    fatal(stage, Status::launch_error, "workload " + w.spec.name + ": " + why);
}

void StageContext::fill_inputs(const WorkloadSpec &spec, const TensorSet &tensors, std::uint64_t seed) {
  for (const auto &t : spec.tensors)
    if (!t.is_output && t.distribution != InputDistribution::derived) {
      const DeviceTensor &d = tensors.at(t.name);
      detail::fill_random(d.data, t.type, t.elements(), t.distribution, mix(seed ^ name_hash(t.name)),
                          device_.stream);
    }
  family_->derive_inputs(spec, tensors, device_.stream);
}

void StageContext::poison_outputs(const WorkloadSpec &spec, const TensorSet &tensors) {
  for (const auto &t : spec.tensors)
    if (t.is_output) detail::fill_poison(tensors.at(t.name).data, t.type, t.elements(), device_.stream);
}

void StageContext::add_workspace(const JobWorkload &w, BufferPool &pool, TensorSet &tensors) {
  if (w.launch.workspace_bytes <= 0) return;
  tensors[protocol::kWorkspaceName] = pool.workspace(static_cast<std::size_t>(w.launch.workspace_bytes));
}

TensorSet StageContext::workload_tensors(std::size_t wi, BufferPool &pool, std::uint64_t seed_salt) {
  const WorkloadSpec &spec = job_.workloads[wi].spec;
  TensorSet tensors;
  for (const auto &t : spec.tensors) tensors[t.name] = pool.tensor(t);
  // A correctness trial's inputs, kept for timing, serve here too: no second fill (nor, for derived
  // inputs such as attention's O and LSE, a second reference forward).
  const auto kept = kept_.find(wi);
  if (kept != kept_.end() && !kept->second.empty()) {
    for (const auto &t : spec.tensors)
      if (!t.is_output)
        PTXB_CUDA(cudaMemcpyAsync(tensors.at(t.name).data, kept->second.front().inputs.at(t.name).data,
                                  t.bytes(), cudaMemcpyDeviceToDevice, device_.stream));
  } else {
    fill_inputs(spec, tensors, mix(job_.correctness.base_seed ^ seed_salt));
  }
  return tensors;
}

void StageContext::reset_workspace(const TensorSet &tensors) {
  const auto it = tensors.find(protocol::kWorkspaceName);
  if (it != tensors.end()) PTXB_CUDA(cudaMemsetAsync(it->second.data, 0, it->second.bytes, device_.stream));
}

std::uint64_t StageContext::input_checksum(const WorkloadSpec &spec, const TensorSet &tensors) {
  std::uint64_t sum = 0;
  for (const auto &t : spec.tensors)
    if (!t.is_output) sum = mix(sum ^ detail::checksum(tensors.at(t.name).data, t.bytes(), device_.stream));
  return sum;
}

double StageContext::kernel_hang_ms() const {
  return static_cast<double>(job_.limits.kernel_hang.count());
}

void StageContext::keep_for_timing(std::size_t wi, int trial, const WorkloadSpec &spec,
                                   const TensorSet &tensors, const ReferenceSet &reference) {
  const bool timed = wi >= kHiddenIndexBase ? job_.time_hidden : job_.wants("timing");
  if (!job_.timing.reuse_correctness_inputs || trial >= job_.timing.input_sets || !timed) return;
  std::vector<KeptInputs> &sets = kept_[wi];
  if (static_cast<int>(sets.size()) != trial) return;  // an earlier trial could not be kept
  std::size_t bytes = 0;
  for (const auto &t : spec.tensors)
    bytes += t.is_output ? static_cast<std::size_t>(t.elements()) * sizeof(float) : t.bytes();
  std::size_t free_bytes = 0, total_bytes = 0;
  PTXB_CUDA(cudaMemGetInfo(&free_bytes, &total_bytes));
  if (free_bytes < bytes + (std::size_t{2} << 30)) return;
  if (!kept_pool_) kept_pool_ = std::make_unique<BufferPool>(256, device_.stream);
  KeptInputs k;
  for (const auto &t : spec.tensors) {
    if (t.is_output) {
      k.refs[t.name] = kept_pool_->floats(t.elements());
      PTXB_CUDA(cudaMemcpyAsync(k.refs[t.name], reference.at(t.name),
                                static_cast<std::size_t>(t.elements()) * sizeof(float),
                                cudaMemcpyDeviceToDevice, device_.stream));
    } else {
      k.inputs[t.name] = kept_pool_->tensor(t);
      PTXB_CUDA(cudaMemcpyAsync(k.inputs[t.name].data, tensors.at(t.name).data, t.bytes(),
                                cudaMemcpyDeviceToDevice, device_.stream));
    }
  }
  sets.push_back(std::move(k));
}

const std::vector<KeptInputs> *StageContext::kept_inputs(std::size_t wi) const {
  return kept_.contains(wi) ? &kept_.at(wi) : nullptr;
}

}  // namespace ptxbench::worker::detail
