// `ptxbench run` and `ptxbench resume`: the repair loop over models × tasks ×
// samples × turns, with Ctrl-C handling (first: finish in-flight turns and
// stop, resumable; second: quit at once) and a summary table at the end.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cstring>
#include <memory>
#include <sstream>

#include <fmt/core.h>
#include <CLI/CLI.hpp>

#include "agent/run_config.hpp"
#include "agent/runner.hpp"
#include "cli/cli.hpp"
#include "cli/run_session.hpp"

namespace ptxbench::cli {

namespace {

std::atomic<int> g_interrupts{0};

extern "C" void on_sigint(int) {
  if (g_interrupts.fetch_add(1) >= 1) {
    static const char msg[] =
        "\nptxbench: interrupted twice: quitting now (the trace is valid; `ptxbench resume` continues)\n";
    (void)!::write(STDERR_FILENO, msg, sizeof msg - 1);
    ::_exit(kExitInterrupted);
  }
}

}  // namespace

void install_run_signal_handlers() {
  struct sigaction sa {};
  sa.sa_handler = on_sigint;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  ::sigaction(SIGINT, &sa, nullptr);
  ::sigaction(SIGTERM, &sa, nullptr);
}

namespace {

struct RunFlags {
  std::string config_file;
  std::string endpoint_url;
  std::string model;
  std::string name;
  std::string api_key_env;
  std::string scripted_file;
  std::vector<std::string> tasks;
  std::optional<int> samples;
  std::optional<int> turns;
  std::string history;
  std::vector<std::string> variants;
  std::string out;
  bool no_gpu = false;
  std::vector<int> gpus;
  std::optional<int> concurrency;
  std::optional<int> compile_workers;
  std::optional<double> temperature;
  std::optional<int> max_tokens;
  std::optional<std::int64_t> seed;
  std::optional<std::int64_t> tokens_per_trajectory;
  std::optional<std::int64_t> tokens_per_run;
  bool stream = false;
  std::string progress = "auto";
  std::string shard;   // "I/N"
  std::string run_id;  // shared by the shards of one run
};

std::optional<agent::ProgressMode> progress_mode(const std::string &s) {
  if (s == "auto") return agent::ProgressMode::automatic;
  if (s == "redraw") return agent::ProgressMode::redraw;
  if (s == "lines") return agent::ProgressMode::lines;
  if (s == "quiet") return agent::ProgressMode::quiet;
  return std::nullopt;
}

/// --endpoint / --scripted make the one endpoint; otherwise --model picks configured endpoints by name.
util::Expected<void> apply_endpoint_flags(const RunFlags &f, agent::RunConfig &c) {
  if (!f.endpoint_url.empty() || !f.scripted_file.empty()) {
    llm::EndpointConfig e;
    if (!f.scripted_file.empty()) {
      e.kind = "scripted";
      e.scripted_file = std::filesystem::absolute(f.scripted_file).string();
      e.model = f.model.empty() ? "scripted" : f.model;
    } else {
      if (f.model.empty())
        return util::unexpected(std::string("--endpoint needs --model (the model id to request)"));
      e.base_url = f.endpoint_url;
      e.model = f.model;
      e.api_key_env = f.api_key_env;
      e.stream = f.stream;
    }
    e.name = f.name.empty() ? e.model : f.name;
    c.endpoints = {e};
  } else if (!f.model.empty()) {
    // Select configured endpoints by name.
    std::vector<llm::EndpointConfig> chosen;
    std::stringstream ss(f.model);
    std::string want;
    while (std::getline(ss, want, ',')) {
      auto it =
          std::find_if(c.endpoints.begin(), c.endpoints.end(), [&](const auto &e) { return e.name == want; });
      if (it == c.endpoints.end()) {
        std::string known;
        for (const auto &e : c.endpoints) known += (known.empty() ? "" : ", ") + e.name;
        return util::unexpected(
            fmt::format("--model {}: no endpoint of that name in the config (known: {}); give "
                        "--endpoint URL to use a new one",
                        want, known));
      }
      chosen.push_back(*it);
    }
    c.endpoints = chosen;
  }
  if (!f.api_key_env.empty()) {
    for (auto &e : c.endpoints) e.api_key_env = f.api_key_env;
  }
  if (f.stream) {
    for (auto &e : c.endpoints) e.stream = true;
  }
  if (f.concurrency) {
    for (auto &e : c.endpoints) e.max_in_flight = *f.concurrency;
  }
  return {};
}

/// What the loop runs (tasks, samples, turns, history, variants) and where and how it runs.
util::Expected<void> apply_loop_flags(const RunFlags &f, agent::RunConfig &c) {
  if (!f.tasks.empty()) c.tasks = f.tasks;
  if (f.samples) c.samples = *f.samples;
  if (f.turns) c.turns = *f.turns;
  if (!f.history.empty()) {
    auto p = agent::history_policy_from_string(f.history);
    if (!p)
      return util::unexpected(fmt::format("--history {}: expected full, last_attempt or none", f.history));
    c.history = *p;
  }
  if (auto ok = agent::select_variants(c, f.variants); !ok) return util::unexpected(ok.error());
  if (!f.out.empty()) c.out_dir = f.out;
  if (f.no_gpu) c.evaluator.run_gpu = false;
  if (!f.gpus.empty()) c.concurrency.gpus = f.gpus;
  if (f.compile_workers) c.concurrency.compile_workers = *f.compile_workers;
  if (f.temperature) c.sampling.temperature = *f.temperature;
  if (f.max_tokens) c.sampling.max_tokens = *f.max_tokens;
  if (f.seed) c.sampling.seed = *f.seed;
  if (f.tokens_per_trajectory) c.budgets.per_trajectory = *f.tokens_per_trajectory;
  if (f.tokens_per_run) c.budgets.per_run = *f.tokens_per_run;
  return {};
}

util::Expected<void> apply_shard_flags(const RunFlags &f, agent::RunConfig &c) {
  if (!f.shard.empty()) {
    auto spec = agent::parse_shard_spec(f.shard);
    if (!spec) return util::unexpected(spec.error());
    c.shard = *spec;
  }
  if (!f.run_id.empty()) {
    if (!std::all_of(f.run_id.begin(), f.run_id.end(), [](char ch) {
          return std::isalnum(static_cast<unsigned char>(ch)) || ch == '-' || ch == '_' || ch == '.';
        }))
      return util::unexpected(fmt::format("--run-id {}: use letters, digits, '-', '_' and '.'", f.run_id));
    c.run_id = f.run_id;
  }
  return {};
}

/// Applies CLI flags over the config. Error text for the user on a bad combination.
util::Expected<void> apply_flags(const RunFlags &f, agent::RunConfig &c) {
  if (auto ok = apply_endpoint_flags(f, c); !ok) return ok;
  if (auto ok = apply_loop_flags(f, c); !ok) return ok;
  if (auto ok = apply_shard_flags(f, c); !ok) return ok;
  if (auto ok = agent::validate(c); !ok) return ok;
  if (c.shard && c.run_id.empty()) c.run_id = agent::default_shard_run_id(c);
  return {};
}

}  // namespace

int finish_run_session(const agent::RunResult &r) {
  fmt::print("\n{}", r.summary.table());
  const int turns = std::max(1, r.turns_recorded);
  fmt::print(
      "\n{} turns recorded this session in {:.1f} s; orchestrator CPU {:.2f} ms/turn (+ client {:.2f} ms, "
      "in-process evaluator {:.2f} ms; compilers run in child processes)\n",
      r.turns_recorded, r.wall_seconds, r.orchestrator_cpu_ms / turns, r.client_cpu_ms / turns,
      r.evaluator_cpu_ms / turns);
  for (const auto &[gpu, busy] : r.gpu_busy_fraction)
    fmt::print("GPU {} busy {:.1f}% of the wall time\n", gpu, 100.0 * busy);
  fmt::print(
      "Verdicts: {} made, {} reused (resent identical kernels){}\n", r.verdicts_made, r.verdicts_reused,
      r.verdicts_per_gpu_hour > 0 ? fmt::format("; {:.0f} per GPU-hour", r.verdicts_per_gpu_hour) : "");
  fmt::print("Run directory: {}\n", std::filesystem::absolute(r.dir).string());
  if (r.retried_request_failures > 0)
    fmt::print("Retried {} turn(s) that had ended in a request failure.\n", r.retried_request_failures);
  switch (r.end) {
    case agent::RunEnd::completed:
      if (r.request_failures > 0) {
        fmt::print(stderr,
                   "{} turn(s) failed for a reason other than the model (errors above; each turn's in the "
                   "trace); after fixing the endpoint: ptxbench resume {}\n",
                   r.request_failures, r.dir.string());
        return kExitRequestsFailed;
      }
      return kExitOk;
    case agent::RunEnd::interrupted:
      fmt::print(stderr, "Stopped: {} ({} in-flight turns abandoned). Continue with: ptxbench resume {}\n",
                 r.message, r.turns_abandoned, r.dir.string());
      return kExitInterrupted;
    case agent::RunEnd::write_failed:
      fmt::print(stderr, "error: {}\n", r.message);
      return kExitEnvironment;
    case agent::RunEnd::evaluator_failed:
      fmt::print(
          stderr,
          "error: {}\nThe run stopped ({} in-flight turns abandoned, redone on resume). Once the service "
          "answers again: ptxbench resume {}\n",
          r.message, r.turns_abandoned, r.dir.string());
      return kExitEnvironment;
  }
  return kExitInternal;
}

agent::RunOptions run_options_for(const std::string &progress) {
  agent::RunOptions o;
  o.progress = progress_mode(progress).value_or(agent::ProgressMode::automatic);
  o.interrupts = &g_interrupts;
  return o;
}

namespace {

void add_run_options(CLI::App *run, RunFlags &f) {
  run->add_option("--config", f.config_file, "run config (JSON); see examples/default_run.json")
      ->check(CLI::ExistingFile);
  run->add_option("--endpoint", f.endpoint_url,
                  "OpenAI-compatible base URL (e.g. http://127.0.0.1:8000/v1); "
                  "replaces the config's endpoints");
  run->add_option(
      "--model", f.model,
      "model id for --endpoint; without --endpoint: which configured endpoint(s) to use (comma list)");
  run->add_option("--name", f.name,
                  "label for the --endpoint model in traces and reports (default: the model id)");
  run->add_option("--api-key-env", f.api_key_env, "environment variable holding the API key");
  run->add_option("--scripted", f.scripted_file, "use the scripted client with this responses file");
  run->add_option("--tasks", f.tasks, "task ids, or core / all")->delimiter(',');
  run->add_option("--samples", f.samples, "trajectories per model × task")->check(CLI::Range(1, 100000));
  run->add_option("--turns", f.turns, "attempts per trajectory at most")->check(CLI::Range(1, 1000));
  run->add_option("--history", f.history,
                  "full | last_attempt | none (the run's policy; a variant's own \"history\" wins)");
  run->add_option("--variant", f.variants,
                  "run only this config variant (repeatable); default: every variant in the config")
      ->delimiter(',');
  run->add_option("--out", f.out, "run directory (default runs/<run id>)");
  run->add_flag("--no-gpu", f.no_gpu, "skip GPU stages (compile and static checks only)");
  run->add_option("--gpus", f.gpus, "GPU ordinals for GPU stages (default: all visible)")->delimiter(',');
  run->add_option("--concurrency", f.concurrency,
                  "requests in flight per endpoint, per process: with --shard, per shard (config "
                  "concurrency.in_flight_scope \"run\" divides it by the shard count)")
      ->check(CLI::Range(1, 4096));
  run->add_option("--compile-workers", f.compile_workers, "parallel CPU-stage workers (default: cores)")
      ->check(CLI::Range(1, 1024));
  run->add_option("--temperature", f.temperature, "sampling temperature");
  run->add_option("--max-tokens", f.max_tokens, "max completion tokens per request");
  run->add_option("--seed", f.seed, "sampling seed sent to the server");
  run->add_option("--tokens-per-trajectory", f.tokens_per_trajectory,
                  "token budget per trajectory (0 = none)");
  run->add_option("--tokens-per-run", f.tokens_per_run, "token budget for the whole run (0 = none)");
  run->add_flag("--stream", f.stream, "use streaming (server-sent events)");
  run->add_option("--progress", f.progress, "auto | redraw | lines | quiet")
      ->check(CLI::IsMember({"auto", "redraw", "lines", "quiet"}));
  run->add_option("--shard", f.shard,
                  "run only shard I of N (0-based): a deterministic split of the cells (model x task x "
                  "sample), the same in every process with this config; writes <out>/shard-I where <out> "
                  "is --out, the config's out_dir or runs/<run id>. Endpoint limits (max_in_flight, "
                  "--concurrency) hold per shard");
  run->add_option("--run-id", f.run_id,
                  "the run's id (shards of one run share it; default for shards: cfg-<config hash>)");
}

/// `ptxbench run`: load the config (or the embedded default), apply the flags, run to the end.
int run_command(const RunFlags &flags) {
  std::filesystem::path config_file = flags.config_file;
  if (config_file.empty()) config_file = agent::default_examples_dir() / "default_run.json";
  auto config = agent::load_run_config(config_file);
  if (!config) {
    fmt::print(stderr, "error: {}\n", config.error());
    return kExitUsage;
  }
  if (auto ok = apply_flags(flags, *config); !ok) {
    fmt::print(stderr, "error: {}\n", ok.error());
    return kExitUsage;
  }
  install_run_signal_handlers();
  auto runner = agent::Runner::start(std::move(*config), agent::RunServices::defaults(),
                                     run_options_for(flags.progress));
  if (!runner) {
    fmt::print(stderr, "error: {}\n", runner.error());
    return kExitEnvironment;
  }
  fmt::print(stderr, "ptxbench run: writing {}\n", (*runner)->dir().string());
  return finish_run_session((*runner)->run());
}

void register_resume_command(CLI::App &app, Action &action) {
  auto resume_dir = std::make_shared<std::string>();
  auto resume_progress = std::make_shared<std::string>("auto");
  CLI::App *resume = app.add_subcommand(
      "resume", "Continue a run directory: finished turns are kept, unfinished trajectories go on.");
  resume->add_option("dir", *resume_dir, "the run directory")->required();
  resume->add_option("--progress", *resume_progress, "auto | redraw | lines | quiet")
      ->check(CLI::IsMember({"auto", "redraw", "lines", "quiet"}));
  resume->callback([resume_dir, resume_progress, &action] {
    action.run = [resume_dir, resume_progress]() -> int {
      install_run_signal_handlers();
      auto runner = agent::Runner::resume(*resume_dir, agent::RunServices::defaults(),
                                          run_options_for(*resume_progress));
      if (!runner) {
        fmt::print(stderr, "error: {}\n", runner.error());
        return kExitEnvironment;
      }
      fmt::print(stderr, "ptxbench resume: continuing {}\n", (*runner)->dir().string());
      return finish_run_session((*runner)->run());
    };
  });
}

}  // namespace

void register_run_commands(CLI::App &app, Action &action) {
  auto flags = std::make_shared<RunFlags>();
  CLI::App *run =
      app.add_subcommand("run",
                         "Run the repair loop: prompt models, evaluate every answer, feed diagnostics back, "
                         "record trajectories.\n"
                         "Without --config: the embedded default (a scripted model on built-in tasks).");
  add_run_options(run, *flags);
  run->callback([flags, &action] { action.run = [flags]() -> int { return run_command(*flags); }; });
  register_resume_command(app, action);
}

}  // namespace ptxbench::cli
