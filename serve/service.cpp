#include "serve/service.hpp"

#include <algorithm>
#include <cmath>
#include <exception>
#include <random>

#include <fmt/core.h>

#include "agent/prompt_builder.hpp"
#include "evaluator/protocol/stages.hpp"
#include "util/files.hpp"

namespace ptxbench::serve {

using evaluator::Status;
using evaluator::Verdict;
using nlohmann::json;

namespace {

double seconds_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

Clock::duration seconds(double s) {
  return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
}

/// The key under which identical requests share one evaluation: task, text and the settings that decide
/// a verdict (evaluator::verdict_settings, as the verdict cache uses).
std::string request_key(const Submission &s) {
  const json material = {
      {"task", s.task->id}, {"text", s.text}, {"settings", evaluator::verdict_settings(s.settings)}};
  return s.task->id + " " + util::fnv1a64_hex(material.dump()) + " " + util::fnv1a64_hex(s.text);
}

/// A GPU worker killed by a signal the evaluator did not send (its wall-clock limit is a `timeout`): the OOM
/// killer, an operator, a load test (the typed MachineFault::worker_killed). Such a verdict says what
/// happened to the machine, not to the kernel. Returns the summary of the stage it was charged to, or ""
/// when no worker was killed.
std::string worker_killed(const Verdict &v) {
  if (v.machine_fault != evaluator::MachineFault::worker_killed) return {};
  for (const auto &row : protocol::kStageTable)
    if (const evaluator::StageResult &s = v.stage(row.stage);
        s.status == Status::skipped && !s.diagnostics.empty())
      return s.summary;
  return "the GPU worker was killed from outside the evaluator";
}

}  // namespace

struct VerdictService::Evaluation {
  enum class State { queued, running, done, error, expired };
  std::string key;
  const tasks::Task *task = nullptr;
  std::string text;
  evaluator::EvaluatorSettings settings;
  Clock::time_point submitted, started, finished;
  Clock::time_point deadline;  ///< the latest deadline of its requests
  State state = State::queued;
  json verdict;          ///< Verdict::to_json (done)
  json reward;           ///< reward_of (done)
  bool reusable = true;  ///< false: later submissions of the same request evaluate it again (worker_killed)
  std::vector<std::shared_ptr<Evaluation>>
      followers;      ///< the same kernel in other text, waiting for this one
  std::string error;  ///< what was thrown (error): a bug, reported, not a verdict
  std::vector<std::string> request_ids;
  std::vector<std::function<void()>> on_final;
};

struct VerdictService::Request {
  std::string id;
  std::shared_ptr<Evaluation> evaluation;
  Clock::time_point submitted, deadline;
  double deadline_s = 0;
  bool deduplicated = false;
  bool delivered = false;
};

VerdictService::VerdictService(ServiceOptions options, std::vector<tasks::Task> tasks,
                               std::shared_ptr<const agent::PromptBuilder> prompts, json environment)
    : options_(std::move(options)),
      tasks_(std::move(tasks)),
      prompts_(std::move(prompts)),
      environment_(std::move(environment)),
      cache_(std::make_shared<evaluator::VerdictCache>(environment_)),
      started_(Clock::now()),
      started_wall_(std::chrono::system_clock::now()) {
  std::random_device rd;
  id_prefix_ = options_.id_prefix.empty() ? fmt::format("{:08x}", rd())
                                          : fmt::format("{}.{:08x}", options_.id_prefix, rd());
  const int n = std::max(1, options_.workers);
  for (int i = 0; i < n; ++i) threads_.emplace_back([this] { worker_loop(); });
}

VerdictService::~VerdictService() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  work_ready_.notify_all();
  for (auto &t : threads_) t.join();
}

