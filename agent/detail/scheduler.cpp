// The scheduler: the trajectories' progress (rebuilt from their records on resume), the queues between
// the loops, the stop, and the endpoints' failures.
#include "agent/detail/scheduler.hpp"

#include <stdexcept>

#include <fmt/core.h>

#include "agent/conversation.hpp"
#include "agent/runner.hpp"
#include "traces/outcome.hpp"

namespace ptxbench::agent::detail {

using Json = nlohmann::json;

void Scheduler::add_trajectories() {
  for (std::size_t e = 0; e < plan_.config.endpoints.size(); ++e)
    endpoints_.push_back(std::make_unique<Endpoint>());
  for (const auto &t : plan_.trajectories) trajectories_.emplace_back(t);
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

util::Expected<PreviousCounts> Scheduler::replay(const traces::LoadedRun &previous) {
  PreviousCounts counts(plan_.config.endpoints.size());
  std::map<std::string, TrajectoryState *> by_id;
  for (auto &t : trajectories_) by_id[t.plan.id] = &t;
  auto records = records_by_trajectory(previous, by_id);
  if (!records) return util::unexpected(records.error());
  for (auto &[id, turns] : *records) {
    TrajectoryState &t = *by_id[id];
    const std::size_t e = t.plan.endpoint;
    int expected = 0;
    for (const auto &[turn, record] : turns) {
      if (turn != expected) {
        return util::unexpected(fmt::format(
            "trajectory '{}' is missing turn {} (has turn {}); the trace is damaged", id, expected, turn));
      }
      ++expected;
      const traces::TurnRecord &r = *record;
      if (r.response) add_tokens(t, r.response->usage.total());
      t.history.push_back({r.response ? r.response->content : "", r.feedback});
      if (!r.stop_reason.empty()) t.finished = true;
      counts.statuses[e][traces::status_of(r)] += 1;
      counts.done[e] += 1;
    }
    t.next_turn = expected;
    if (t.finished && !turns.empty() && turns.rbegin()->second->stop_reason == "request_failed") {
      // Not the model's outcome: the endpoint failed (outage, restart, bad key since fixed). Send it again.
      t.finished = false;
      t.next_turn = expected - 1;
      t.history.pop_back();
      counts.done[e] -= 1;
      counts.statuses[e]["request_failed"] -= 1;
      ++counts.retried_request_failures;
    }
    if (t.finished)  // turns it will never run
      counts.done[e] += plan_.config.turns_of(plan_.arms[t.plan.arm]) - expected;
  }
  return counts;
}

int Scheduler::queue_unfinished() {
  for (auto &t : trajectories_) {
    if (t.finished) continue;
    ++unfinished_;
    endpoints_[t.plan.endpoint]->queue.push(&t);
  }
  return unfinished_;
}

int Scheduler::pending_on(std::size_t endpoint) const {
  int pending = 0;
  for (const auto &t : trajectories_) pending += (!t.finished && t.plan.endpoint == endpoint) ? 1 : 0;
  return pending;
}

void Scheduler::wait_for_change(std::chrono::milliseconds at_most) {
  std::unique_lock lock(wake_mutex_);
  wake_.wait_for(lock, at_most);
}

void Scheduler::close_queues() {
  for (auto &e : endpoints_) e->queue.close(true);
  for (auto &q : stage_queues_) q.close();
}

void Scheduler::report(RunResult &result) const {
  result.end = stopping_ ? stop_kind_ : RunEnd::completed;
  if (stopping_ && unfinished_ == 0 && stop_kind_ == RunEnd::interrupted) result.end = RunEnd::completed;
  result.message = stop_message_;
  result.turns_abandoned = turns_abandoned_;
}

void Scheduler::request_stop(RunEnd kind, const std::string &why) {
  {
    std::lock_guard lock(stop_mutex_);
    if (stopping_.exchange(true)) return;
    stop_kind_ = kind;
    stop_message_ = why;
  }
  for (auto &e : endpoints_) e->queue.close(/*discard=*/true);
  for (auto &c : plan_.clients) c->cancel();
  notify();
}

TrajectoryState *Scheduler::next_trajectory(std::size_t endpoint) {
  while (auto next = endpoints_[endpoint]->queue.pop()) {
    ++in_flight_;
    if (!stopping_) return *next;
    release_turn();
  }
  return nullptr;
}

void Scheduler::hand_on(Stage stage, JobPtr job) {
  // A queue is closed only after a stop with nothing in flight: cannot happen while a turn is held.
  static constexpr const char *kQueueNames[] = {"CPU", "GPU", "explanation"};
  if (!queue_of(stage).push(std::move(job)))
    throw std::logic_error(
        fmt::format("{} queue closed with a turn in flight", kQueueNames[static_cast<std::size_t>(stage)]));
}

std::optional<JobPtr> Scheduler::next_job(Stage stage) {
  return queue_of(stage).pop();
}

std::string Scheduler::stop_reason_for(const TurnJob &job, const evaluator::Verdict *verdict) const {
  const TrajectoryState &t = *job.trajectory;
  const RunConfig &config = plan_.config;
  if (job.error) return job.forced_stop.empty() ? "request_failed" : job.forced_stop;
  if (verdict != nullptr && config.stop.reached(verdict->axes)) return "target_reached";
  if (job.turn + 1 >= config.turns_of(plan_.arms[t.plan.arm])) return "turn_limit";
  if (config.budgets.per_trajectory > 0 && t.tokens >= config.budgets.per_trajectory) return "token_budget";
  if (run_budget_used()) return "run_budget";
  return "";
}

void Scheduler::advance(const TurnJob &job, const std::string &stop, const std::string &feedback) {
  TrajectoryState &t = *job.trajectory;
  if (stop.empty()) {
    t.history.push_back({job.response->content, feedback});
    t.next_turn = job.turn + 1;
    endpoints_[t.plan.endpoint]->queue.push(&t);  // refused after a stop: the trajectory waits for resume
  } else {
    t.finished = true;
    --unfinished_;
  }
}

void Scheduler::release_turn() {
  --in_flight_;
  notify();
}

void Scheduler::abandon(JobPtr job) {
  (void)job;
  ++turns_abandoned_;
  release_turn();
}

bool Scheduler::run_budget_used() const {
  return plan_.config.budgets.per_run > 0 && run_tokens_ >= plan_.config.budgets.per_run;
}

void Scheduler::add_tokens(TrajectoryState &t, std::int64_t tokens) {
  t.tokens += tokens;
  run_tokens_ += tokens;
}

llm::ChatError Scheduler::dead_error(std::size_t endpoint) {
  std::lock_guard lock(endpoints_[endpoint]->mutex);
  return endpoints_[endpoint]->dead_error;
}

void Scheduler::request_failed(std::size_t endpoint, const llm::ChatError &error,
                               const std::function<void(int failures)> &given_up) {
  Endpoint &ep = *endpoints_[endpoint];
  const int failures = ++ep.consecutive_failures;
  if (failures < plan_.config.concurrency.endpoint_failures_before_dead || ep.dead) return;
  std::lock_guard lock(ep.mutex);
  if (ep.dead) return;
  ep.dead_error = error;
  ep.dead_error.attempts = 0;
  ep.dead_error.message = fmt::format(
      "not sent: endpoint '{}' failed {} requests in a row; its remaining turns are not attempted. "
      "Last "
      "error: {}",
      plan_.config.endpoints[endpoint].name, failures, error.message);
  ep.dead = true;
  given_up(failures);
}

void Scheduler::notify() {
  std::lock_guard lock(wake_mutex_);
  wake_.notify_all();
}

}  // namespace ptxbench::agent::detail
