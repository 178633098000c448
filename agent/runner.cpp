#include "agent/runner.hpp"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <thread>

#include <fmt/core.h>

#include "agent/conversation.hpp"
#include "agent/detail/clocks.hpp"
#include "agent/detail/progress.hpp"
#include "agent/detail/queues.hpp"
#include "agent/prompt_builder.hpp"
#include "agent/repair_selection.hpp"
#include "evaluator/verdict_cache.hpp"
#include "tasks/task.hpp"
#include "util/files.hpp"
#include "util/subprocess.hpp"

namespace ptxbench::agent {

namespace fs = std::filesystem;
using detail::thread_cpu_ns;
using Json = nlohmann::json;

// ---------------------------------------------------------------- services

nlohmann::json probe_worker(const evaluator::EvaluatorSettings &settings) {
  // The same lookup the GPU stage uses (setting, $PTXBENCH_WORKER, beside ptxbench, the build tree).
  const auto found = evaluator::find_worker_binary(settings);
  if (!found) return {{"error", "the GPU worker (ptxbench-worker) was not found"}};
  const fs::path worker = *found;
  util::ProcessSpec spec;
  spec.argv = {worker.string(), "--probe"};
  util::TempDir home("ptxbench-probe");
  spec.env = util::scrubbed_environment(home.path().string());
  spec.limits.wall_time = std::chrono::milliseconds(60'000);
  auto result = util::run_process(spec);
  if (!result) return {{"error", result.error()}};
  if (!result->ok()) {
    return {{"error", fmt::format("ptxbench-worker --probe: {}: {}", result->describe(),
                                  result->stderr_text.substr(0, 500))}};
  }
  try {
    return Json::parse(result->stdout_text);
  } catch (const Json::exception &e) {
    return {{"error", fmt::format("ptxbench-worker --probe printed no JSON: {}", e.what())}};
  }
}

RunServices RunServices::defaults() {
  RunServices s;
  s.make_client = [](const llm::EndpointConfig &c) { return llm::create_client(c); };
  s.cpu_stages = [](const tasks::Task &t, std::string_view r, const evaluator::EvaluatorSettings &st) {
    return evaluator::run_cpu_stages(t, r, st);
  };
  s.gpu_stages = [](evaluator::CompiledCandidate &c, const tasks::Task &t,
                    const evaluator::EvaluatorSettings &st) { evaluator::run_gpu_stages(c, t, st); };
  s.gpu_unavailable_reason = [](const evaluator::EvaluatorSettings &st) {
    return evaluator::gpu_unavailable_reason(st);
  };
  s.probe_environment = probe_worker;
  return s;
}

// ---------------------------------------------------------------- state

namespace {

struct TrajectoryState {
  std::size_t endpoint = 0;
  std::size_t arm = 0;  ///< index into Impl::arms (the run variant)
  const tasks::Task *task = nullptr;
  int sample = 0;
  std::string id;  ///< "<model>/<task>/<sample>", or "<model>/<variant>/<task>/<sample>" with variants
  const RepairSeed *seed = nullptr;  ///< a repairs run: the student failure this trajectory starts from
  int repair_sample = 0;             ///< which of the seed's samples (its sample index counts per task)
  int next_turn = 0;
  std::vector<Attempt> history;
  std::int64_t tokens = 0;  ///< prompt + completion so far
  bool finished = false;
  std::uint64_t order = 0;  ///< FIFO tie-break among equal turns
};

/// Later turns first: trajectories finish sooner, so a stop loses less and fewer histories are held.
struct ByTurnThenOrder {
  bool operator()(const TrajectoryState *a, const TrajectoryState *b) const {
    if (a->next_turn != b->next_turn) return a->next_turn < b->next_turn;
    return a->order > b->order;
  }
};

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

struct EndpointState {
  detail::BlockingQueue<TrajectoryState *, ByTurnThenOrder> queue;
  std::atomic<int> consecutive_failures{0};
  std::atomic<bool> dead{false};
  std::mutex mutex;
  llm::ChatError dead_error;  ///< the error that ended it, message rewritten (guarded by mutex)
};

Json messages_json(const std::vector<llm::ChatMessage> &messages) {
  Json out = Json::array();
  for (const auto &m : messages) out.push_back({{"role", m.role}, {"content", m.content}});
  return out;
}

std::string random_suffix() {
  std::random_device rd;
  return fmt::format("{:04x}", rd() & 0xffff);
}

}  // namespace

struct Runner::Impl {
  RunConfig config;
  RunServices services;
  RunOptions options;
  fs::path dir;
  std::string run_id;
  Json run_json;
  std::vector<tasks::Task> tasks;
  std::vector<Variant> arms;               ///< config.arms(): the variants, or one unnamed arm
  std::vector<PromptBuilder> arm_prompts;  ///< per arm: its templates and packs
  std::map<std::pair<std::size_t, std::string>, std::pair<std::string, std::string>>
      task_prompts;  ///< (arm, task id) -> (system, task)
  std::vector<std::unique_ptr<llm::ChatClient>> clients;
  std::vector<std::unique_ptr<EndpointState>> endpoints;
  std::deque<TrajectoryState> trajectories;
  std::unique_ptr<traces::TrajectoryWriter> writer;
  std::mutex write_mutex;
  bool write_failed = false;  ///< guarded by write_mutex

  bool gpu_enabled = false;
  std::string gpu_skip_reason;  ///< why GPU stages are skipped ("" when enabled)
  std::vector<int> gpus;
  std::unique_ptr<evaluator::VerdictCache> verdict_cache;  ///< resent identical kernels reuse their verdict
  std::mutex busy_mutex;
  std::map<int, double> gpu_busy_s;  ///< GPU ordinal -> seconds its GPU stage ran (guarded by busy_mutex)
  std::atomic<int> verdicts_made{0}, verdicts_reused{0};

  detail::BlockingQueue<JobPtr> cpu_queue;
  detail::BlockingQueue<JobPtr> gpu_queue;
  detail::BlockingQueue<JobPtr> explain_queue;  ///< verified repairs waiting for a synthesized explanation
  std::vector<RepairSeed> repair_seeds;         ///< a repairs run's seeds (config.repairs)

  std::atomic<bool> stopping{false};
  std::mutex stop_mutex;
  std::string stop_message;
  RunEnd stop_kind = RunEnd::completed;
  std::atomic<int> in_flight{0};
  std::atomic<int> unfinished{0};
  std::atomic<std::int64_t> run_tokens{0};
  std::atomic<int> turns_recorded{0};
  std::atomic<int> turns_abandoned{0};
  std::atomic<std::int64_t> orchestrator_ns{0}, client_ns{0}, evaluator_ns{0};
  std::unique_ptr<detail::ProgressDisplay> progress;
  std::atomic<int> request_failures{0};  ///< turns this session that failed for a non-model reason
  int retried_request_failures = 0;      ///< resume: failed turns sent again
  std::mutex errors_mutex;
  std::set<std::string> errors_shown;  ///< endpoint + error with digits dropped (guarded by errors_mutex)
  void show_error_once(const std::string &endpoint, const llm::ChatError &error);
  std::condition_variable wake;
  std::mutex wake_mutex;

  util::Expected<void> setup(bool resuming, const traces::LoadedRun *previous);
  void request_stop(RunEnd kind, const std::string &why);
  void request_loop(std::size_t endpoint_index);
  void cpu_loop();
  void gpu_loop(int ordinal);
  /// A resent identical kernel: its earlier verdict is recorded (reused_from names the turn) and the
  /// turn finalized, with no compile and no GPU time. False: evaluate it (its key is kept for later).
  bool reuse_verdict(JobPtr &job);
  void remember_verdict(const TurnJob &job);
  void finalize(JobPtr job);
  /// Finalizes the turn, or first asks for an explanation of a verified repair without reasoning.
  void finish_turn(JobPtr job);
  void explain_loop();
  void abandon(JobPtr job);
  void guarded(const char *stage, const std::function<void()> &body);
  std::string feedback_for(const TurnJob &job, const evaluator::Verdict *verdict) const;
  llm::ChatError dead_error_for(std::size_t endpoint);
  void notify() {
    std::lock_guard lock(wake_mutex);
    wake.notify_all();
  }
};

// ---------------------------------------------------------------- setup

namespace {

util::Expected<std::vector<tasks::Task>> select_tasks(const RunConfig &config) {
  const fs::path task_dir = config.task_dir.empty() ? tasks::default_task_dir() : config.task_dir;
  auto all = tasks::load_task_dir(task_dir);
  if (!all)
    return util::unexpected(fmt::format("cannot load tasks from {}:\n{}", task_dir.string(), all.error()));
  std::vector<tasks::Task> chosen;
  std::set<std::string> seen;
  auto add = [&](const tasks::Task &t) {
    if (seen.insert(t.id).second) chosen.push_back(t);
  };
  for (const auto &want : config.tasks) {
    if (want == "all") {
      for (const auto &t : *all) add(t);
    } else if (want == "core") {
      for (const auto &t : *all) {
        auto it = t.tags.find("suite");
        if (it != t.tags.end() && it->second == "core") add(t);
      }
    } else {
      auto it = std::find_if(all->begin(), all->end(), [&](const tasks::Task &t) { return t.id == want; });
      if (it == all->end()) {
        std::string known;
        for (const auto &t : *all) known += (known.empty() ? "" : ", ") + t.id;
        return util::unexpected(fmt::format("unknown task '{}' (in {}; known: {}, or \"core\", \"all\")",
                                            want, task_dir.string(), known));
      }
      add(*it);
    }
  }
  if (chosen.empty())
    return util::unexpected(fmt::format("the task selection matched no task in {}", task_dir.string()));
  return chosen;
}

/// Keeps the trajectories (cells) that go to config.shard (see assign_shards), in their order.
void keep_shard_cells(const RunConfig &config, std::deque<TrajectoryState> &trajectories) {
  std::vector<CellIdentity> cells;
  for (const auto &t : trajectories)
    cells.push_back(trajectory_cell(config.endpoints[t.endpoint].name, t.task->id, t.sample,
                                    config.variants.empty() ? std::string() : config.variants[t.arm].name));
  const std::vector<int> shard_of = assign_shards(cells, config.shard->count);
  std::deque<TrajectoryState> mine;
  for (std::size_t i = 0; i < trajectories.size(); ++i) {
    if (shard_of[i] == config.shard->index) mine.push_back(std::move(trajectories[i]));
  }
  trajectories = std::move(mine);
}

int count_gpus(const Json &probe) {
  for (const char *key : {"devices", "gpus"}) {
    if (probe.contains(key) && probe[key].is_array() && !probe[key].empty())
      return static_cast<int>(probe[key].size());
  }
  if (probe.contains("device_count") && probe["device_count"].is_number_integer()) {
    return std::max(1, probe["device_count"].get<int>());
  }
  return 1;
}

}  // namespace

util::Expected<std::vector<PlannedCell>> plan_cells(const RunConfig &config) {
  auto selected = select_tasks(config);
  if (!selected) return util::unexpected(selected.error());
  std::vector<PlannedCell> cells;
  std::vector<CellIdentity> identities;
  if (config.repairs) {
    // Teacher × seed × sample; a seed's samples are numbered per task, after the task's earlier seeds.
    auto seeds = load_repair_seeds(config.repairs->seeds_file, config.repairs->seeds_hash);
    if (!seeds) return util::unexpected(seeds.error());
    for (const auto &e : config.endpoints) {
      std::map<std::string, int> next_sample;
      for (const auto &seed : *seeds) {
        for (int k = 0; k < config.samples; ++k) {
          const int s = next_sample[seed.task_id]++;
          cells.push_back({fmt::format("{}/{}/{}", e.name, seed.task_id, s), 0});
          identities.push_back(trajectory_cell(e.name, seed.task_id, s));
        }
      }
    }
    if (config.shard) {
      const std::vector<int> shard_of = assign_shards(identities, config.shard->count);
      for (std::size_t i = 0; i < cells.size(); ++i) cells[i].shard = shard_of[i];
    }
    return cells;
  }
  for (const auto &e : config.endpoints) {
    for (const auto &v : config.arms()) {
      for (const auto &t : *selected) {
        for (int s = 0; s < config.samples; ++s) {
          cells.push_back({v.name.empty() ? fmt::format("{}/{}/{}", e.name, t.id, s)
                                          : fmt::format("{}/{}/{}/{}", e.name, v.name, t.id, s),
                           0});
          identities.push_back(trajectory_cell(e.name, t.id, s, v.name));
        }
      }
    }
  }
  if (config.shard) {
    const std::vector<int> shard_of = assign_shards(identities, config.shard->count);
    for (std::size_t i = 0; i < cells.size(); ++i) cells[i].shard = shard_of[i];
  }
  return cells;
}

util::Expected<void> Runner::Impl::setup(bool resuming, const traces::LoadedRun *previous) {
  // Disk-full under a file-size rlimit must be an error value (EFBIG), not a signal.
  ::signal(SIGXFSZ, SIG_IGN);
  if (auto ok = validate(config); !ok) return util::unexpected(ok.error());
  auto selected = select_tasks(config);
  if (!selected) return util::unexpected(selected.error());
  tasks = std::move(*selected);

  arms = config.arms();
  for (std::size_t a = 0; a < arms.size(); ++a) {
    const fs::path prompt_dir = config.prompt_dir_of(arms[a]);
    auto builder = PromptBuilder::load(prompt_dir.empty() ? PromptBuilder::default_dir() : prompt_dir);
    const std::string which = arms[a].name.empty() ? "" : fmt::format(" (variant '{}')", arms[a].name);
    if (!builder)
      return util::unexpected(fmt::format("cannot load prompt templates{}: {}", which, builder.error()));
    if (auto ok = builder->check_packs(arms[a].packs); !ok)
      return util::unexpected(fmt::format("variant '{}': {}", arms[a].name, ok.error()));
    const ReferenceSelection reference{arms[a].target_notes, arms[a].packs};
    for (const auto &t : tasks)
      task_prompts[{a, t.id}] = {builder->system_prompt(t, reference), builder->task_prompt(t)};
    arm_prompts.push_back(std::move(*builder));
  }

  for (const auto &e : config.endpoints) {
    auto client = services.make_client(e);
    if (!client) return util::unexpected(fmt::format("endpoint '{}': {}", e.name, client.error()));
    clients.push_back(std::move(client.value()));
    endpoints.push_back(std::make_unique<EndpointState>());
  }

  // GPU stages: where and whether.
  Json environment = Json::object();
  if (!config.evaluator.run_gpu) {
    gpu_skip_reason = "disabled by --no-gpu";
  } else {
    gpu_skip_reason = services.gpu_unavailable_reason(config.evaluator);
    if (!gpu_skip_reason.empty()) gpu_skip_reason = "no GPU: " + gpu_skip_reason;
  }
  gpu_enabled = gpu_skip_reason.empty();
  if (gpu_enabled) {
    environment = services.probe_environment ? services.probe_environment(config.evaluator) : Json::object();
    gpus = config.concurrency.gpus;
    if (gpus.empty()) {
      for (int i = 0; i < count_gpus(environment); ++i) gpus.push_back(i);
    }
  } else {
    environment["gpu"] = gpu_skip_reason;
  }
#ifdef PTXBENCH_CUDA_TOOLKIT_VERSION
  environment["cuda_toolkit_at_build"] = PTXBENCH_CUDA_TOOLKIT_VERSION;
#endif

  if (config.concurrency.compile_workers <= 0) {
    config.concurrency.compile_workers = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  }

  // Trajectories in a stable order: model, variant, task, sample.
  std::uint64_t order = 0;
  std::size_t cells_total = 0;
  if (config.repairs) {
    auto seeds = load_repair_seeds(config.repairs->seeds_file, config.repairs->seeds_hash);
    if (!seeds) return util::unexpected(seeds.error());
    repair_seeds = std::move(*seeds);
  }
  for (std::size_t e = 0; e < config.endpoints.size() && config.repairs; ++e) {
    // A repairs run: teacher × seed × sample, each starting from the seed's conversation. Samples are
    // numbered per task so that readers, which key trajectories by (model, task, sample), see each apart.
    std::map<std::string, int> next_sample;
    for (const auto &seed : repair_seeds) {
      auto task = std::find_if(tasks.begin(), tasks.end(),
                               [&](const tasks::Task &t) { return t.id == seed.task_id; });
      if (task == tasks.end())
        return util::unexpected(
            fmt::format("repair seed {}: task '{}' is not among the run's tasks", seed.id, seed.task_id));
      for (int k = 0; k < config.samples; ++k) {
        TrajectoryState st;
        st.endpoint = e;
        st.task = &*task;
        st.sample = next_sample[seed.task_id]++;
        st.seed = &seed;
        st.repair_sample = k;
        st.id = fmt::format("{}/{}/{}", config.endpoints[e].name, task->id, st.sample);
        st.order = order++;
        trajectories.push_back(std::move(st));
      }
    }
  }
  for (std::size_t e = 0; e < config.endpoints.size() && !config.repairs; ++e) {
    for (std::size_t a = 0; a < arms.size(); ++a) {
      for (const auto &t : tasks) {
        for (int s = 0; s < config.samples; ++s) {
          TrajectoryState st;
          st.endpoint = e;
          st.arm = a;
          st.task = &t;
          st.sample = s;
          st.id = config.variants.empty()
                      ? fmt::format("{}/{}/{}", config.endpoints[e].name, t.id, s)
                      : fmt::format("{}/{}/{}/{}", config.endpoints[e].name, arms[a].name, t.id, s);
          st.order = order++;
          trajectories.push_back(std::move(st));
        }
      }
    }
  }
  cells_total = trajectories.size();
  if (config.shard) keep_shard_cells(config, trajectories);

  std::vector<std::map<std::string, int>> previous_counts(config.endpoints.size());
  std::vector<int> previous_done(config.endpoints.size(), 0);
  if (resuming) {
    // Rebuild each trajectory from its records: turns 0..k-1 exactly once.
    std::map<std::string, TrajectoryState *> by_id;
    for (auto &t : trajectories) by_id[t.id] = &t;
    std::map<std::string, std::map<int, const Json *>> records;
    for (const auto &r : previous->turns) {
      const std::string id = r.value("trajectory_id", "");
      auto it = by_id.find(id);
      if (it == by_id.end()) return util::unexpected(fmt::format("record for unknown trajectory '{}'", id));
      const int turn = r.value("turn", -1);
      auto [slot, added] = records[id].emplace(turn, &r);
      if (!added) {
        // A turn that ended in a request failure is sent again by resume: the later record replaces it.
        if (slot->second->value("stop_reason", "") != "request_failed")
          return util::unexpected(
              fmt::format("trajectory '{}' has turn {} twice; the trace is damaged", id, turn));
        slot->second = &r;
      }
    }
    for (auto &[id, turns] : records) {
      TrajectoryState &t = *by_id[id];
      int expected = 0;
      for (const auto &[turn, record] : turns) {
        if (turn != expected) {
          return util::unexpected(fmt::format(
              "trajectory '{}' is missing turn {} (has turn {}); the trace is damaged", id, expected, turn));
        }
        ++expected;
        const Json &r = *record;
        const Json &resp = r.contains("response") ? r["response"] : Json();
        if (resp.is_object()) {
          const auto &usage = resp.value("usage", Json::object());
          const std::int64_t used = usage.value("prompt_tokens", std::int64_t{0}) +
                                    usage.value("completion_tokens", std::int64_t{0});
          t.tokens += used;
          run_tokens += used;
        }
        t.history.push_back({resp.is_object() ? resp.value("content", "") : "", r.value("feedback", "")});
        if (!r.value("stop_reason", "").empty()) t.finished = true;
        std::string status = "request_failed";
        if (r.contains("verdict") && r["verdict"].is_object()) status = r["verdict"].value("status", "?");
        previous_counts[t.endpoint][status] += 1;
        previous_done[t.endpoint] += 1;
      }
      t.next_turn = expected;
      if (t.finished && !turns.empty() &&
          turns.rbegin()->second->value("stop_reason", "") == "request_failed") {
        // Not the model's outcome: the endpoint failed (outage, restart, bad key since fixed). Send it again.
        t.finished = false;
        t.next_turn = expected - 1;
        t.history.pop_back();
        previous_done[t.endpoint] -= 1;
        previous_counts[t.endpoint]["request_failed"] -= 1;
        ++retried_request_failures;
      }
      if (t.finished)  // turns it will never run
        previous_done[t.endpoint] += config.turns_of(arms[t.arm]) - expected;
    }
  }

  // Run directory and run.json.
  if (!resuming) {
    run_id = config.run_id.empty() ? fmt::format("{}-{}", detail::compact_utc_now(), random_suffix())
                                   : config.run_id;
    dir = config.out_dir.empty() ? fs::path("runs") / run_id : config.out_dir;
    if (config.shard) dir /= fmt::format("shard-{}", config.shard->index);
    std::error_code ec;
    fs::create_directories(dir, ec);
    if (ec)
      return util::unexpected(
          fmt::format("cannot create the run directory {}: {}", dir.string(), ec.message()));
    if (fs::exists(dir / "trajectories.jsonl", ec)) {
      return util::unexpected(fmt::format("{} already holds a run; use `ptxbench resume {}` or another --out",
                                          dir.string(), dir.string()));
    }
    Json task_ids = Json::array();
    for (const auto &t : tasks) task_ids.push_back(t.id);
    run_json = {{"format_version", traces::kFormatVersion},
                {"run_id", run_id},
                {"created_at", detail::iso8601_utc_now()},
                {"program",
                 {{"name", "ptxbench"},
                  {"version", PTXBENCH_VERSION},
                  {"git_revision", detail::build_git_revision()}}},
                {"config", config.to_json()},
                {"tasks", task_ids},
                {"evaluator_settings", config.evaluator.to_json()},
                {"gpu_stages", gpu_enabled ? Json{{"enabled", true}, {"gpus", gpus}}
                                           : Json{{"enabled", false}, {"reason", gpu_skip_reason}}},
                {"environment", environment},
                {"resumes", Json::array()}};
    run_json["config_hash"] = config_hash(config);
    if (config.shard)
      run_json["shard"] = shard_json(*config.shard, config_hash(config), trajectories.size(), cells_total);
  } else {
    run_json["resumes"].push_back(
        {{"at", detail::iso8601_utc_now()},
         {"program_version", PTXBENCH_VERSION},
         {"git_revision", detail::build_git_revision()},
         {"gpu_stages", gpu_enabled ? Json{{"enabled", true}, {"gpus", gpus}}
                                    : Json{{"enabled", false}, {"reason", gpu_skip_reason}}},
         {"environment", environment}});
  }
  if (auto w = util::write_file_atomic(dir / "run.json", run_json.dump(2) + "\n"); !w) {
    return util::unexpected(fmt::format("cannot write {}: {}", (dir / "run.json").string(), w.error()));
  }
  verdict_cache = std::make_unique<evaluator::VerdictCache>(
      Json{{"gpu_stages", run_json.value("gpu_stages", Json())}, {"environment", environment}});
  writer = std::make_unique<traces::TrajectoryWriter>(dir);

  // Progress: totals per model.
  std::vector<std::string> names;
  std::vector<int> totals;
  for (const auto &e : config.endpoints) {
    names.push_back(e.name);
    totals.push_back(0);
  }
  for (const auto &t : trajectories) totals[t.endpoint] += config.turns_of(arms[t.arm]);
  auto style = detail::ProgressDisplay::Style::lines;
  switch (options.progress) {
    case ProgressMode::automatic:
      style = ::isatty(::fileno(options.log)) ? detail::ProgressDisplay::Style::redraw
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
  progress = std::make_unique<detail::ProgressDisplay>(style, options.log, names, totals);
  for (std::size_t e = 0; e < names.size(); ++e)
    progress->add_previous(e, previous_done[e], previous_counts[e]);
  return {};
}

// ---------------------------------------------------------------- the loop

void Runner::Impl::request_stop(RunEnd kind, const std::string &why) {
  {
    std::lock_guard lock(stop_mutex);
    if (stopping.exchange(true)) return;
    stop_kind = kind;
    stop_message = why;
  }
  for (auto &e : endpoints) e->queue.close(/*discard=*/true);
  for (auto &c : clients) c->cancel();
  notify();
}

void Runner::Impl::guarded(const char *stage, const std::function<void()> &body) {
  // A bug in a stage must not take the other trajectories down silently: stop
  // the run (resumable) and say what happened.
  try {
    body();
  } catch (const std::exception &e) {
    request_stop(RunEnd::interrupted,
                 fmt::format("internal error in the {} stage: {} (please report; the run is "
                             "resumable)",
                             stage, e.what()));
  }
}

void Runner::Impl::show_error_once(const std::string &endpoint, const llm::ChatError &error) {
  // Byte counts and timings differ between otherwise identical failures: they do not make an error new.
  std::string key = endpoint + "\n" + llm::to_string(error.kind) + "\n";
  for (char c : error.message)
    if (c < '0' || c > '9') key.push_back(c);
  {
    std::lock_guard lock(errors_mutex);
    if (!errors_shown.insert(key).second) return;
  }
  progress->message(fmt::format("error: endpoint '{}': {} (shown once; every failed turn is in the trace)",
                                endpoint, error.message));
}

llm::ChatError Runner::Impl::dead_error_for(std::size_t endpoint) {
  std::lock_guard lock(endpoints[endpoint]->mutex);
  return endpoints[endpoint]->dead_error;
}

void Runner::Impl::abandon(JobPtr job) {
  (void)job;
  ++turns_abandoned;
  --in_flight;
  notify();
}

void Runner::Impl::request_loop(std::size_t e) {
  EndpointState &ep = *endpoints[e];
  const llm::EndpointConfig &ec = config.endpoints[e];
  while (auto next = ep.queue.pop()) {
    TrajectoryState &t = **next;
    ++in_flight;
    if (stopping) {
      --in_flight;
      notify();
      continue;
    }
    guarded("request", [&] {
      const std::int64_t c0 = thread_cpu_ns();
      auto job = std::make_unique<TurnJob>();
      job->trajectory = &t;
      job->turn = t.next_turn;
      job->started_at = detail::iso8601_utc_now();
      const auto &[system, task] = task_prompts.at({t.arm, t.task->id});
      job->messages =
          t.seed ? build_seeded_messages(config.history_of(arms[t.arm]), t.seed->conversation, t.history)
                 : build_messages(config.history_of(arms[t.arm]), system, task, t.history);
      if (ep.dead) {
        job->error = dead_error_for(e);
        job->forced_stop = "request_failed";
        job->orchestrator_ns = thread_cpu_ns() - c0;
        finalize(std::move(job));
        return;
      }
      if (config.budgets.per_run > 0 && run_tokens >= config.budgets.per_run) {
        job->error = llm::ChatError{
            llm::ChatErrorKind::budget,
            0,
            fmt::format("not sent: the run's token budget ({} tokens) is used up", config.budgets.per_run),
            0,
            {}};
        job->forced_stop = "run_budget";
        job->orchestrator_ns = thread_cpu_ns() - c0;
        finalize(std::move(job));
        return;
      }
      llm::ChatRequest request;
      request.messages = job->messages;
      request.sampling = config.sampling_of(arms[t.arm]);
      request.sampling.n = 1;
      // Samples of one trajectory set must differ: a fixed seed would make them byte-identical.
      if (request.sampling.seed) *request.sampling.seed += t.sample;
      job->seed = request.sampling.seed;
      request.task_id = t.task->id;
      request.sample_index = t.sample;
      request.turn_index = job->turn;
      const std::int64_t c1 = thread_cpu_ns();
      job->orchestrator_ns += c1 - c0;
      const auto t0 = std::chrono::steady_clock::now();
      auto result = clients[e]->complete(request);
      job->request_s = detail::seconds_since(t0);
      const std::int64_t c2 = thread_cpu_ns();
      job->client_ns = c2 - c1;
      if (!result) {
        if (result.error().kind == llm::ChatErrorKind::cancelled || stopping) {
          abandon(std::move(job));  // redone on resume
          return;
        }
        job->error = result.error();
        show_error_once(ec.name, result.error());
        const int failures = ++ep.consecutive_failures;
        if (failures >= config.concurrency.endpoint_failures_before_dead && !ep.dead) {
          std::lock_guard lock(ep.mutex);
          if (!ep.dead) {
            ep.dead_error = result.error();
            ep.dead_error.attempts = 0;
            ep.dead_error.message = fmt::format(
                "not sent: endpoint '{}' failed {} requests in a row; its remaining turns are not attempted. "
                "Last "
                "error: {}",
                ec.name, failures, result.error().message);
            ep.dead = true;
            progress->message(
                fmt::format("warning: endpoint '{}' failed {} requests in a row ({}); its remaining "
                            "trajectories are marked failed",
                            ec.name, failures, result.error().message));
          }
        }
        job->orchestrator_ns += thread_cpu_ns() - c2;
        finalize(std::move(job));
        return;
      }
      ep.consecutive_failures = 0;
      job->response = std::move(result.value());
      const auto &u = job->response->usage;
      t.tokens += u.prompt_tokens + u.completion_tokens;
      run_tokens += u.prompt_tokens + u.completion_tokens;
      job->orchestrator_ns += thread_cpu_ns() - c2;
      if (!cpu_queue.push(std::move(job))) {
        // Closed only after a stop with nothing in flight: cannot happen while we hold a turn.
        throw std::logic_error("CPU queue closed with a turn in flight");
      }
    });
  }
}

void Runner::Impl::cpu_loop() {
  while (auto next = cpu_queue.pop()) {
    JobPtr job = std::move(*next);
    guarded("compile", [&] {
      const tasks::Task &task = *job->trajectory->task;
      const auto t0 = std::chrono::steady_clock::now();
      const std::int64_t c0 = thread_cpu_ns();
      if (reuse_verdict(job)) return;
      job->compiled.emplace(services.cpu_stages(task, job->response->content, config.evaluator));
      const std::int64_t c1 = thread_cpu_ns();
      job->evaluator_ns = c1 - c0;
      job->cpu_stages_s = detail::seconds_since(t0);
      if (gpu_enabled && job->compiled->ready_for_gpu()) {
        job->orchestrator_ns += thread_cpu_ns() - c1;
        if (!gpu_queue.push(std::move(job))) throw std::logic_error("GPU queue closed with a turn in flight");
        return;
      }
      if (!gpu_enabled && job->compiled->ready_for_gpu()) {
        auto &v = job->compiled->verdict;
        for (evaluator::StageResult *s : {&v.correctness, &v.execution, &v.timing, &v.sanitizer}) {
          s->status = evaluator::Status::skipped;
          s->summary = gpu_skip_reason;
        }
        v.finalize_status();
      }
      remember_verdict(*job);
      job->orchestrator_ns += thread_cpu_ns() - c1;
      finish_turn(std::move(job));
    });
  }
}

bool Runner::Impl::reuse_verdict(JobPtr &job) {
  if (!verdict_cache || !config.reuse_verdicts) return false;
  const tasks::Task &task = *job->trajectory->task;
  job->verdict_key = verdict_cache->key(task, job->response->content, config.evaluator).value_or("");
  if (job->verdict_key.empty()) return false;
  auto hit = verdict_cache->get(job->verdict_key);
  if (!hit) return false;
  // The candidate as sent (for the record); the verdict as made the first time.
  evaluator::CompiledCandidate c;
  if (auto parsed = evaluator::parse_response(job->response->content, config.evaluator.parse))
    c.response = std::move(*parsed);
  c.verdict = std::move(*hit);
  job->compiled.emplace(std::move(c));
  ++verdicts_reused;
  finish_turn(std::move(job));
  return true;
}

void Runner::Impl::remember_verdict(const TurnJob &job) {
  ++verdicts_made;
  if (!verdict_cache || job.verdict_key.empty() || !job.compiled) return;
  verdict_cache->put(job.verdict_key, job.compiled->verdict,
                     fmt::format("{} turn {}", job.trajectory->id, job.turn));
}

void Runner::Impl::gpu_loop(int ordinal) {
  evaluator::EvaluatorSettings settings = config.evaluator;
  settings.device = ordinal;
  while (auto next = gpu_queue.pop()) {
    JobPtr job = std::move(*next);
    guarded("GPU", [&] {
      const auto t0 = std::chrono::steady_clock::now();
      services.gpu_stages(*job->compiled, *job->trajectory->task, settings);
      job->gpu_stage_s = detail::seconds_since(t0);
      job->gpu = ordinal;
      {
        std::lock_guard lock(busy_mutex);
        gpu_busy_s[ordinal] += job->gpu_stage_s;
      }
      remember_verdict(*job);
      finish_turn(std::move(job));
    });
  }
}

void Runner::Impl::finish_turn(JobPtr job) {
  const evaluator::Verdict *verdict = job->compiled ? &job->compiled->verdict : nullptr;
  const bool wants_explanation = config.repairs && config.repairs->synthesize_reasoning &&
                                 job->trajectory->seed && job->response && verdict != nullptr &&
                                 config.stop.reached(verdict->axes) &&
                                 job->response->reasoning.find_first_not_of(" \t\r\n") == std::string::npos;
  if (!wants_explanation) {
    finalize(std::move(job));
    return;
  }
  // The explanation is one more request: it waits on the request side, not on a CPU or GPU thread.
  if (!explain_queue.push(std::move(job)))
    throw std::logic_error("explanation queue closed with a turn in flight");
}

void Runner::Impl::explain_loop() {
  while (auto next = explain_queue.pop()) {
    JobPtr job = std::move(*next);
    guarded("explanation", [&] {
      TrajectoryState &t = *job->trajectory;
      if (stopping) {
        abandon(std::move(job));  // redone on resume
        return;
      }
      llm::ChatRequest request;
      request.messages = explanation_request(*t.seed, job->response->content, &job->explanation_instruction);
      request.sampling = config.sampling_of(arms[t.arm]);
      request.sampling.n = 1;
      if (request.sampling.seed) *request.sampling.seed += t.sample;
      request.task_id = t.task->id;
      request.sample_index = t.sample;
      request.turn_index = job->turn;
      const std::int64_t c0 = thread_cpu_ns();
      auto result = clients[t.endpoint]->complete(request);
      job->client_ns += thread_cpu_ns() - c0;
      if (!result) {
        if (result.error().kind == llm::ChatErrorKind::cancelled || stopping) {
          abandon(std::move(job));
          return;
        }
        job->explanation_error = result.error();  // the repair stands; it is kept without reasoning
      } else {
        const auto &u = result->usage;
        t.tokens += u.prompt_tokens + u.completion_tokens;
        run_tokens += u.prompt_tokens + u.completion_tokens;
        job->explanation = std::move(*result);
      }
      finalize(std::move(job));
    });
  }
}

std::string Runner::Impl::feedback_for(const TurnJob &job, const evaluator::Verdict *verdict) const {
  const auto &resp = *job.response;
  // A cut-off answer is the model's outcome, but "no kernel" or "bad manifest" would send it looking for
  // a mistake it did not make.
  const auto max_tokens = config.sampling_of(arms[job.trajectory->arm]).max_tokens;
  if (resp.finish_reason == "length" &&
      (verdict == nullptr || verdict->parse.status != evaluator::Status::ok)) {
    return arm_prompts[job.trajectory->arm].feedback_unusable_response(fmt::format(
        "your answer was cut off at max_tokens ({}) before it was complete; send a shorter one: the kernel "
        "and the manifest, with little prose around them",
        max_tokens ? fmt::format("{} tokens", *max_tokens) : std::string("the server's limit")));
  }
  const PromptBuilder &prompts = arm_prompts[job.trajectory->arm];
  if (verdict == nullptr) return prompts.feedback_unusable_response("the response could not be evaluated");
  const auto &c = *job.compiled;
  const FeedbackSources sources{c.response.kernel_source, c.ptx,
                                c.response.language == evaluator::KernelLanguage::cuda};
  return prompts.feedback(*job.trajectory->task, *verdict, &sources);
}

void Runner::Impl::finalize(JobPtr job) {
  const std::int64_t c0 = thread_cpu_ns();
  TrajectoryState &t = *job->trajectory;
  const evaluator::Verdict *verdict = job->compiled ? &job->compiled->verdict : nullptr;

  std::string stop;
  if (job->error) {
    stop = job->forced_stop.empty() ? "request_failed" : job->forced_stop;
  } else if (verdict != nullptr && config.stop.reached(verdict->axes)) {
    stop = "target_reached";
  } else if (job->turn + 1 >= config.turns_of(arms[t.arm])) {
    stop = "turn_limit";
  } else if (config.budgets.per_trajectory > 0 && t.tokens >= config.budgets.per_trajectory) {
    stop = "token_budget";
  } else if (config.budgets.per_run > 0 && run_tokens >= config.budgets.per_run) {
    stop = "run_budget";
  }
  const std::string feedback = stop.empty() ? feedback_for(*job, verdict) : std::string();

  Json record;
  record["format_version"] = traces::kFormatVersion;
  record["run_id"] = run_id;
  record["model"] = config.endpoints[t.endpoint].name;
  record["task_id"] = t.task->id;
  record["sample"] = t.sample;
  record["turn"] = job->turn;
  record["trajectory_id"] = t.id;
  const Variant &arm = arms[t.arm];
  record["variant"] = config.variants.empty() ? Json(nullptr) : Json(arm.name);
  Json packs = Json::array();
  for (const auto &name : arm.packs) packs.push_back(arm_prompts[t.arm].packs().at(name).identity());
  record["reference"] = {{"target_notes", arm.target_notes}, {"packs", packs}};
  record["messages"] = messages_json(job->messages);
  if (job->response) {
    const auto &r = *job->response;
    record["response"] = {{"content", r.content},
                          {"reasoning", r.reasoning},
                          {"finish_reason", r.finish_reason},
                          {"usage",
                           {{"prompt_tokens", r.usage.prompt_tokens},
                            {"completion_tokens", r.usage.completion_tokens},
                            {"reasoning_tokens", r.usage.reasoning_tokens},
                            {"estimated", r.usage.estimated}}},
                          {"attempts", r.attempts},
                          {"latency_seconds", r.latency_seconds}};
    if (r.usage.estimated) record["response"]["usage"]["estimate_reason"] = r.usage.estimate_reason;
  } else {
    record["response"] = nullptr;
  }
  if (job->error) {
    record["request_error"] = {{"kind", llm::to_string(job->error->kind)},
                               {"http_status", job->error->http_status},
                               {"message", job->error->message},
                               {"attempts", job->error->attempts}};
  } else {
    record["request_error"] = nullptr;
  }
  std::string status = job->error ? (job->forced_stop.empty() ? "request_failed" : "not_sent") : "?";
  if (verdict != nullptr) {
    status = std::string(evaluator::to_string(verdict->status));
    if (verdict->parse.status == evaluator::Status::ok) {
      const auto &p = job->compiled->response;
      record["candidate"] = {{"language", p.language == evaluator::KernelLanguage::ptx ? "ptx" : "cuda"},
                             {"kernel_source", p.kernel_source},
                             {"manifest_text", p.manifest_text},
                             {"kernel_hash", verdict->kernel_hash}};
    } else {
      record["candidate"] = nullptr;
    }
    record["verdict"] = verdict->to_json();
  } else {
    record["candidate"] = nullptr;
    record["verdict"] = nullptr;
  }
  record["feedback"] = feedback;
  record["stop_reason"] = stop;
  if (t.seed) {
    const RepairSeed &seed = *t.seed;
    record["repair_of"] = {{"seed_id", seed.id},
                           {"student_run_id", seed.student_run_id},
                           {"student_run_dir", seed.student_run_dir},
                           {"student_model", seed.student_model},
                           {"student_trajectory_id", seed.student_trajectory_id},
                           {"student_turn", seed.student_turn},
                           {"category", seed.category},
                           {"feedback_source", seed.feedback_source},
                           {"seed_messages", seed.conversation.size()},
                           {"seed_sample", t.repair_sample}};
  }
  if (job->explanation) {
    const auto &x = *job->explanation;
    record["synthesized_reasoning"] = {{"content", x.content},
                                       {"instruction", job->explanation_instruction},
                                       {"finish_reason", x.finish_reason},
                                       {"usage",
                                        {{"prompt_tokens", x.usage.prompt_tokens},
                                         {"completion_tokens", x.usage.completion_tokens},
                                         {"estimated", x.usage.estimated}}},
                                       {"error", nullptr}};
  } else if (job->explanation_error) {
    record["synthesized_reasoning"] = {{"content", nullptr},
                                       {"instruction", job->explanation_instruction},
                                       {"error", job->explanation_error->message}};
  }
  record["gpu"] = job->gpu ? Json(*job->gpu) : Json(nullptr);
  record["seed"] = job->seed ? Json(*job->seed) : Json(nullptr);
  const std::int64_t own_ns = job->orchestrator_ns + (thread_cpu_ns() - c0);
  record["timings"] = {{"request_s", job->request_s},
                       {"cpu_stages_s", job->cpu_stages_s},
                       {"gpu_stage_s", job->gpu_stage_s},
                       {"orchestrator_cpu_ms", static_cast<double>(own_ns) / 1e6},
                       {"client_cpu_ms", static_cast<double>(job->client_ns) / 1e6},
                       {"evaluator_cpu_ms", static_cast<double>(job->evaluator_ns) / 1e6}};
  // Time to first token: on a streamed request, the first streamed byte of the successful attempt
  // (servers send the first token in the first event); a plain request's first byte is the whole answer.
  record["timings"]["ttft_s"] = job->response && config.endpoints[t.endpoint].stream
                                    ? Json(job->response->first_byte_seconds)
                                    : Json(nullptr);
  record["started_at"] = job->started_at;
  record["finished_at"] = detail::iso8601_utc_now();

  bool written = false;
  {
    std::lock_guard lock(write_mutex);
    if (!write_failed) {
      auto ok = writer->append(record);
      if (ok) {
        written = true;
      } else {
        write_failed = true;
        request_stop(
            RunEnd::write_failed,
            fmt::format("{}\nThe run stopped; free space (or raise the file size limit) and run `ptxbench "
                        "resume {}`.",
                        ok.error(), dir.string()));
      }
    }
  }
  client_ns += job->client_ns;
  evaluator_ns += job->evaluator_ns;
  if (!written) {
    orchestrator_ns += job->orchestrator_ns + (thread_cpu_ns() - c0);
    abandon(std::move(job));
    return;
  }
  ++turns_recorded;
  if (stop == "request_failed") ++request_failures;
  const int skipped_turns = stop.empty() ? 0 : config.turns_of(arms[t.arm]) - job->turn - 1;
  progress->on_turn(t.endpoint, status, skipped_turns,
                    fmt::format("[{}] {} turn {}: {}{}", detail::iso8601_utc_now().substr(11, 8), t.id,
                                job->turn, status, stop.empty() ? "" : " (" + stop + ")"));
  if (stop.empty()) {
    t.history.push_back({job->response->content, feedback});
    t.next_turn = job->turn + 1;
    endpoints[t.endpoint]->queue.push(&t);  // refused after a stop: the trajectory waits for resume
  } else {
    t.finished = true;
    --unfinished;
  }
  // The run's total includes the append and this bookkeeping (the record could not: it was already written).
  orchestrator_ns += job->orchestrator_ns + (thread_cpu_ns() - c0);
  --in_flight;
  notify();
}

// ---------------------------------------------------------------- Runner

Runner::Runner(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Runner::~Runner() = default;
const fs::path &Runner::dir() const {
  return impl_->dir;
}
void Runner::request_stop(const std::string &why) {
  impl_->request_stop(RunEnd::interrupted, why);
}

util::Expected<std::unique_ptr<Runner>> Runner::start(RunConfig config, RunServices services,
                                                      RunOptions options) {
  auto impl = std::make_unique<Impl>();
  impl->config = std::move(config);
  impl->services = std::move(services);
  impl->options = options;
  if (auto ok = impl->setup(false, nullptr); !ok) return util::unexpected(ok.error());
  return std::unique_ptr<Runner>(new Runner(std::move(impl)));
}

util::Expected<std::unique_ptr<Runner>> Runner::resume(const fs::path &dir, RunServices services,
                                                       RunOptions options) {
  auto loaded = traces::load_run(dir);
  if (!loaded) return util::unexpected(loaded.error());
  if (!loaded->run.contains("config") || !loaded->run.contains("tasks")) {
    return util::unexpected(
        fmt::format("{}: run.json is missing or has no config; cannot resume", dir.string()));
  }
  auto config = parse_run_config(loaded->run["config"], (dir / "run.json").string() + ": config", dir);
  if (!config) return util::unexpected(config.error());
  config->tasks = loaded->run["tasks"].get<std::vector<std::string>>();
  config->out_dir = dir;
  config->shard = shard_spec_from_run_json(loaded->run);
  // A cut-short last line (killed mid-write) must go before we append.
  auto cut = traces::truncate_partial_tail(dir / "trajectories.jsonl");
  if (!cut) return util::unexpected(cut.error());

  auto impl = std::make_unique<Impl>();
  impl->config = std::move(*config);
  impl->services = std::move(services);
  impl->options = options;
  impl->dir = dir;
  impl->run_id = loaded->run.value("run_id", "");
  impl->run_json = loaded->run;
  if (!impl->run_json.contains("resumes") || !impl->run_json["resumes"].is_array())
    impl->run_json["resumes"] = Json::array();
  if (auto ok = impl->setup(true, &*loaded); !ok) return util::unexpected(ok.error());
  for (const auto &w : loaded->warnings) impl->progress->message("note: " + w);
  if (impl->retried_request_failures > 0)
    impl->progress->message(fmt::format("resume: retrying {} turn(s) that ended in a request failure",
                                        impl->retried_request_failures));
  return std::unique_ptr<Runner>(new Runner(std::move(impl)));
}

RunResult Runner::run() {
  Impl &m = *impl_;
  const auto t0 = std::chrono::steady_clock::now();
  for (auto &t : m.trajectories) {
    if (t.finished) continue;
    ++m.unfinished;
    m.endpoints[t.endpoint]->queue.push(&t);
  }
  std::vector<std::thread> threads;
  if (m.unfinished > 0) {
    for (std::size_t e = 0; e < m.endpoints.size(); ++e) {
      int pending = 0;
      for (const auto &t : m.trajectories) pending += (!t.finished && t.endpoint == e) ? 1 : 0;
      const int n = std::min(effective_max_in_flight(m.config, m.config.endpoints[e].max_in_flight),
                             std::max(1, pending));
      for (int i = 0; i < n; ++i) threads.emplace_back([&m, e] { m.request_loop(e); });
    }
    for (int i = 0; i < m.config.concurrency.compile_workers; ++i)
      threads.emplace_back([&m] { m.cpu_loop(); });
    if (m.gpu_enabled) {
      for (int g : m.gpus) threads.emplace_back([&m, g] { m.gpu_loop(g); });
    }
    if (m.config.repairs && m.config.repairs->synthesize_reasoning) {
      int n = 0;
      for (const auto &e : m.config.endpoints) n += effective_max_in_flight(m.config, e.max_in_flight);
      for (int i = 0; i < std::max(1, n); ++i) threads.emplace_back([&m] { m.explain_loop(); });
    }
  }

  // Supervise: Ctrl-C, progress, the end.
  int interrupts_seen = 0;
  while (true) {
    {
      std::unique_lock lock(m.wake_mutex);
      m.wake.wait_for(lock, std::chrono::milliseconds(100));
    }
    if (m.options.interrupts != nullptr) {
      const int n = m.options.interrupts->load();
      if (n > interrupts_seen) {
        interrupts_seen = n;
        m.progress->message("interrupted: finishing the turns in flight (Ctrl-C again to quit at once)");
        m.request_stop(RunEnd::interrupted, "interrupted by Ctrl-C");
      }
    }
    m.progress->tick();
    if (m.unfinished == 0 || (m.stopping && m.in_flight == 0)) break;
  }
  for (auto &e : m.endpoints) e->queue.close(true);
  m.cpu_queue.close();
  m.gpu_queue.close();
  m.explain_queue.close();
  for (auto &th : threads) th.join();
  m.progress->finish();

  RunResult result;
  result.dir = m.dir;
  result.end = m.stopping ? m.stop_kind : RunEnd::completed;
  if (m.stopping && m.unfinished == 0 && m.stop_kind == RunEnd::interrupted) result.end = RunEnd::completed;
  result.message = m.stop_message;
  result.turns_recorded = m.turns_recorded;
  result.turns_abandoned = m.turns_abandoned;
  result.request_failures = m.request_failures;
  result.retried_request_failures = m.retried_request_failures;
  result.orchestrator_cpu_ms = static_cast<double>(m.orchestrator_ns.load()) / 1e6;
  result.client_cpu_ms = static_cast<double>(m.client_ns.load()) / 1e6;
  result.evaluator_cpu_ms = static_cast<double>(m.evaluator_ns.load()) / 1e6;
  result.wall_seconds = detail::seconds_since(t0);
  result.verdicts_made = m.verdicts_made.load();
  result.verdicts_reused = m.verdicts_reused.load();
  Json busy = Json::object();
  for (int g : m.gpus) {
    const double b = result.wall_seconds > 0 ? m.gpu_busy_s[g] / result.wall_seconds : 0;
    result.gpu_busy_fraction[g] = b;
    busy[std::to_string(g)] = b;
  }
  const double gpu_hours = result.wall_seconds / 3600.0 * static_cast<double>(m.gpus.size());
  if (m.gpu_enabled && gpu_hours > 0)
    result.verdicts_per_gpu_hour = (result.verdicts_made + result.verdicts_reused) / gpu_hours;
  // run.json keeps the latest session's figures (a resume overwrites them).
  m.run_json["throughput"] = {
      {"wall_seconds", result.wall_seconds},
      {"gpu_busy_fraction", busy},
      {"verdicts_made", result.verdicts_made},
      {"verdicts_reused", result.verdicts_reused},
      {"verdicts_per_gpu_hour", m.gpu_enabled ? Json(result.verdicts_per_gpu_hour) : Json(nullptr)}};
  (void)util::write_file_atomic(m.dir / "run.json", m.run_json.dump(2) + "\n");
  if (auto loaded = traces::load_run(m.dir)) result.summary = summarize(*loaded);
  return result;
}

// ---------------------------------------------------------------- summary

RunSummary summarize(const traces::LoadedRun &run) {
  struct Acc {
    SummaryRow row;
    std::set<int> samples, compiled, correct, executed;
  };
  std::map<std::pair<std::string, std::string>, Acc> by_key;
  std::map<std::string, bool> finished;  // trajectory id -> last stop_reason non-empty
  std::map<std::string, int> last_turn;
  // A turn resume sent again after a request failure has two records: the later one counts.
  std::map<std::pair<std::string, int>, const Json *> latest;
  for (const auto &r : run.turns) latest[{r.value("trajectory_id", ""), r.value("turn", 0)}] = &r;
  for (const auto &r : run.turns) {
    if (latest[{r.value("trajectory_id", ""), r.value("turn", 0)}] != &r) continue;
    const std::string model = traces::model_label(r);
    const std::string task = r.value("task_id", "?");
    const int sample = r.value("sample", 0);
    auto &acc = by_key[{model, task}];
    acc.row.model = model;
    acc.row.task_id = task;
    acc.samples.insert(sample);
    acc.row.turns += 1;
    const std::string id = r.value("trajectory_id", "");
    const int turn = r.value("turn", 0);
    if (!last_turn.count(id) || turn >= last_turn[id]) {
      last_turn[id] = turn;
      finished[id] = !r.value("stop_reason", "").empty();
    }
    if (r.contains("response") && r["response"].is_object()) {
      const auto &u = r["response"].value("usage", Json::object());
      acc.row.tokens +=
          u.value("prompt_tokens", std::int64_t{0}) + u.value("completion_tokens", std::int64_t{0});
    }
    if (!r.contains("verdict") || !r["verdict"].is_object()) continue;
    const Json &v = r["verdict"];
    const Json stages = v.value("stages", Json::object());
    if (stages.contains("compile") && stages["compile"].value("status", "") == "ok")
      acc.compiled.insert(sample);
    if (stages.contains("correctness") && stages["correctness"].value("status", "") == "skipped")
      acc.row.gpu_skipped_turns += 1;
    const Json axes = v.value("axes", Json::object());
    if (axes.value("correct", Json()) == Json(true)) {
      acc.correct.insert(sample);
      if (axes.contains("speedup") && axes["speedup"].is_number()) {
        const double s = axes["speedup"].get<double>();
        if (!acc.row.best_speedup || s > *acc.row.best_speedup) acc.row.best_speedup = s;
      }
    }
    if (axes.value("targets_executed", Json()) == Json(true)) acc.executed.insert(sample);
  }
  RunSummary summary;
  for (auto &[key, acc] : by_key) {
    acc.row.trajectories = static_cast<int>(acc.samples.size());
    acc.row.compiled = static_cast<int>(acc.compiled.size());
    acc.row.correct = static_cast<int>(acc.correct.size());
    acc.row.executed = static_cast<int>(acc.executed.size());
    summary.turns += acc.row.turns;
    summary.rows.push_back(acc.row);
  }
  summary.trajectories = static_cast<int>(finished.size());
  for (const auto &[id, f] : finished) summary.finished_trajectories += f ? 1 : 0;
  return summary;
}

std::string RunSummary::table() const {
  std::size_t wm = 5, wt = 4;
  for (const auto &r : rows) {
    wm = std::max(wm, r.model.size());
    wt = std::max(wt, r.task_id.size());
  }
  auto rate = [](int n, int d) {
    return d == 0 ? std::string("-") : fmt::format("{}/{} {:3.0f}%", n, d, 100.0 * n / d);
  };
  std::string out = fmt::format("{:<{}}  {:<{}}  {:>5}  {:>12}  {:>12}  {:>12}  {:>8}\n", "model", wm, "task",
                                wt, "turns", "compiled", "correct", "executed", "best x");
  for (const auto &r : rows) {
    const bool no_gpu = r.gpu_skipped_turns > 0 && r.correct == 0 && r.executed == 0;
    out += fmt::format("{:<{}}  {:<{}}  {:>5}  {:>12}  {:>12}  {:>12}  {:>8}\n", r.model, wm, r.task_id, wt,
                       r.turns, rate(r.compiled, r.trajectories),
                       no_gpu ? std::string("no GPU") : rate(r.correct, r.trajectories),
                       no_gpu ? std::string("no GPU") : rate(r.executed, r.trajectories),
                       r.best_speedup ? fmt::format("{:.2f}", *r.best_speedup) : std::string("-"));
  }
  return out;
}

}  // namespace ptxbench::agent
