// Pre-started GPU workers: the next candidate's worker process is
// started ahead and creates its CUDA context, library handles and CUPTI set-up
// while the orchestrator parses and compiles, so a job finds it ready. Still one
// process per candidate: a worker runs one job and exits, so a crash, a sticky
// CUDA error or a hang never reaches the next candidate; the pool starts the
// next one after each job and replaces a worker that died before its job.
#pragma once

#include <chrono>
#include <filesystem>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

#include "util/files.hpp"
#include "util/subprocess.hpp"

namespace ptxbench::evaluator::detail {

/// Which workers are interchangeable: same executable, GPU and lock file.
struct WorkerKey {
  std::filesystem::path worker;  ///< ptxbench-worker
  int device = 0;                ///< CUDA ordinal (the worker sees it as CUDA_VISIBLE_DEVICES)
  std::filesystem::path lock;    ///< the GPU lock file the worker holds while it sets up ("" = none)
  std::uint64_t cpu_seconds = 300;
  bool cupti = false;  ///< the worker also sets up the CUPTI profiler ahead (--prewarm-cupti)
  bool operator<(const WorkerKey &o) const {
    return std::tie(worker, device, lock, cpu_seconds, cupti) <
           std::tie(o.worker, o.device, o.lock, o.cpu_seconds, o.cupti);
  }
};

class WorkerPool {
 public:
  WorkerPool();
  ~WorkerPool();
  WorkerPool(const WorkerPool &) = delete;
  WorkerPool &operator=(const WorkerPool &) = delete;

  /// The process-wide pool the GPU stage uses.
  static WorkerPool &shared();

  /// A worker for `key` that has said "ready" on its protocol channel (protocol::kChannelFdEnv; stdout
  /// is the kernel's): the pre-started one, or, when it is missing or died
  /// before its job, a new one (one retry). nullopt when none became ready within `ready_timeout`
  /// each (the caller then runs a one-shot worker, which reports why). `figures` gets
  /// ready_wait_seconds, prestarted (was one waiting) and replaced (how many died before their job).
  std::optional<util::StartedProcess> take(const WorkerKey &key, std::chrono::milliseconds ready_timeout,
                                           nlohmann::json &figures);

  /// Starts the next worker for `key` unless one is waiting already. `warm_cublaslt`: it also runs
  /// cuBLASLt's one-time set-up before its job (worth it when the job before was a GEMM: the next one
  /// likely is too; any job can still take it).
  void refill(const WorkerKey &key, bool warm_cublaslt = false);

  /// Workers waiting now (for tests and the summary).
  std::size_t waiting() const;

  /// Ends a worker that has written its result and said so while its teardown (buffers, handles, the
  /// context) goes on: waited for on a thread, killed past `limit`. `held` (the GPU lock)
  /// is released only once it has exited, so the next GPU stage never overlaps a teardown; the
  /// destructor waits for every such worker.
  void reap_later(util::StartedProcess worker, std::shared_ptr<void> held, std::chrono::milliseconds limit);

  /// Waits until every worker given to reap_later has exited (and its `held` was released).
  void wait_reaped();

 private:
  std::optional<util::StartedProcess> spawn(const WorkerKey &key, bool warm_cublaslt = false);
  mutable std::mutex mutex_;
  std::map<WorkerKey, util::StartedProcess> idle_;
  std::unique_ptr<util::TempDir> home_;     ///< cwd, HOME and TMPDIR of pre-started workers
  std::vector<std::future<void>> exiting_;  ///< reap_later's waits, pruned as they end
};

}  // namespace ptxbench::evaluator::detail
