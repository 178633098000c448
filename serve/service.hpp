// The verdict service without its HTTP front: accepted requests, the bounded queue of evaluations, the
// pool of evaluation threads, deduplication of identical requests, deadlines and draining. serve/http.hpp
// puts it on a socket; tests can drive it directly.
//
// A request is (task, model text, settings, deadline). Identical (task, text, verdict-deciding settings)
// requests share one evaluation (queued, running or finished); a resent kernel in other text reuses its
// verdict through evaluator::VerdictCache (one sent while that kernel is being evaluated waits for that
// evaluation, so a kernel is evaluated once however many clients send it at once). A request whose deadline
// passes before its evaluation finishes is answered as a `timeout` verdict (made here, never by waiting
// longer); an evaluation all of whose requests have expired while queued is not run. A GPU worker killed
// from outside (a signal the evaluator did not send) gets the evaluation run once more; such a verdict is
// never cached nor shared with later submissions.
#pragma once

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
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "evaluator/evaluator.hpp"
#include "evaluator/verdict_cache.hpp"
#include "serve/reward.hpp"
#include "tasks/task.hpp"
#include "util/expected.hpp"

namespace ptxbench::agent {
class PromptBuilder;
}

namespace ptxbench::serve {

using Clock = std::chrono::steady_clock;

struct ServiceOptions {
  int workers = 2;               ///< evaluation threads (CPU stages run in parallel; GPU stages lock per GPU)
  std::size_t max_queue = 256;   ///< evaluations waiting to start; more -> rejected (HTTP 429)
  std::size_t max_batch = 1024;  ///< requests in one submission
  double default_deadline_s = 900;     ///< a request's deadline when it names none, seconds
  double max_deadline_s = 3600;        ///< the largest deadline a request may ask for, seconds
  std::size_t max_retained = 100'000;  ///< finished requests kept for polling; the oldest go first
  RewardFormula reward;
  /// Names this process in its request ids ("v<id_prefix>.<random>-<n>"), so a balancer in front of several
  /// services can send a poll to the one holding the request (`ptxbench slurm balancer`); letters, digits, _.
  std::string id_prefix;
};

/// One request as submitted (validated by serve/request.hpp).
struct Submission {
  const tasks::Task *task = nullptr;
  std::string text;  ///< the model's response (or a response made from a kernel + manifest)
  evaluator::EvaluatorSettings settings;
  double deadline_s = 0;
};

/// What a submission got: its request ids, in order, and which joined an existing evaluation.
struct Accepted {
  std::vector<std::string> ids;
  std::vector<bool> deduplicated;
};

/// Why a submission was refused as a whole.
struct Refusal {
  enum class Kind { queue_full, draining } kind;
  double retry_after_s = 1;  ///< a hint for the client (Retry-After), seconds
  std::string message;
};

class VerdictService {
 public:
  /// `prompts`: for the feedback text (may be null: no feedback). `environment`: what verdicts are made on,
  /// part of the verdict cache key.
  VerdictService(ServiceOptions options, std::vector<tasks::Task> tasks,
                 std::shared_ptr<const agent::PromptBuilder> prompts, nlohmann::json environment);
  ~VerdictService();  ///< stops and joins the evaluation threads (after the queue is empty)
  VerdictService(const VerdictService &) = delete;
  VerdictService &operator=(const VerdictService &) = delete;

  const std::vector<tasks::Task> &tasks() const { return tasks_; }
  const ServiceOptions &options() const { return options_; }

  /// All or nothing: either every submission is accepted or none (queue full, draining).
  util::Expected<Accepted, Refusal> submit(std::vector<Submission> batch);

  /// A request's state as JSON (see docs/openapi.yaml, VerdictState); nullopt = unknown id. A request
  /// answered in a final state (done, timeout, error) counts as delivered.
  std::optional<nlohmann::json> poll(const std::string &id);