util::Expected<Accepted, Refusal> VerdictService::submit(std::vector<Submission> batch) {
  const Clock::time_point now = Clock::now();
  std::vector<std::string> keys;
  keys.reserve(batch.size());
  for (const auto &s : batch) keys.push_back(request_key(s));
  std::vector<std::function<void()>> none;
  std::lock_guard lock(mutex_);
  if (draining_) return util::unexpected(Refusal{Refusal::Kind::draining, 5, "the service is shutting down"});
  // A finished evaluation whose requests all expired before it ran has no verdict: it runs again.
  const auto usable = [&](const std::string &key) {
    auto it = by_key_.find(key);
    return it != by_key_.end() && it->second->state != Evaluation::State::expired &&
           it->second->state != Evaluation::State::error && it->second->reusable;
  };
  std::size_t fresh = 0;
  {
    std::vector<std::string> seen;
    for (const auto &k : keys)
      if (!usable(k) && std::find(seen.begin(), seen.end(), k) == seen.end()) {
        seen.push_back(k);
        ++fresh;
      }
  }
  if (queue_.size() + fresh > options_.max_queue)
    return util::unexpected(
        Refusal{Refusal::Kind::queue_full, retry_after_locked(),
                fmt::format("the queue is full ({} of {} evaluations waiting; this submission needs {} more)",
                            queue_.size(), options_.max_queue, fresh)});
  Accepted accepted;
  for (std::size_t i = 0; i < batch.size(); ++i) {
    auto &s = batch[i];
    auto r = std::make_shared<Request>();
    r->id = fmt::format("v{}-{}", id_prefix_, next_id_++);
    r->submitted = now;
    r->deadline_s = s.deadline_s;
    r->deadline = now + seconds(s.deadline_s);
    std::shared_ptr<Evaluation> e;
    if (usable(keys[i])) {
      e = by_key_[keys[i]];
      r->deduplicated = true;
      ++deduplicated_;
      if (e->state == Evaluation::State::queued) e->deadline = std::max(e->deadline, r->deadline);
    } else {
      e = std::make_shared<Evaluation>();
      e->key = keys[i];
      e->task = s.task;
      e->text = std::move(s.text);
      e->settings = std::move(s.settings);
      e->submitted = now;
      e->deadline = r->deadline;
      by_key_[keys[i]] = e;
      queue_.push_back(e);
    }
    e->request_ids.push_back(r->id);
    r->evaluation = e;
    const bool already_final = e->state == Evaluation::State::done;
    requests_[r->id] = r;
    if (already_final) finished_order_.push_back(r->id);
    accepted.ids.push_back(r->id);
    accepted.deduplicated.push_back(r->deduplicated);
    ++accepted_;
    ++undelivered_;
  }
  while (finished_order_.size() > options_.max_retained) retain(finished_order_.front());
  work_ready_.notify_all();
  return accepted;
}

void VerdictService::retain(const std::string &id) {
  // Forget the oldest finished request (mutex held).
  finished_order_.pop_front();
  auto it = requests_.find(id);
  if (it == requests_.end()) return;
  if (!it->second->delivered) --undelivered_;
  auto e = it->second->evaluation;
  requests_.erase(it);
  std::erase(e->request_ids, id);
  if (e->request_ids.empty()) {
    auto k = by_key_.find(e->key);
    if (k != by_key_.end() && k->second == e) by_key_.erase(k);
  }
}

double VerdictService::retry_after_locked() const {
  const double mean = finished_ > 0 ? evaluation_seconds_total_ / static_cast<double>(finished_) : 2.0;
  const double wait = mean * static_cast<double>(queue_.size()) / std::max(1, options_.workers) / 2;
  return std::clamp(std::ceil(wait), 1.0, 60.0);
}

std::shared_ptr<VerdictService::Evaluation> VerdictService::next_evaluation() {
  for (;;) {
    std::unique_lock lock(mutex_);
    work_ready_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) return nullptr;  // stopping, nothing left
    std::shared_ptr<Evaluation> e = queue_.front();
    queue_.pop_front();
    const Clock::time_point now = Clock::now();
    if (now < e->deadline) {
      e->state = Evaluation::State::running;
      e->started = now;
      ++running_;
      return e;
    }
    // Every request of it has had its timeout answer already: nothing waits for this verdict.
    e->state = Evaluation::State::expired;
    e->finished = now;
    ++expired_;
    for (const auto &id : e->request_ids) finished_order_.push_back(id);
    auto callbacks = std::move(e->on_final);
    lock.unlock();
    for (auto &cb : callbacks) cb();
  }
}

