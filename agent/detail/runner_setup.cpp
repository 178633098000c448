// Runner setup: the plan (detail/run_plan.cpp), the trajectories (rebuilt from their records on resume),
// run.json, the verdict cache and the progress display.
#include <signal.h>
#include <unistd.h>

#include <fmt/core.h>

#include "agent/conversation.hpp"
#include "agent/detail/clocks.hpp"
#include "agent/detail/runner_state.hpp"
#include "agent/prompt_builder.hpp"
#include "agent/repair_selection.hpp"
#include "agent/runner.hpp"
#include "evaluator/evaluator.hpp"
#include "util/files.hpp"

namespace ptxbench::agent {

namespace fs = std::filesystem;
using Json = nlohmann::json;
util::Expected<void> Runner::Impl::setup(const traces::LoadedRun *previous) {
  // Disk-full under a file-size rlimit must be an error value (EFBIG), not a signal.
  ::signal(SIGXFSZ, SIG_IGN);
  auto environment = plan_storage.build(previous, scheduler.stop_flag());
  if (!environment) return util::unexpected(environment.error());
  scheduler.add_trajectories();
  detail::PreviousCounts counts(plan.config.endpoints.size());
  if (previous != nullptr) {
    auto replayed = scheduler.replay(*previous);
    if (!replayed) return util::unexpected(replayed.error());
    counts = std::move(*replayed);
  }
  retried_request_failures = counts.retried_request_failures;
  if (auto ok = write_run_json(previous, *environment); !ok) return ok;
  verdict_cache = std::make_unique<evaluator::VerdictCache>(
      Json{{"gpu_stages", run_record.gpu_stages ? Json(*run_record.gpu_stages) : Json()},
           {"environment", *environment}});
  writer = std::make_unique<traces::TrajectoryWriter>(plan.dir);
  make_progress(counts);
  return {};
}

util::Expected<void> Runner::Impl::write_run_json(const traces::LoadedRun *previous,
                                                  const Json &environment) {
  run_record = plan.run_record(previous != nullptr ? &previous->run : nullptr, environment);
  const fs::path path = plan.dir / "run.json";
  if (auto w = util::write_file_atomic(path, run_record.to_json().dump(2) + "\n"); !w)
    return util::unexpected(fmt::format("cannot write {}: {}", path.string(), w.error()));
  return {};
}

void Runner::Impl::make_progress(const detail::PreviousCounts &counts) {
  // Progress: totals per model.
  std::vector<std::string> names;
  std::vector<int> totals;
  for (const auto &e : plan.config.endpoints) {
    names.push_back(e.name);
    totals.push_back(0);
  }
  for (const auto &t : plan.trajectories) totals[t.endpoint] += plan.config.turns_of(plan.arms[t.arm]);
  auto style = detail::ProgressDisplay::Style::lines;
  switch (plan.options.progress) {
    case ProgressMode::automatic:
      style = ::isatty(::fileno(plan.options.log)) ? detail::ProgressDisplay::Style::redraw
                                                   : detail::ProgressDisplay::Style::lines;
      break;
    case ProgressMode::redraw:
      style = detail::ProgressDisplay::Style::redraw;
      break;
    case ProgressMode::lines:
      style = detail::ProgressDisplay::Style::lines;
      break;
    case ProgressMode::quiet:
      style = detail::ProgressDisplay::Style::quiet;
      break;
  }
  progress = std::make_unique<detail::ProgressDisplay>(style, plan.options.log, names, totals);
  for (std::size_t e = 0; e < names.size(); ++e)
    progress->add_previous(e, counts.done[e], counts.statuses[e]);
}

}  // namespace ptxbench::agent
