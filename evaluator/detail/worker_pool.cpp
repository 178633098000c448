#include "evaluator/detail/worker_pool.hpp"

#include "evaluator/protocol/worker_output.hpp"
#include "evaluator/worker_client.hpp"

namespace ptxbench::evaluator::detail {

WorkerPool::WorkerPool() = default;
WorkerPool::~WorkerPool() {
  wait_reaped();  // waiting workers are killed with their process group by their destructors
}

void WorkerPool::reap_later(util::StartedProcess worker, std::shared_ptr<void> held,
                            std::chrono::milliseconds limit) {
  std::lock_guard lock(mutex_);
  std::erase_if(exiting_, [](std::future<void> &f) {
    return f.wait_for(std::chrono::seconds(0)) == std::future_status::ready;
  });
  exiting_.push_back(
      std::async(std::launch::async, [w = std::move(worker), h = std::move(held), limit]() mutable {
        (void)w.reap(limit);
        h.reset();
      }));
}

void WorkerPool::wait_reaped() {
  std::vector<std::future<void>> all;
  {
    std::lock_guard lock(mutex_);
    all.swap(exiting_);
  }
  for (auto &f : all) f.wait();
}

WorkerPool &WorkerPool::shared() {
  static WorkerPool pool;
  return pool;
}

std::optional<util::StartedProcess> WorkerPool::spawn(const WorkerKey &key, bool warm_cublaslt) {
  if (!home_) home_ = std::make_unique<util::TempDir>("ptxbench-workers");
  // `ready` and `finished N` come on the protocol channel, apart from stdout (the kernel's printf).
  const util::ProcessSpec spec =
      worker_process_spec(key.worker, WorkerCommand::prestart(key.lock, key.cupti, warm_cublaslt),
                          WorkerPlace{.home = home_->path(),
                                      .visible_device = key.device,
                                      .cpu_seconds = key.cpu_seconds,
                                      .channel = true});
  auto p = util::StartedProcess::start(spec);
  if (!p) return std::nullopt;
  return std::move(*p);
}

std::optional<util::StartedProcess> WorkerPool::take(const WorkerKey &key,
                                                     std::chrono::milliseconds ready_timeout,
                                                     nlohmann::json &figures) {
  const auto start = std::chrono::steady_clock::now();
  std::optional<util::StartedProcess> worker;
  {
    std::lock_guard lock(mutex_);
    if (auto it = idle_.find(key); it != idle_.end()) {
      worker.emplace(std::move(it->second));
      idle_.erase(it);
    }
  }
  figures["prestarted"] = worker.has_value();
  int replaced = 0;
  for (int attempt = 0; attempt < 2; ++attempt) {
    if (!worker) {
      std::lock_guard lock(mutex_);
      worker = spawn(key);
    }
    if (!worker) break;  // could not even start: the one-shot path reports why
    if (worker->wait_for_line(protocol::kReadyLine, ready_timeout)) break;
    worker.reset();  // died before its job (or never got ready): replace it once
    ++replaced;
  }
  figures["replaced"] = replaced;
  figures["ready_wait_seconds"] =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return worker;
}

void WorkerPool::refill(const WorkerKey &key, bool warm_cublaslt) {
  std::lock_guard lock(mutex_);
  if (idle_.count(key)) return;
  if (auto p = spawn(key, warm_cublaslt)) idle_.emplace(key, std::move(*p));
}

std::size_t WorkerPool::waiting() const {
  std::lock_guard lock(mutex_);
  return idle_.size();
}

}  // namespace ptxbench::evaluator::detail
