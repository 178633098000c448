// Runner setup: the plan (detail/run_plan.cpp), the trajectories (rebuilt from their records on resume),
// run.json with the trace and progress display (detail/turn_recorder.cpp), and the verdict cache.
#include <signal.h>

#include "agent/conversation.hpp"
#include "agent/detail/runner_state.hpp"
#include "agent/prompt_builder.hpp"
#include "agent/repair_selection.hpp"

namespace ptxbench::agent::detail {

using Json = nlohmann::json;

util::Expected<void> RunnerState::setup(const traces::LoadedRun *previous) {
  // Disk-full under a file-size rlimit must be an error value (EFBIG), not a signal.
  ::signal(SIGXFSZ, SIG_IGN);
  auto environment = plan_storage.build(previous, scheduler.stop_flag());
  if (!environment) return util::unexpected(environment.error());
  scheduler.add_trajectories();
  PreviousCounts counts(plan.config.endpoints.size());
  if (previous != nullptr) {
    auto replayed = scheduler.replay(*previous);
    if (!replayed) return util::unexpected(replayed.error());
    counts = std::move(*replayed);
  }
  auto opened = TurnRecorder::open(
      plan, scheduler, plan.run_record(previous != nullptr ? &previous->run : nullptr, *environment), counts);
  if (!opened) return util::unexpected(opened.error());
  recorder = std::move(*opened);
  const traces::RunRecord &run_record = recorder->run_record();
  verdict_cache = std::make_unique<evaluator::VerdictCache>(
      Json{{"gpu_stages", run_record.gpu_stages ? Json(*run_record.gpu_stages) : Json()},
           {"environment", *environment}});
  return {};
}

}  // namespace ptxbench::agent::detail
