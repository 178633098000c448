// The runner's public face: start, resume and run a session. Its parts live in detail/: the plan
// (run_plan), the scheduler, the turn recorder, setup and the loops (runner_*.cpp); the run summary in
// run_summary.cpp.
#include "agent/runner.hpp"

#include <fmt/core.h>

#include "agent/conversation.hpp"
#include "agent/detail/clocks.hpp"
#include "agent/detail/runner_state.hpp"
#include "agent/prompt_builder.hpp"
#include "agent/repair_selection.hpp"
#include "agent/shard.hpp"
#include "evaluator/worker_client.hpp"
#include "util/files.hpp"
#include "util/subprocess.hpp"

namespace ptxbench::agent {

namespace fs = std::filesystem;
using Json = nlohmann::json;

// ---------------------------------------------------------------- services

nlohmann::json probe_worker(const evaluator::EvaluatorSettings &settings) {
  // The same lookup the GPU stage uses (setting, $PTXBENCH_WORKER, beside ptxbench, the build tree).
  const auto found = evaluator::find_worker_binary(settings);
  if (!found) return {{"error", "the GPU worker (ptxbench-worker) was not found"}};
  util::TempDir home("ptxbench-probe");
  auto result =
      evaluator::run_worker_command(*found, evaluator::WorkerCommand::probe(),
                                    evaluator::WorkerPlace{.home = home.path(),
                                                           .wall = std::chrono::milliseconds(60'000),
                                                           .sandboxed = false,
                                                           .working_directory = false});
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
  s.cpu_stages = [](const tasks::Task &t, std::string_view, evaluator::ParsedCandidate parsed,
                    const evaluator::EvaluatorSettings &st) {
    return evaluator::run_cpu_stages(t, std::move(parsed), st);
  };
  s.gpu_stages = [](evaluator::CompiledCandidate &c, const tasks::Task &t,
                    const evaluator::EvaluatorSettings &st) { evaluator::run_gpu_stages(c, t, st); };
  s.gpu_unavailable_reason = [](const evaluator::EvaluatorSettings &st) {
    return evaluator::gpu_unavailable_reason(st);
  };
  s.probe_environment = probe_worker;
  return s;
}

// ---------------------------------------------------------------- Runner

Runner::Runner(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Runner::~Runner() = default;
const fs::path &Runner::dir() const {
  return impl_->plan.dir;
}
void Runner::request_stop(const std::string &why) {
  impl_->scheduler.request_stop(RunEnd::interrupted, why);
}

util::Expected<std::unique_ptr<Runner>> Runner::start(RunConfig config, RunServices services,
                                                      RunOptions options) {
  auto impl = std::make_unique<Impl>();
  impl->plan_storage.config = std::move(config);
  impl->plan_storage.services = std::move(services);
  impl->plan_storage.options = options;
  if (auto ok = impl->setup(nullptr); !ok) return util::unexpected(ok.error());
  return std::unique_ptr<Runner>(new Runner(std::move(impl)));
}

util::Expected<std::unique_ptr<Runner>> Runner::resume(const fs::path &dir, RunServices services,
                                                       RunOptions options) {
  auto loaded = traces::load_run(dir);
  if (!loaded) return util::unexpected(loaded.error());
  if (!loaded->run_error.empty())
    return util::unexpected(fmt::format("{}: {}; cannot resume", dir.string(), loaded->run_error));
  const traces::RunRecord &recorded = loaded->run;
  if (recorded.config.is_null() || !recorded.tasks) {
    return util::unexpected(
        fmt::format("{}: run.json is missing or has no config; cannot resume", dir.string()));
  }
  auto config = parse_run_config(recorded.config, (dir / "run.json").string() + ": config", dir);
  if (!config) return util::unexpected(config.error());
  config->tasks = *recorded.tasks;
  config->out_dir = dir;
  config->shard = shard_spec_of(recorded);
  // A cut-short last line (killed mid-write) must go before we append.
  auto cut = traces::truncate_partial_tail(dir / "trajectories.jsonl");
  if (!cut) return util::unexpected(cut.error());

  auto impl = std::make_unique<Impl>();
  impl->plan_storage.config = std::move(*config);
  impl->plan_storage.services = std::move(services);
  impl->plan_storage.options = options;
  impl->plan_storage.dir = dir;
  impl->plan_storage.run_id = recorded.run_id;
  if (auto ok = impl->setup(&*loaded); !ok) return util::unexpected(ok.error());
  detail::TurnRecorder &recorder = *impl->recorder;
  for (const auto &w : loaded->warnings) recorder.progress().message("note: " + w);
  if (recorder.retried_request_failures() > 0)
    recorder.progress().message(fmt::format("resume: retrying {} turn(s) that ended in a request failure",
                                            recorder.retried_request_failures()));
  return std::unique_ptr<Runner>(new Runner(std::move(impl)));
}

void Runner::Impl::start_threads(std::vector<std::thread> &threads) {
  for (std::size_t e = 0; e < plan.config.endpoints.size(); ++e) {
    const int pending = scheduler.pending_on(e);
    const int n = std::min(effective_max_in_flight(plan.config, plan.config.endpoints[e].max_in_flight),
                           std::max(1, pending));
    for (int i = 0; i < n; ++i) threads.emplace_back([this, e] { request_loop(e); });
  }
  // With evaluator.url the CPU loop's threads only wait on the service: as many as answers may wait there.
  const int cpu_threads =
      plan.service ? plan.config.evaluator_service.in_flight : plan.config.concurrency.compile_workers;
  for (int i = 0; i < cpu_threads; ++i) threads.emplace_back([this] { cpu_loop(); });
  if (plan.gpu_enabled) {
    for (int g : plan.gpus) threads.emplace_back([this, g] { gpu_loop(g); });
  }
  if (plan.config.repairs && plan.config.repairs->synthesize_reasoning) {
    int n = 0;
    for (const auto &e : plan.config.endpoints) n += effective_max_in_flight(plan.config, e.max_in_flight);
    for (int i = 0; i < std::max(1, n); ++i) threads.emplace_back([this] { explain_loop(); });
  }
}

void Runner::Impl::supervise() {
  // Ctrl-C, progress, the end.
  int interrupts_seen = 0;
  while (true) {
    scheduler.wait_for_change(std::chrono::milliseconds(100));
    if (plan.options.interrupts != nullptr) {
      const int n = plan.options.interrupts->load();
      if (n > interrupts_seen) {
        interrupts_seen = n;
        recorder->progress().message(
            "interrupted: finishing the stages in progress; queued turns are redone on resume (Ctrl-C again "
            "to quit at once)");
        scheduler.request_stop(RunEnd::interrupted, "interrupted (Ctrl-C or SIGTERM)");
      }
    }
    recorder->progress().tick();
    if (scheduler.run_over()) break;
  }
}

RunResult Runner::Impl::result_of(double wall_seconds) {
  RunResult result;
  result.dir = plan.dir;
  result.wall_seconds = wall_seconds;
  scheduler.report(result);
  recorder->report(result);
  return result;
}

RunResult Runner::run() {
  Impl &m = *impl_;
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<std::thread> threads;
  if (m.scheduler.queue_unfinished() > 0) m.start_threads(threads);
  m.supervise();
  m.scheduler.close_queues();
  for (auto &th : threads) th.join();
  m.recorder->progress().finish();
  RunResult result = m.result_of(detail::seconds_since(t0));
  if (auto loaded = traces::load_run(m.plan.dir)) result.summary = summarize(*loaded);
  return result;
}

}  // namespace ptxbench::agent
