// `ptxbench serve [--host H] [--port P] [--token T] ...`: verdicts as an HTTP/1.1 JSON service (serve/,
// docs/openapi.yaml). Only the options live here.
#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <memory>

#include <fmt/core.h>
#include <CLI/CLI.hpp>

#include "cli/cli.hpp"
#include "serve/reward.hpp"
#include "serve/serve.hpp"

namespace ptxbench::cli {

namespace {

/// Where it listens and who may call it; how much work it accepts and for how long.
void add_listen_and_capacity_options(CLI::App *cmd, serve::ServeConfig &config) {
  cmd->add_option("--host", config.server.host, "Address to bind (default 127.0.0.1: this machine only)")
      ->capture_default_str();
  cmd->add_option("--port", config.server.port, "Port (0 = pick a free one; the chosen one is printed)")
      ->capture_default_str();
  cmd->add_option(
      "--token", config.server.token,
      "Bearer token every route but /healthz requires (default: $PTXBENCH_SERVE_TOKEN; empty = none)");
  cmd->add_option("--workers", config.service.workers, "Evaluation threads")
      ->capture_default_str()
      ->check(CLI::Range(1, 256));
  cmd->add_option("--max-queue", config.service.max_queue,
                  "Evaluations waiting to start; a submission past it gets 429 with Retry-After")
      ->capture_default_str()
      ->check(CLI::Range(1, 1'000'000));
  cmd->add_option("--max-batch", config.service.max_batch, "Requests in one submission")
      ->capture_default_str()
      ->check(CLI::Range(1, 100'000));
  cmd->add_option("--default-deadline", config.service.default_deadline_s,
                  "Seconds a request without deadline_seconds may take before it is answered as a timeout")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--max-deadline", config.service.max_deadline_s, "The largest deadline_seconds accepted")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
}

/// Waits, bodies and shutdown; how each request is evaluated and rewarded. (The options are added in
/// the order --help lists them.)
void add_drain_and_evaluation_options(CLI::App *cmd, serve::ServeConfig &config, std::string &reward) {
  cmd->add_option("--max-wait", config.server.max_wait_s,
                  "The longest blocking wait (?wait=S) of one call, seconds")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--max-body", config.server.max_body_bytes, "Largest request body, bytes (413 above)")
      ->capture_default_str()
      ->check(CLI::Range(std::size_t{1024}, std::size_t{1} << 30));
  cmd->add_option("--drain-seconds", config.server.drain_s,
                  "On SIGTERM: how long accepted evaluations may still run before the exit")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--linger-seconds", config.server.linger_s,
                  "On SIGTERM, after the evaluations: how long finished verdicts wait to be fetched")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--reward", reward,
                  "The scalar reward's formula, e.g. compiled=0.1,correct=0.4,targets=0.2,speedup=0.3,"
                  "speedup_cap=2,no_generalize=0.5,suspicious_value=0,timeout_value=0 ('none': parts only)");
  cmd->add_option("--tasks-dir", config.tasks_dir, "Folder of task files (default as for eval)");
  cmd->add_flag("--no-gpu", config.no_gpu, "Skip the GPU stages for every request");
  cmd->add_option("--seed", config.seed, "Run seed of every verdict's inputs (default: drawn once, printed)");
  cmd->add_option("--ptxas-timeout", config.ptxas_timeout_s, "Wall-clock limit for ptxas, seconds")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--device", config.device, "CUDA device of the GPU stages")->capture_default_str();
  cmd->add_option(
         "--id-prefix", config.service.id_prefix,
         "Names this process in its request ids (v<prefix>.<random>-<n>) so a balancer can route a poll "
         "to it (ptxbench slurm serve sets it)")
      ->check([](const std::string &v) {
        const bool ok = !v.empty() && v.size() <= 32 && std::all_of(v.begin(), v.end(), [](char c) {
          return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
        });
        return ok ? std::string() : std::string("letters, digits and _ (at most 32)");
      });
}

int serve_command(serve::ServeConfig &config, const std::string &reward) {
  if (config.server.token.empty())
    if (const char *t = std::getenv("PTXBENCH_SERVE_TOKEN")) config.server.token = t;
  if (!reward.empty()) {
    auto formula = serve::parse_reward_formula(reward);
    if (!formula) {
      fmt::print(stderr, "ptxbench serve: --reward: {}\n", formula.error());
      return static_cast<int>(kExitUsage);
    }
    config.service.reward = *formula;
  }
  return serve::run_serve(config);
}

}  // namespace

void register_serve_command(CLI::App &app, Action &action) {
  auto config = std::make_shared<serve::ServeConfig>();
  auto reward = std::make_shared<std::string>();
  CLI::App *cmd = app.add_subcommand(
      "serve",
      "Serve verdicts over HTTP (POST /v1/verdicts, GET /v1/verdicts/{id}[?wait=S], /v1/queue, /v1/tasks,\n"
      "/healthz; docs/openapi.yaml). SIGTERM/SIGINT drain: accepted requests finish, then exit 0.");
  add_listen_and_capacity_options(cmd, *config);
  add_drain_and_evaluation_options(cmd, *config, *reward);
  cmd->callback([&action, config, reward] {
    action.run = [config, reward] { return serve_command(*config, *reward); };
  });
}

}  // namespace ptxbench::cli