  /// When the request will be final at the latest (its deadline), or nullopt when it is final already or
  /// unknown. `on_final` is called once (from any thread) when its evaluation finishes before then; it is
  /// not called when this returns nullopt.
  std::optional<Clock::time_point> notify_when_final(const std::string &id, std::function<void()> on_final);

  /// GET /v1/queue.
  nlohmann::json queue_stats() const;

  /// Stop taking submissions (draining): they are refused from now on; accepted ones still run.
  void begin_drain();
  bool draining() const;
  /// No evaluation queued or running whose requests still wait for it (expired ones do not count).
  bool idle() const;
  /// Every accepted request has been answered in a final state at least once.
  bool all_delivered() const;
  /// Accepted requests not yet delivered.
  std::size_t undelivered() const;

 private:
  struct Evaluation;
  struct Request;
  /// What one evaluation thread made of one Evaluation.
  struct Outcome {
    evaluator::Verdict verdict;
    std::optional<std::string> kernel_key;           ///< none: the response did not parse to a kernel
    std::shared_ptr<evaluator::VerdictCache> cache;  ///< the cache it was looked up in
    bool leader = false;                             ///< evaluated a kernel others may wait for (evaluating_)
    bool following = false;  ///< waits for the running evaluation of the same kernel (nothing to finish)
  };
  void worker_loop();
  /// The next queued evaluation still before its deadline, marked running (expired ones are finished on
  /// the way); nullptr when stopping with nothing queued.
  std::shared_ptr<Evaluation> next_evaluation();
  /// The verdict of `e`: from the cache, a wait on the same kernel, or the evaluator (once more after a
  /// worker killed from outside), into `out` as far as it gets (bugs throw).
  void evaluate_one(const std::shared_ptr<Evaluation> &e, Outcome &out);
  /// A leader's followers: the cached verdict, or back to the queue's front.
  void release_followers(const std::shared_ptr<Evaluation> &e, const Outcome &out);
  void finish(const std::shared_ptr<Evaluation> &e, evaluator::Verdict verdict, std::string error);
  nlohmann::json request_json(const Request &r, Clock::time_point now) const;
  void retain(const std::string &id);
  double retry_after_locked() const;

  ServiceOptions options_;
  std::vector<tasks::Task> tasks_;
  std::shared_ptr<const agent::PromptBuilder> prompts_;
  nlohmann::json environment_;
  std::shared_ptr<evaluator::VerdictCache> cache_;  ///< resent kernels in other text; replaced when full
  const Clock::time_point started_;
  const std::chrono::system_clock::time_point started_wall_;

  mutable std::mutex mutex_;
  std::condition_variable work_ready_;
  std::deque<std::shared_ptr<Evaluation>> queue_;
  std::map<std::string, std::shared_ptr<Evaluation>> by_key_;  ///< queued, running and finished
  std::map<std::string, std::shared_ptr<Request>> requests_;
  /// Kernels (verdict cache keys) being evaluated now -> that evaluation: one in other text waits for it.
  std::map<std::string, std::shared_ptr<Evaluation>> evaluating_;
  std::deque<std::string> finished_order_;        ///< request ids, oldest finished first (for retention)
  std::deque<Clock::time_point> finished_times_;  ///< evaluations finished in the last hour
  std::uint64_t next_id_ = 1;
  std::string id_prefix_;
  std::size_t running_ = 0, finished_ = 0, accepted_ = 0, deduplicated_ = 0, cache_hits_ = 0,
              kernel_shared_ = 0, expired_ = 0, errors_ = 0, undelivered_ = 0;
  double evaluation_seconds_total_ = 0;
  bool draining_ = false, stopping_ = false;
  std::vector<std::thread> threads_;
};

/// The JSON of GET /v1/tasks: one summary per task.
nlohmann::json task_summaries(const std::vector<tasks::Task> &tasks);

}  // namespace ptxbench::serve
