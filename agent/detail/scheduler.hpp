// The scheduler: which turn runs next and when the run ends. It owns each trajectory's progress, the
// queues between the runner's loops (per endpoint, CPU, GPU, explanation), the in-flight and unfinished
// counts, the run's tokens, the endpoints' failures and the stop; the loops (runner_loops.cpp) take turns
// from it and hand them on through it.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "agent/detail/queues.hpp"
#include "agent/detail/run_plan.hpp"  // also the evaluator's, the clients' and the traces' types

namespace ptxbench::agent {
struct Attempt;    // conversation.hpp; a std::vector's element, complete where the history is used
struct RunResult;  // runner.hpp; filled in by report()
}  // namespace ptxbench::agent

namespace ptxbench::agent::detail {

/// A trajectory's progress: the turn it is at, its history and tokens. Who it is stays in the plan.
struct TrajectoryState {
  explicit TrajectoryState(const TrajectoryPlan &p) : plan(p) {}
  const TrajectoryPlan &plan;
  int next_turn = 0;
  std::vector<Attempt> history;
  std::int64_t tokens = 0;  ///< prompt + completion so far
  bool finished = false;
};

/// Later turns first: trajectories finish sooner, so a stop loses less and fewer histories are held.
struct ByTurnThenOrder {
  bool operator()(const TrajectoryState *a, const TrajectoryState *b) const {
    if (a->next_turn != b->next_turn) return a->next_turn < b->next_turn;
    return a->plan.order > b->plan.order;
  }
};

/// One turn on its way through the loops: request, CPU stages, GPU stage, explanation, record.
struct TurnJob {
  TrajectoryState *trajectory = nullptr;
  int turn = 0;
  std::vector<llm::ChatMessage> messages;
  std::optional<llm::ChatResponse> response;
  std::optional<llm::ChatError> error;
  std::string forced_stop;  ///< stop reason for a turn that was never sent
  std::optional<evaluator::CompiledCandidate> compiled;
  std::optional<int> gpu;
  std::optional<std::int64_t> seed;  ///< the sampling seed sent (config seed + sample index)
  std::string started_at;
  double request_s = 0, cpu_stages_s = 0, gpu_stage_s = 0;
  std::int64_t orchestrator_ns = 0, client_ns = 0, evaluator_ns = 0;
  std::string verdict_key;  ///< verdict cache key ("" = not cacheable)
  /// A repairs run: the teacher's explanation of its verified repair, asked for when it sent no reasoning.
  std::optional<llm::ChatResponse> explanation;
  std::optional<llm::ChatError> explanation_error;
  std::string explanation_instruction;
};
using JobPtr = std::unique_ptr<TurnJob>;

/// What a resumed run's earlier sessions did, per endpoint: turns done and their outcomes (progress).
struct PreviousCounts {
  std::vector<std::map<std::string, int>> statuses;
  std::vector<int> done;
  int retried_request_failures = 0;  ///< turns that had ended in a request failure, sent again
  explicit PreviousCounts(std::size_t endpoints) : statuses(endpoints), done(endpoints, 0) {}
};

class Scheduler {
 public:
  /// Where a turn waits after its request: its CPU stages, its GPU stage, a repair's explanation.
  enum class Stage : std::size_t { cpu, gpu, explanation };

  /// `plan` is read once set up (from add_trajectories on).
  explicit Scheduler(const RunPlan &plan) : plan_(plan) {}
  Scheduler(const Scheduler &) = delete;
  Scheduler &operator=(const Scheduler &) = delete;

  // ---- set-up
  /// One state per planned trajectory and one failure count per endpoint.
  void add_trajectories();
  /// Resume: each trajectory goes on after its records (turns 0..k-1 exactly once); returns what the
  /// earlier sessions did.
  util::Expected<PreviousCounts> replay(const traces::LoadedRun &previous);
  /// Set once the run stops (the evaluator service's client stops waiting on it).
  const std::atomic<bool> *stop_flag() const { return &stopping_; }