void VerdictService::evaluate_one(const std::shared_ptr<Evaluation> &e, Outcome &out) {
  {
    std::lock_guard lock(mutex_);
    out.cache = cache_;
  }
  // Parsed once: the cache key and the evaluation both take it.
  evaluator::ParsedCandidate parsed = evaluator::parse_candidate(*e->task, e->text, e->settings);
  out.kernel_key = out.cache->key(*e->task, parsed, e->settings);
  if (std::optional<Verdict> hit = out.kernel_key ? out.cache->get(*out.kernel_key) : std::nullopt) {
    out.verdict = std::move(*hit);
    std::lock_guard lock(mutex_);
    ++cache_hits_;
    return;
  }
  if (out.kernel_key) {
    // The same kernel in other text being evaluated now: wait for its verdict instead of evaluating it
    // twice (this thread goes on with the queue; the leader finishes this one).
    std::lock_guard lock(mutex_);
    auto [it, fresh] = evaluating_.try_emplace(*out.kernel_key, e);
    if (!fresh) {
      it->second->followers.push_back(e);
      ++kernel_shared_;
      out.following = true;
      return;
    }
    out.leader = true;
  }
  out.verdict = evaluator::evaluate(*e->task, std::move(parsed), e->settings);
  // A worker killed from outside is no verdict on the kernel: evaluated once more, and when that happens
  // again the answer says so but is neither cached nor shared with later submissions.
  if (const std::string killed = worker_killed(out.verdict); !killed.empty() && Clock::now() < e->deadline) {
    out.verdict = evaluator::evaluate(*e->task, e->text, e->settings);
    out.verdict.profile["service_retry"] = "evaluated again: " + killed;
  }
  if (!worker_killed(out.verdict).empty()) {
    std::lock_guard lock(mutex_);
    e->reusable = false;
  } else if (out.kernel_key) {
    out.cache->put(*out.kernel_key, out.verdict, fmt::format("request {}", e->request_ids.front()));
  }
}

void VerdictService::release_followers(const std::shared_ptr<Evaluation> &e, const Outcome &out) {
  std::vector<std::shared_ptr<Evaluation>> followers;
  {
    std::lock_guard lock(mutex_);
    evaluating_.erase(*out.kernel_key);
    followers = std::move(e->followers);
  }
  // Those that waited get the cached verdict; when there is none (an error, a killed worker, a verdict the
  // machine made) they go back to the front of the queue and are evaluated themselves.
  for (auto &f : followers) {
    if (std::optional<Verdict> v = out.cache->get(*out.kernel_key)) {
      {
        std::lock_guard lock(mutex_);
        ++cache_hits_;
      }
      finish(f, std::move(*v), {});
    } else {
      {
        std::lock_guard lock(mutex_);
        f->state = Evaluation::State::queued;
        --running_;
        queue_.push_front(f);
      }
      work_ready_.notify_one();
    }
  }
}

void VerdictService::worker_loop() {
  while (std::shared_ptr<Evaluation> e = next_evaluation()) {
    Outcome out;
    std::string error;
    try {
      evaluate_one(e, out);  // filled as far as it got: a leader that threw still releases its followers
    } catch (const std::exception &ex) {
      error = ex.what();
      fmt::print(stderr, "ptxbench serve: internal error evaluating {} for task {}: {}\n",
                 e->request_ids.front(), e->task->id, error);
    }
    if (out.following) continue;  // the leader of its kernel finishes it
    // The leader's verdict first, so that its followers find it in the cache.
    finish(e, std::move(out.verdict), std::move(error));
    if (out.leader) release_followers(e, out);
  }
}

