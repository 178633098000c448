// Verdict cache: models often resend a kernel unchanged, and its verdict is
// already known. The key covers everything a verdict depends on: the
// normalized kernel hash (PTX: the token stream without comments/whitespace;
// CUDA: the source), the resolved launch plan of every workload, the task,
// the evaluator settings that decide verdicts, and the environment (GPU,
// driver, CUDA, library versions; or the reason there is no GPU). A hit costs
// a parse and a hash: no compile and no GPU time. Thread-safe; in memory, per run.
#pragma once

#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "evaluator/evaluator.hpp"
#include "evaluator/verdict.hpp"
#include "tasks/task.hpp"

namespace ptxbench::evaluator {

class VerdictCache {
 public:
  /// `environment`: what the verdicts were made on (e.g. the worker's probe, or {"gpu": null, "why": ...}).
  explicit VerdictCache(nlohmann::json environment) : environment_(std::move(environment)) {}

  /// The key of a response, or nullopt when it does not parse to a kernel and a resolved launch (such
  /// responses cost no GPU time anyway and are not cached).
  std::optional<std::string> key(const tasks::Task &task, const ParsedCandidate &parsed,
                                 const EvaluatorSettings &settings) const;
  std::optional<std::string> key(const tasks::Task &task, std::string_view response,
                                 const EvaluatorSettings &settings) const;

  /// The verdict stored under `key`, marked as reused ({origin of the first evaluation, key}).
  std::optional<Verdict> get(const std::string &key) const;

  /// Stores a verdict made now; `origin` says where it was made (e.g. "sample 2 turn 1"). A verdict that
  /// says nothing about the kernel (a GPU stage that could not run for the machine's reasons) is not
  /// stored. The first verdict for a key is kept.
  void put(const std::string &key, const Verdict &verdict, const std::string &origin);

  std::size_t size() const;

 private:
  nlohmann::json environment_;
  mutable std::mutex mutex_;
  std::map<std::string, std::pair<Verdict, std::string>> entries_;
};

/// The settings that decide a verdict (paths, the worker pool and the cache directory do not).
nlohmann::json verdict_settings(const EvaluatorSettings &settings);

}  // namespace ptxbench::evaluator