  // ---- the session
  /// Queues every unfinished trajectory on its endpoint; returns how many there are.
  int queue_unfinished();
  /// Unfinished trajectories of one endpoint.
  int pending_on(std::size_t endpoint) const;
  /// Waits until something changes (a turn ends, a stop) or `at_most` passes.
  void wait_for_change(std::chrono::milliseconds at_most);
  /// Every trajectory finished, or stopped with nothing in flight.
  bool run_over() const { return unfinished_ == 0 || (stopping_ && in_flight_ == 0); }
  /// The end of the session: every queue closed (an endpoint's queued trajectories dropped).
  void close_queues();
  /// How the run ended (RunResult::end, message, turns_abandoned).
  void report(RunResult &result) const;

  // ---- the stop
  bool stopping() const { return stopping_; }
  /// The first call decides the run's end: queued trajectories wait for resume, requests are cancelled.
  void request_stop(RunEnd kind, const std::string &why);

  // ---- turns
  /// The endpoint's next trajectory, its turn counted in flight; nullptr once its queue is closed.
  TrajectoryState *next_trajectory(std::size_t endpoint);
  /// The turn waits for `stage`.
  void hand_on(Stage stage, JobPtr job);
  /// The next turn waiting for `stage`; nullopt once its queue is closed and empty.
  std::optional<JobPtr> next_job(Stage stage);
  /// Why the trajectory stops after this turn ("" = it goes on).
  std::string stop_reason_for(const TurnJob &job, const evaluator::Verdict *verdict) const;
  /// A recorded turn: its trajectory goes back to its endpoint's queue with the turn in its history
  /// (`stop` empty), or ends.
  void advance(const TurnJob &job, const std::string &stop, const std::string &feedback);
  /// The turn is no longer in flight.
  void release_turn();
  /// A turn dropped unrecorded (a stop, a failed write): redone on resume.
  void abandon(JobPtr job);

  // ---- tokens and endpoints
  /// config.budgets.per_run is set and used up.
  bool run_budget_used() const;
  void add_tokens(TrajectoryState &t, std::int64_t tokens);
  bool endpoint_dead(std::size_t endpoint) const { return endpoints_[endpoint]->dead; }
  /// The error that ended a dead endpoint, for its turns not sent.
  llm::ChatError dead_error(std::size_t endpoint);
  void request_succeeded(std::size_t endpoint) { endpoints_[endpoint]->consecutive_failures = 0; }
  /// Counts a failed request; after too many in a row the endpoint is given up: `given_up(failures)` is
  /// called once, before any turn reads it as dead (its warning comes first).
  void request_failed(std::size_t endpoint, const llm::ChatError &error,
                      const std::function<void(int failures)> &given_up);

 private:
  struct Endpoint {
    BlockingQueue<TrajectoryState *, ByTurnThenOrder> queue;  ///< its trajectories waiting for a turn
    std::atomic<int> consecutive_failures{0};                 ///< failed requests since the last success
    std::atomic<bool> dead{false};                            ///< given up: its turns are not sent
    std::mutex mutex;                                         ///< guards dead_error and giving up
    llm::ChatError dead_error;  ///< the error that ended it, message rewritten (guarded by mutex)
  };
  BlockingQueue<JobPtr> &queue_of(Stage stage) { return stage_queues_[static_cast<std::size_t>(stage)]; }
  void notify();

  const RunPlan &plan_;
  std::deque<TrajectoryState> trajectories_;  ///< plan_.trajectories' order; a deque: queues hold pointers
  std::vector<std::unique_ptr<Endpoint>> endpoints_;
  /// Per Stage, the turns waiting for it: CPU stages, GPU stage, a verified repair's explanation.
  std::array<BlockingQueue<JobPtr>, 3> stage_queues_;

  std::atomic<bool> stopping_{false};
  std::mutex stop_mutex_;
  std::string stop_message_;              ///< guarded by stop_mutex_
  RunEnd stop_kind_ = RunEnd::completed;  ///< guarded by stop_mutex_
  std::atomic<int> in_flight_{0};         ///< turns taken from an endpoint's queue and not yet ended
  std::atomic<int> unfinished_{0};        ///< trajectories without a stop reason
  std::atomic<int> turns_abandoned_{0};
  std::atomic<std::int64_t> run_tokens_{0};  ///< prompt + completion of every turn so far, earlier sessions'
  std::condition_variable wake_;             ///< the supervisor waits on it (wait_for_change)
  std::mutex wake_mutex_;
};

}  // namespace ptxbench::agent::detail