void VerdictService::finish(const std::shared_ptr<Evaluation> &e, Verdict verdict, std::string error) {
  json verdict_json, reward;
  if (error.empty()) {
    std::string feedback;
    try {
      if (prompts_) feedback = prompts_->feedback(*e->task, verdict);
    } catch (const std::exception &ex) {
      feedback = fmt::format("(no feedback: {})", ex.what());
    }
    verdict_json = verdict.to_json();
    reward = reward_of(verdict, feedback, options_.reward);
  }
  std::vector<std::function<void()>> callbacks;
  {
    std::lock_guard lock(mutex_);
    const Clock::time_point now = Clock::now();
    e->finished = now;
    e->state = error.empty() ? Evaluation::State::done : Evaluation::State::error;
    e->verdict = std::move(verdict_json);
    e->reward = std::move(reward);
    e->error = std::move(error);
    e->text.clear();
    e->text.shrink_to_fit();
    --running_;
    ++finished_;
    if (!e->error.empty()) ++errors_;
    evaluation_seconds_total_ += seconds_between(e->started, now);
    finished_times_.push_back(now);
    while (!finished_times_.empty() && now - finished_times_.front() > std::chrono::hours(1))
      finished_times_.pop_front();
    for (const auto &id : e->request_ids) finished_order_.push_back(id);
    while (finished_order_.size() > options_.max_retained) retain(finished_order_.front());
    // Bound the kernel-level cache too: start a new one when it holds as many verdicts as are retained.
    if (cache_->size() > options_.max_retained)
      cache_ = std::make_shared<evaluator::VerdictCache>(environment_);
    callbacks = std::move(e->on_final);
  }
  for (auto &cb : callbacks) cb();
}

namespace {

double unix_seconds(std::chrono::system_clock::time_point wall_start, Clock::time_point start,
                    Clock::time_point t) {
  const auto wall = wall_start + std::chrono::duration_cast<std::chrono::system_clock::duration>(t - start);
  return std::chrono::duration<double>(wall.time_since_epoch()).count();
}

}  // namespace

json VerdictService::request_json(const Request &r, Clock::time_point now) const {
  const Evaluation &e = *r.evaluation;
  json j = {{"id", r.id},
            {"task", e.task->id},
            {"deduplicated", r.deduplicated},
            {"submitted_at", unix_seconds(started_wall_, started_, r.submitted)},
            {"deadline_at", unix_seconds(started_wall_, started_, r.deadline)},
            {"deadline_seconds", r.deadline_s},
            {"verdict", nullptr},
            {"reward", nullptr},
            {"error", nullptr}};
  const bool finished = e.state == Evaluation::State::done || e.state == Evaluation::State::error ||
                        e.state == Evaluation::State::expired;
  const bool in_time = finished && e.state != Evaluation::State::expired && e.finished <= r.deadline;
  std::string state;
  if (in_time) {
    state = e.state == Evaluation::State::done ? "done" : "error";
    j["verdict"] = e.state == Evaluation::State::done ? e.verdict : json(nullptr);
    j["reward"] = e.state == Evaluation::State::done ? e.reward : json(nullptr);
    if (e.state == Evaluation::State::error) j["error"] = e.error;
    j["evaluation_seconds"] = seconds_between(e.started, e.finished);
    j["queued_seconds"] = seconds_between(e.submitted, e.started);
  } else if (now >= r.deadline || finished) {
    // The deadline passed before a verdict: the service's timeout verdict, never a longer wait.
    state = "timeout";
    const char *where = e.state == Evaluation::State::queued    ? "still queued"
                        : e.state == Evaluation::State::running ? "still running"
                        : e.state == Evaluation::State::expired
                            ? "never started (its deadline passed in the queue)"
                            : "finished after it";
    const std::string reason = fmt::format(
        "no verdict within the request's deadline of {:g} s (the evaluation was {})", r.deadline_s, where);
    Verdict v;
    v.task_id = e.task->id;
    for (const auto &row : protocol::kStageTable)
      if (row.side == protocol::StageSide::cpu) v.stage(row.stage).summary = reason;
    v.skip_gpu_stages(reason);
    v.status = Status::timeout;
    v.settings = evaluator::verdict_settings(e.settings);
    j["verdict"] = v.to_json();
    j["reward"] = reward_of(v, reason, options_.reward, true);
  } else {
    state = e.state == Evaluation::State::queued ? "queued" : "running";
  }
  j["state"] = state;
  j["final"] = state == "done" || state == "timeout" || state == "error";
  j["waited_seconds"] = seconds_between(r.submitted, now);
  return j;
}

