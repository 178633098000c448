// The runner's scheduler on its own (agent/detail/scheduler.hpp), over a hand-made plan with no clients:
// the order turns are taken in, a trajectory's stop reason, an endpoint given up after failures in a row,
// the first stop deciding the run's end. test_agent runs it through whole runs.
#include <doctest/doctest.h>

#include <stdexcept>

#include "agent/conversation.hpp"
#include "agent/detail/scheduler.hpp"
#include "agent/prompt_builder.hpp"
#include "agent/repair_selection.hpp"
#include "agent/runner.hpp"

using namespace ptxbench;
using agent::detail::JobPtr;
using agent::detail::RunPlan;
using agent::detail::Scheduler;
using agent::detail::TrajectoryPlan;
using agent::detail::TrajectoryState;
using agent::detail::TurnJob;

namespace {

/// `count` trajectories of one task on endpoint "m0", `turns` turns each; nothing else of a plan.
struct SmallPlan {
  tasks::Task task;
  RunPlan plan;
  SmallPlan(int count, int turns) {
    task.id = "t";
    plan.config.endpoints.resize(1);
    plan.config.endpoints[0].name = "m0";
    plan.config.turns = turns;
    plan.arms = plan.config.arms();
    for (int i = 0; i < count; ++i) {
      TrajectoryPlan t;
      t.task = &task;
      t.sample = i;
      t.id = "m0/t/" + std::to_string(i);
      t.order = static_cast<std::uint64_t>(i);
      plan.trajectories.push_back(t);
    }
  }
};

TurnJob job_for(TrajectoryState &t) {
  TurnJob job;
  job.trajectory = &t;
  job.turn = t.next_turn;
  return job;
}

}  // namespace

TEST_CASE("scheduler: later turns first, then the plan's order; a recorded turn goes back with its history") {
  SmallPlan p(3, 4);
  Scheduler s(p.plan);
  s.add_trajectories();
  CHECK(s.queue_unfinished() == 3);
  CHECK(s.pending_on(0) == 3);
  TrajectoryState *first = s.next_trajectory(0);
  REQUIRE(first != nullptr);
  CHECK(first->plan.id == "m0/t/0");
  TurnJob job = job_for(*first);
  job.response.emplace();
  job.response->content = "answer";
  CHECK(s.stop_reason_for(job, nullptr) == "");
  s.advance(job, "", "feedback");
  s.release_turn();
  CHECK(first->next_turn == 1);
  REQUIRE(first->history.size() == 1);
  CHECK(first->history[0].response_content == "answer");
  CHECK(first->history[0].feedback == "feedback");
  // Turn 1 of the first trajectory comes before turn 0 of the others, which keep their order.
  CHECK(s.next_trajectory(0) == first);
  CHECK(s.next_trajectory(0)->plan.id == "m0/t/1");
  CHECK(s.next_trajectory(0)->plan.id == "m0/t/2");
  for (int i = 0; i < 3; ++i) s.release_turn();
  CHECK_FALSE(s.run_over());
}

TEST_CASE("scheduler: a turn's stop reason: request failure, target, turn limit, token budgets") {
  SmallPlan p(2, 3);
  p.plan.config.budgets.per_trajectory = 100;
  p.plan.config.budgets.per_run = 150;
  Scheduler s(p.plan);
  s.add_trajectories();
  s.queue_unfinished();
  TrajectoryState &t = *s.next_trajectory(0);
  TurnJob job = job_for(t);
  job.error = llm::ChatError{};
  CHECK(s.stop_reason_for(job, nullptr) == "request_failed");
  job.forced_stop = "run_budget";
  CHECK(s.stop_reason_for(job, nullptr) == "run_budget");
  job.error.reset();
  evaluator::Verdict verdict;
  verdict.axes.correct = true;
  verdict.axes.targets_executed = true;
  CHECK(s.stop_reason_for(job, &verdict) == "target_reached");
  verdict.axes.correct = false;
  CHECK(s.stop_reason_for(job, &verdict) == "");
  job.turn = 2;
  CHECK(s.stop_reason_for(job, &verdict) == "turn_limit");
  job.turn = 0;
  s.add_tokens(t, 100);
  CHECK(s.stop_reason_for(job, &verdict) == "token_budget");
  TrajectoryState &other = *s.next_trajectory(0);
  TurnJob other_job = job_for(other);
  CHECK_FALSE(s.run_budget_used());
  CHECK(s.stop_reason_for(other_job, nullptr) == "");
  s.add_tokens(other, 50);
  CHECK(s.run_budget_used());
  CHECK(s.stop_reason_for(other_job, nullptr) == "run_budget");
  // Both trajectories end: the run is over.
  s.advance(job, "token_budget", "");
  s.advance(other_job, "run_budget", "");
  CHECK(t.finished);
  CHECK(s.run_over());
}

