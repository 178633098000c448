// What a run is given besides its config, and how it ends: the services the loop calls into
// (RunServices), how it reports progress (RunOptions) and why it stopped (RunEnd). runner.hpp includes
// this header; the run plan (detail/run_plan.hpp) holds them.
#pragma once

#include <atomic>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "evaluator/evaluator.hpp"
#include "llm_clients/chat_client.hpp"
#include "tasks/task.hpp"
#include "util/expected.hpp"

namespace ptxbench::agent {

/// What the loop calls into; defaults are the real modules. Tests and the
/// orchestrator benchmark swap single entries.
struct RunServices {
  std::function<util::Expected<std::unique_ptr<llm::ChatClient>>(const llm::EndpointConfig &)> make_client;
  /// The CPU stages of one response: its text, and the parse stage's outcome for it (parsed once by the
  /// loop, which took the verdict cache's key from it; the default runs the stages after parse on it).
  std::function<evaluator::CompiledCandidate(const tasks::Task &, std::string_view,
                                             evaluator::ParsedCandidate,
                                             const evaluator::EvaluatorSettings &)>
      cpu_stages;
  std::function<void(evaluator::CompiledCandidate &, const tasks::Task &,
                     const evaluator::EvaluatorSettings &)>
      gpu_stages;
  /// "" when a GPU is usable, else the reason (only asked when settings.run_gpu).
  std::function<std::string(const evaluator::EvaluatorSettings &)> gpu_unavailable_reason;
  /// GPU/driver/library facts for run.json (only called when a GPU is usable); see probe_worker().
  std::function<nlohmann::json(const evaluator::EvaluatorSettings &)> probe_environment;
  static RunServices defaults();
};

enum class ProgressMode { automatic, redraw, lines, quiet };

struct RunOptions {
  ProgressMode progress = ProgressMode::automatic;  ///< automatic: redraw on a terminal, else log lines
  std::FILE *log = stderr;                          ///< progress and messages go here
  const std::atomic<int> *interrupts = nullptr;     ///< Ctrl-C count set by a signal handler (polled)
};

enum class RunEnd {
  completed,         ///< every trajectory stopped (target, turn limit, budget, failed request)
  interrupted,       ///< Ctrl-C: in-flight turns finished or abandoned; resumable
  write_failed,      ///< the trace could not be written (disk full); resumable once space returns
  evaluator_failed,  ///< the remote evaluator (evaluator.url) was down or answered garbage; resumable
};

}  // namespace ptxbench::agent