std::optional<json> VerdictService::poll(const std::string &id) {
  std::lock_guard lock(mutex_);
  auto it = requests_.find(id);
  if (it == requests_.end()) return std::nullopt;
  json j = request_json(*it->second, Clock::now());
  if (j["final"].get<bool>() && !it->second->delivered) {
    it->second->delivered = true;
    --undelivered_;
  }
  return j;
}

std::optional<Clock::time_point> VerdictService::notify_when_final(const std::string &id,
                                                                   std::function<void()> on_final) {
  std::lock_guard lock(mutex_);
  auto it = requests_.find(id);
  if (it == requests_.end()) return std::nullopt;
  const Request &r = *it->second;
  Evaluation &e = *r.evaluation;
  const bool pending = e.state == Evaluation::State::queued || e.state == Evaluation::State::running;
  if (!pending || Clock::now() >= r.deadline) return std::nullopt;
  e.on_final.push_back(std::move(on_final));
  return r.deadline;
}

json VerdictService::queue_stats() const {
  std::lock_guard lock(mutex_);
  const Clock::time_point now = Clock::now();
  std::map<int, std::pair<int, int>> devices;  // device -> queued, running
  double oldest = 0;
  for (const auto &e : queue_) {
    ++devices[e->settings.device].first;
    oldest = std::max(oldest, seconds_between(e->submitted, now));
  }
  for (const auto &[key, e] : by_key_)
    if (e->state == Evaluation::State::running) ++devices[e->settings.device].second;
  json per_device = json::array();
  for (const auto &[d, qr] : devices)
    per_device.push_back({{"device", d}, {"queued", qr.first}, {"running", qr.second}});
  const double uptime = seconds_between(started_, now);
  return {{"queued", queue_.size()},
          {"max_queue", options_.max_queue},
          {"running", running_},
          {"workers", threads_.size()},
          {"oldest_wait_seconds", oldest},
          {"devices", per_device},
          {"accepted", accepted_},
          {"deduplicated", deduplicated_},
          {"cache_hits", cache_hits_},
          {"kernel_shared", kernel_shared_},
          {"finished", finished_},
          {"expired", expired_},
          {"errors", errors_},
          {"mean_evaluation_seconds",
           finished_ > 0 ? json(evaluation_seconds_total_ / static_cast<double>(finished_)) : json(nullptr)},
          {"verdicts_last_hour", finished_times_.size()},
          {"verdicts_per_hour", static_cast<double>(finished_) * 3600.0 / std::max(uptime, 1.0)},
          {"uptime_seconds", uptime},
          {"draining", draining_},
          {"undelivered", undelivered_}};
}

void VerdictService::begin_drain() {
  std::lock_guard lock(mutex_);
  draining_ = true;
}

bool VerdictService::draining() const {
  std::lock_guard lock(mutex_);
  return draining_;
}

bool VerdictService::idle() const {
  std::lock_guard lock(mutex_);
  return queue_.empty() && running_ == 0;
}

bool VerdictService::all_delivered() const {
  std::lock_guard lock(mutex_);
  return undelivered_ == 0;
}

std::size_t VerdictService::undelivered() const {
  std::lock_guard lock(mutex_);
  return undelivered_;
}

json task_summaries(const std::vector<tasks::Task> &tasks) {
  json out = json::array();
  for (const auto &t : tasks) {
    json targets = json::array();
    for (const auto &target : t.targets) targets.push_back(target.name);
    json workloads = json::array();
    for (const auto &w : t.workloads) workloads.push_back(w.name);
    out.push_back({{"id", t.id},
                   {"title", t.title},
                   {"family", tasks::to_string(t.family)},
                   {"arch", t.arch},
                   {"targets", targets},
                   {"workloads", workloads},
                   {"hidden_workloads", t.hidden_workloads.size()},
                   {"reference", t.reference},
                   {"tags", t.tags}});
  }
  return out;
}

}  // namespace ptxbench::serve