TEST_CASE("scheduler: an endpoint is given up once, after the configured failures in a row") {
  SmallPlan p(1, 2);
  p.plan.config.concurrency.endpoint_failures_before_dead = 2;
  Scheduler s(p.plan);
  s.add_trajectories();
  llm::ChatError error;
  error.message = "HTTP 503";
  error.attempts = 4;
  int given_up = 0, failures_seen = 0;
  auto count = [&](int failures) {
    ++given_up;
    failures_seen = failures;
  };
  s.request_failed(0, error, count);
  s.request_succeeded(0);  // a success in between starts the count again
  s.request_failed(0, error, count);
  CHECK_FALSE(s.endpoint_dead(0));
  s.request_failed(0, error, count);
  CHECK(s.endpoint_dead(0));
  s.request_failed(0, error, count);
  CHECK(given_up == 1);
  CHECK(failures_seen == 2);
  const llm::ChatError dead = s.dead_error(0);
  CHECK(dead.attempts == 0);
  CHECK(dead.message ==
        "not sent: endpoint 'm0' failed 2 requests in a row; its remaining turns are not attempted. Last "
        "error: HTTP 503");
}

TEST_CASE("scheduler: the first stop decides the end; queued trajectories wait; closed queues refuse turns") {
  SmallPlan p(2, 2);
  Scheduler s(p.plan);
  s.add_trajectories();
  s.queue_unfinished();
  TrajectoryState *taken = s.next_trajectory(0);
  REQUIRE(taken != nullptr);
  s.request_stop(agent::RunEnd::write_failed, "disk full");
  s.request_stop(agent::RunEnd::interrupted, "Ctrl-C");
  CHECK(s.stopping());
  CHECK(*s.stop_flag());
  CHECK(s.next_trajectory(0) == nullptr);  // the other one is dropped: redone on resume
  CHECK_FALSE(s.run_over());               // a turn is still in flight
  s.abandon(std::make_unique<TurnJob>(job_for(*taken)));
  CHECK(s.run_over());
  agent::RunResult result;
  s.report(result);
  CHECK(result.end == agent::RunEnd::write_failed);
  CHECK(result.message == "disk full");
  CHECK(result.turns_abandoned == 1);
  s.close_queues();
  CHECK_THROWS_WITH_AS(s.hand_on(Scheduler::Stage::cpu, std::make_unique<TurnJob>()),
                       "CPU queue closed with a turn in flight", std::logic_error);
  CHECK_THROWS_WITH_AS(s.hand_on(Scheduler::Stage::explanation, std::make_unique<TurnJob>()),
                       "explanation queue closed with a turn in flight", std::logic_error);
  CHECK_FALSE(s.next_job(Scheduler::Stage::gpu).has_value());
}

TEST_CASE("scheduler: an interrupt after every trajectory finished is a completed run") {
  SmallPlan p(1, 1);
  Scheduler s(p.plan);
  s.add_trajectories();
  s.queue_unfinished();
  TrajectoryState &t = *s.next_trajectory(0);
  s.advance(job_for(t), "turn_limit", "");
  s.release_turn();
  s.request_stop(agent::RunEnd::interrupted, "interrupted (Ctrl-C or SIGTERM)");
  agent::RunResult result;
  s.report(result);
  CHECK(result.end == agent::RunEnd::completed);
}
