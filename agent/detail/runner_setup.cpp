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
using detail::TrajectoryState;
util::Expected<void> Runner::Impl::setup(const traces::LoadedRun *previous) {
  // Disk-full under a file-size rlimit must be an error value (EFBIG), not a signal.
  ::signal(SIGXFSZ, SIG_IGN);
  auto environment = plan_storage.build(previous, &stopping);
  if (!environment) return util::unexpected(environment.error());
  for (std::size_t e = 0; e < plan.config.endpoints.size(); ++e)
    endpoints.push_back(std::make_unique<EndpointState>());
  for (const auto &t : plan.trajectories) trajectories.emplace_back(t);

  detail::PreviousCounts counts;
  counts.statuses.resize(plan.config.endpoints.size());
  counts.done.assign(plan.config.endpoints.size(), 0);
  if (previous != nullptr) {
    if (auto ok = replay_previous(*previous, counts); !ok) return ok;
  }
  if (auto ok = write_run_json(previous, *environment); !ok) return ok;
  verdict_cache = std::make_unique<evaluator::VerdictCache>(
      Json{{"gpu_stages", run_record.gpu_stages ? Json(*run_record.gpu_stages) : Json()},
           {"environment", *environment}});
  writer = std::make_unique<traces::TrajectoryWriter>(plan.dir);
  make_progress(counts);
  return {};
}

namespace {

/// Each trajectory's records by turn; a turn resent after a request failure keeps its later record.
util::Expected<std::map<std::string, std::map<int, const traces::TurnRecord *>>> records_by_trajectory(
    const traces::LoadedRun &previous, const std::map<std::string, TrajectoryState *> &by_id) {
  std::map<std::string, std::map<int, const traces::TurnRecord *>> records;
  for (const auto &r : previous.turns) {
    if (!by_id.count(r.trajectory_id))
      return util::unexpected(fmt::format("record for unknown trajectory '{}'", r.trajectory_id));
    const int turn = r.has_identity ? r.turn : -1;
    auto [slot, added] = records[r.trajectory_id].emplace(turn, &r);
    if (!added) {
      // A turn that ended in a request failure is sent again by resume: the later record replaces it.
      if (slot->second->stop_reason != "request_failed")
        return util::unexpected(
            fmt::format("trajectory '{}' has turn {} twice; the trace is damaged", r.trajectory_id, turn));
      slot->second = &r;
    }
  }
  return records;
}

}  // namespace

util::Expected<void> Runner::Impl::replay_previous(const traces::LoadedRun &previous,
                                                   detail::PreviousCounts &counts) {
  std::map<std::string, TrajectoryState *> by_id;
  for (auto &t : trajectories) by_id[t.plan.id] = &t;
  auto records = records_by_trajectory(previous, by_id);
  if (!records) return util::unexpected(records.error());
  for (auto &[id, turns] : *records) {
    TrajectoryState &t = *by_id[id];
    int expected = 0;
    for (const auto &[turn, record] : turns) {
      if (turn != expected) {
        return util::unexpected(fmt::format(
            "trajectory '{}' is missing turn {} (has turn {}); the trace is damaged", id, expected, turn));
      }
      ++expected;
      const traces::TurnRecord &r = *record;
      if (r.response) {
        const std::int64_t used = r.response->usage.total();
        t.tokens += used;
        run_tokens += used;
      }
      t.history.push_back({r.response ? r.response->content : "", r.feedback});
      if (!r.stop_reason.empty()) t.finished = true;
      const Json *verdict = r.verdict_object();
      counts.statuses[t.plan.endpoint][verdict ? verdict->value("status", "?") : "request_failed"] += 1;
      counts.done[t.plan.endpoint] += 1;
    }
    t.next_turn = expected;
    if (t.finished && !turns.empty() && turns.rbegin()->second->stop_reason == "request_failed") {
      // Not the model's outcome: the endpoint failed (outage, restart, bad key since fixed). Send it again.
      t.finished = false;
      t.next_turn = expected - 1;
      t.history.pop_back();
      counts.done[t.plan.endpoint] -= 1;
      counts.statuses[t.plan.endpoint]["request_failed"] -= 1;
      ++retried_request_failures;
    }
    if (t.finished)  // turns it will never run
      counts.done[t.plan.endpoint] += plan.config.turns_of(plan.arms[t.plan.arm]) - expected;
  }
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
