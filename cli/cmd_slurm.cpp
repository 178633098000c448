// `ptxbench slurm submit|status|resubmit` (one run sharded over a Slurm array
// job; see agent/slurm.hpp for the directory layout) and `ptxbench merge`
// (the shards of a run into one run directory).
#include <fmt/core.h>
#include <CLI/CLI.hpp>

#include <filesystem>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "agent/run_config.hpp"
#include "agent/runner.hpp"
#include "agent/shard.hpp"
#include "agent/slurm.hpp"
#include "agent/slurm_serve.hpp"
#include "cli/cli.hpp"
#include "traces/shards.hpp"
#include "util/files.hpp"

namespace ptxbench::cli {
namespace {

namespace fs = std::filesystem;
namespace slurm = agent::slurm;

constexpr const char *kLimitsNote =
    "Endpoint limits: each shard is its own process, so an endpoint's max_in_flight (and --concurrency) "
    "holds per shard: N shards send up to N times as many requests at once. Set the config's "
    "concurrency.in_flight_scope to \"run\" to divide max_in_flight by the shard count instead.";

struct SubmitArgs {
  std::string config;
  int shards = 0;
  int gpus_per_shard = 0;
  int cpus_per_shard = 0;
  std::string partition, time, account, out, run_id, ptxbench;
  std::vector<std::string> sbatch_args;
  bool dry_run = false;
};

/// sbatch --parsable --array=SPEC script; the job id or the reason it failed.
util::Expected<std::string> sbatch(const slurm::CommandRunner &run, const fs::path &script,
                                   const std::vector<int> &shards) {
  auto result = run({"sbatch", "--parsable", "--array=" + slurm::array_spec(shards), script.string()});
  if (!result) return util::unexpected("sbatch: " + result.error());
  if (!result->ok()) {
    return util::unexpected(
        fmt::format("sbatch {}: {}", result->describe(), result->stderr_text.substr(0, 2000)));
  }
  return slurm::parse_sbatch_job_id(result->stdout_text);
}

/// The submission as sbatch will make it, from the flags and the config; an exit code on a bad one.
std::optional<int> submit_options(const SubmitArgs &a, const agent::RunConfig &config,
                                  slurm::SubmitOptions &o) {
  o.run_id = a.run_id.empty() ? slurm::new_run_id() : a.run_id;
  o.shards = a.shards;
  o.gpus_per_shard = a.gpus_per_shard;
  o.cpus_per_shard = a.cpus_per_shard;
  o.partition = a.partition;
  o.time_limit = a.time;
  o.account = a.account;
  o.sbatch_args = a.sbatch_args;
  fs::path top = !a.out.empty()            ? fs::path(a.out)
                 : !config.out_dir.empty() ? config.out_dir
                                           : fs::path("runs") / o.run_id;
  std::error_code ec;
  o.top_dir = fs::absolute(top, ec).lexically_normal();
  o.ptxbench = a.ptxbench.empty() ? util::own_executable() : fs::absolute(a.ptxbench, ec);
  for (const auto &e : config.endpoints) {
    if (!e.api_key_env.empty()) o.key_env_names.push_back(e.api_key_env);
  }
  if (auto ok = slurm::check_submit_options(o); !ok) {
    fmt::print(stderr, "error: {}\n", ok.error());
    return kExitUsage;
  }
  return std::nullopt;
}

/// The shard layout (slurm.json), computed here exactly as each shard will: cells per shard and the
/// options it was submitted with. `cell_count`: the cells of the whole run.
util::Expected<slurm::Layout> shard_layout(const agent::RunConfig &config, const slurm::SubmitOptions &o,
                                           std::size_t &cell_count) {
  agent::RunConfig planned = config;
  planned.shard = agent::ShardSpec{0, o.shards};
  auto cells = agent::plan_cells(planned);
  if (!cells) return util::unexpected(cells.error());
  cell_count = cells->size();
  slurm::Layout layout;
  layout.run_id = o.run_id;
  layout.config_hash = agent::config_hash(config);
  layout.shards = o.shards;
  layout.cells.assign(static_cast<std::size_t>(o.shards), 0);
  for (const auto &c : *cells) layout.cells[static_cast<std::size_t>(c.shard)] += 1;
  layout.options = {{"gpus_per_shard", o.gpus_per_shard},
                    {"cpus_per_shard", o.cpus_per_shard},
                    {"partition", o.partition},
                    {"time", o.time_limit},
                    {"account", o.account},
                    {"sbatch_args", o.sbatch_args},
                    {"ptxbench", o.ptxbench.string()},
                    {"api_key_env", o.key_env_names}};
  return layout;
}

/// What the user should know before the shards run: idle shards, GPU ordinals, GPUs not asked for.
void print_submit_warnings(const slurm::SubmitOptions &o, const agent::RunConfig &config,
                           std::size_t cell_count) {
  if (o.shards > static_cast<int>(cell_count)) {
    fmt::print(stderr, "warning: {} shards for {} cells: {} shard(s) get no cell and finish at once\n",
               o.shards, cell_count, o.shards - static_cast<int>(cell_count));
  }
  if (!config.concurrency.gpus.empty()) {
    fmt::print(stderr,
               "warning: the config names GPU ordinals (concurrency.gpus); under Slurm a shard sees only its "
               "allocated GPUs, numbered from 0\n");
  }
  if (o.gpus_per_shard == 0 && config.evaluator.run_gpu) {
    fmt::print(stderr,
               "note: no --gpus-per-shard: shards get GPUs only if the partition gives them by default; "
               "without one their GPU stages are skipped\n");
  }
}

/// The top-level directory: config.json (without out_dir: each shard gets --out <top>), the sbatch
/// script and slurm.json. An exit code when it holds a run already or cannot be written.
std::optional<int> write_top_dir(const slurm::SubmitOptions &o, const agent::RunConfig &config,
                                 const slurm::Layout &layout, const std::string &script) {
  std::error_code ec;
  if (fs::exists(o.top_dir / "slurm.json", ec)) {
    fmt::print(
        stderr,
        "error: {} already holds a Slurm run; use `ptxbench slurm status|resubmit {}` or another --out\n",
        o.top_dir.string(), o.top_dir.string());
    return kExitUsage;
  }
  fs::create_directories(o.top_dir / "logs", ec);
  if (ec) {
    fmt::print(stderr, "error: cannot create {}: {}\n", (o.top_dir / "logs").string(), ec.message());
    return kExitEnvironment;
  }
  nlohmann::json config_json = config.to_json();
  config_json.erase("out_dir");  // each shard gets --out <top>
  for (const auto &[file, text] : std::vector<std::pair<fs::path, std::string>>{
           {o.top_dir / "config.json", config_json.dump(2) + "\n"}, {o.top_dir / layout.script, script}}) {
    if (auto ok = util::write_file_atomic(file, text); !ok) {
      fmt::print(stderr, "error: cannot write {}: {}\n", file.string(), ok.error());
      return kExitEnvironment;
    }
  }
  fs::permissions(o.top_dir / layout.script, fs::perms::owner_exec, fs::perm_options::add, ec);
  if (auto ok = slurm::write_layout(o.top_dir, layout); !ok) {
    fmt::print(stderr, "error: cannot write slurm.json: {}\n", ok.error());
    return kExitEnvironment;
  }
  return std::nullopt;
}

int run_submit(const SubmitArgs &a) {
  auto config = agent::load_run_config(a.config);
  if (!config) {
    fmt::print(stderr, "error: {}\n", config.error());
    return kExitUsage;
  }
  if (auto ok = agent::validate(*config); !ok) {
    fmt::print(stderr, "error: {}\n", ok.error());
    return kExitUsage;
  }
  slurm::SubmitOptions o;
  if (auto rc = submit_options(a, *config, o)) return *rc;
  std::size_t cell_count = 0;
  auto layout = shard_layout(*config, o, cell_count);
  if (!layout) {
    fmt::print(stderr, "error: {}\n", layout.error());
    return kExitEnvironment;
  }
  const std::string script = slurm::sbatch_script(o);
  print_submit_warnings(o, *config, cell_count);
  std::vector<int> all;
  for (int i = 0; i < o.shards; ++i) all.push_back(i);
  if (a.dry_run) {
    fmt::print("{}", script);
    fmt::print(stderr, "dry run: {} shards, cells per shard {}; would write {} and run sbatch --array={}\n",
               o.shards, nlohmann::json(layout->cells).dump(), (o.top_dir / layout->script).string(),
               slurm::array_spec(all));
    return kExitOk;
  }
  if (auto rc = write_top_dir(o, *config, *layout, script)) return *rc;
  auto job = sbatch(slurm::default_command_runner(), o.top_dir / layout->script, all);
  if (!job) {
    fmt::print(
        stderr,
        "error: {}\nThe run directory {} is written; submit it later with `ptxbench slurm resubmit {}`\n",
        job.error(), o.top_dir.string(), o.top_dir.string());
    return kExitEnvironment;
  }
  layout->submissions.push_back(slurm::make_submission(*job, all, "submit"));
  if (auto ok = slurm::write_layout(o.top_dir, *layout); !ok) {
    fmt::print(stderr, "error: job {} is submitted but slurm.json could not be updated: {}\n", *job,
               ok.error());
    return kExitEnvironment;
  }
  fmt::print("Submitted array job {} ({} shards, run {}) -> {}\n", *job, o.shards, o.run_id,
             o.top_dir.string());
  fmt::print("Follow it with: ptxbench slurm status {}\n", o.top_dir.string());
  return kExitOk;
}

int run_status_cmd(const std::string &dir, bool json) {
  auto status = slurm::run_status(dir, slurm::default_command_runner());
  if (!status) {
    fmt::print(stderr, "error: {}\n", status.error());
    return kExitEnvironment;
  }
  if (json) {
    fmt::print("{}\n", status->to_json().dump(2));
  } else {
    fmt::print("run {} ({} shards) in {}\n{}", status->layout.run_id, status->layout.shards, dir,
               status->table());
  }
  return kExitOk;
}

int run_resubmit(const std::string &dir, const std::vector<int> &only, bool dry_run) {
  const fs::path top = fs::absolute(dir);
  auto status = slurm::run_status(top, slurm::default_command_runner());
  if (!status) {
    fmt::print(stderr, "error: {}\n", status.error());
    return kExitEnvironment;
  }
  for (const auto &n : status->notes) fmt::print(stderr, "note: {}\n", n);
  const std::set<int> wanted(only.begin(), only.end());
  std::vector<int> shards;
  for (const auto &s : status->shards) {
    if (!wanted.empty() && !wanted.count(s.index)) continue;
    if (slurm::is_active(s.state)) {
      if (!wanted.empty())
        fmt::print(stderr, "shard {}: {} ({}), left alone\n", s.index, to_string(s.state), s.job);
      continue;
    }
    if (s.complete()) continue;
    fmt::print("shard {}: {} ({}), {}/{} trajectories finished: resubmitting\n", s.index,
               s.job.empty() ? "not submitted" : (s.state_source.empty() ? "ended" : to_string(s.state)),
               s.job.empty() ? "-" : s.job, s.finished, s.cells);
    shards.push_back(s.index);
  }
  for (int w : wanted) {
    if (w < 0 || w >= status->layout.shards) {
      fmt::print(stderr, "error: --shard {}: the run has shards 0..{}\n", w, status->layout.shards - 1);
      return kExitUsage;
    }
  }
  if (shards.empty()) {
    fmt::print("Nothing to resubmit: every shard is complete, queued or running.\n");
    return kExitOk;
  }
  if (dry_run) {
    fmt::print("dry run: would run sbatch --array={} {}\n", slurm::array_spec(shards),
               (top / status->layout.script).string());
    return kExitOk;
  }
  auto job = sbatch(slurm::default_command_runner(), top / status->layout.script, shards);
  if (!job) {
    fmt::print(stderr, "error: {}\n", job.error());
    return kExitEnvironment;
  }
  slurm::Layout layout = status->layout;
  layout.submissions.push_back(slurm::make_submission(*job, shards, "resubmit"));
  if (auto ok = slurm::write_layout(top, layout); !ok) {
    fmt::print(stderr, "error: job {} is submitted but slurm.json could not be updated: {}\n", *job,
               ok.error());
    return kExitEnvironment;
  }
  fmt::print("Submitted array job {} for shard(s) {}; they resume without redoing finished turns.\n", *job,
             slurm::array_spec(shards));
  return kExitOk;
}

int run_merge(const std::vector<std::string> &dirs, const std::string &out) {
  auto loaded = traces::load_runs({dirs.begin(), dirs.end()});
  if (!loaded) {
    fmt::print(stderr, "ptxbench merge: {}\n", loaded.error());
    return kExitEnvironment;
  }
  for (const auto &w : loaded->warnings) fmt::print(stderr, "ptxbench merge: warning: {}\n", w);
  if (loaded->runs.size() != 1) {
    fmt::print(stderr, "ptxbench merge: the inputs hold {} runs; merge takes the shards of one run\n",
               loaded->runs.size());
    return kExitUsage;
  }
  const traces::LoadedRun &run = loaded->runs.front();
  if (auto ok = traces::write_run(run, out); !ok) {
    fmt::print(stderr, "ptxbench merge: {}\n", ok.error());
    return kExitEnvironment;
  }
  fmt::print("Merged {} records of run {} into {}\n", run.turns.size(),
             run.run.run_id.empty() ? "?" : run.run.run_id, out);
  return kExitOk;
}

struct ServeArgs {
  slurm::ServeJobOptions options;
  std::string dir, ptxbench;
  bool dry_run = false;
};

int run_serve_job(ServeArgs a) {
  slurm::ServeJobOptions &o = a.options;
  std::error_code ec;
  o.dir = fs::absolute(a.dir, ec).lexically_normal();
  o.ptxbench = a.ptxbench.empty() ? util::own_executable() : fs::absolute(a.ptxbench, ec);
  if (auto ok = slurm::check_serve_job_options(o); !ok) {
    fmt::print(stderr, "error: {}\n", ok.error());
    return kExitUsage;
  }
  const std::string script = slurm::serve_sbatch_script(o);
  if (a.dry_run) {
    fmt::print("{}", script);
    fmt::print(stderr, "dry run: would write {} and run sbatch --parsable on it\n",
               (o.dir / "serve.sbatch").string());
    return kExitOk;
  }
  fs::create_directories(o.dir / "logs", ec);
  if (ec) {
    fmt::print(stderr, "error: cannot create {}: {}\n", (o.dir / "logs").string(), ec.message());
    return kExitEnvironment;
  }
  // Endpoints of an earlier job are stale: the new job's services write theirs as they start.
  if (fs::exists(o.dir / "endpoints.txt", ec))
    fs::rename(o.dir / "endpoints.txt", o.dir / "endpoints.txt.old", ec);
  if (auto ok = util::write_file_atomic(o.dir / "serve.sbatch", script); !ok) {
    fmt::print(stderr, "error: cannot write {}: {}\n", (o.dir / "serve.sbatch").string(), ok.error());
    return kExitEnvironment;
  }
  fs::permissions(o.dir / "serve.sbatch", fs::perms::owner_exec, fs::perm_options::add, ec);
  auto result = slurm::default_command_runner()({"sbatch", "--parsable", (o.dir / "serve.sbatch").string()});
  if (!result || !result->ok()) {
    fmt::print(stderr, "error: sbatch: {}\n",
               !result ? result.error() : result->describe() + ": " + result->stderr_text.substr(0, 2000));
    return kExitEnvironment;
  }
  auto job = slurm::parse_sbatch_job_id(result->stdout_text);
  if (!job) {
    fmt::print(stderr, "error: {}\n", job.error());
    return kExitEnvironment;
  }
  fmt::print("Submitted job {}: {} node(s) x {} service(s); endpoints appear in {} as they listen.\n", *job,
             o.nodes, std::max(1, o.gpus_per_node), (o.dir / "endpoints.txt").string());
  fmt::print("Balancer: ptxbench slurm balancer {} --out haproxy.cfg && haproxy -f haproxy.cfg\n",
             o.dir.string());
  return kExitOk;
}

int run_balancer(const std::string &source, const std::string &out, const slurm::BalancerOptions &options) {
  fs::path file = source;
  std::error_code ec;
  if (fs::is_directory(file, ec)) file /= "endpoints.txt";
  auto text = util::read_file(file);
  if (!text) {
    fmt::print(stderr, "error: {}: {}\n", file.string(), text.error());
    return kExitEnvironment;
  }
  auto endpoints = slurm::parse_endpoints(*text);
  if (!endpoints) {
    fmt::print(stderr, "error: {}: {}\n", file.string(), endpoints.error());
    return kExitUsage;
  }
  const std::string config = slurm::haproxy_config(*endpoints, options);
  if (out.empty() || out == "-") {
    fmt::print("{}", config);
  } else if (auto ok = util::write_file_atomic(out, config); !ok) {
    fmt::print(stderr, "error: cannot write {}: {}\n", out, ok.error());
    return kExitEnvironment;
  } else {
    fmt::print(stderr, "{} service(s) -> {}\n", endpoints->size(), out);
  }
  return kExitOk;
}

void add_submit_command(CLI::App *cmd, Action &action) {
  auto s = std::make_shared<SubmitArgs>();
  CLI::App *submit = cmd->add_subcommand(
      "submit",
      "Write an sbatch array script (one task per shard: ptxbench run --shard $SLURM_ARRAY_TASK_ID/N) into "
      "a\n"
      "top-level run directory and submit it. The directory must be on a file system every node sees.\n"
      "API keys pass by their variables' names (sbatch exports the submitting environment); no key is "
      "written.\n" +
          std::string(kLimitsNote));
  submit->add_option("--config", s->config, "run config (JSON)")->required()->check(CLI::ExistingFile);
  submit->add_option("--shards", s->shards, "number of shards (array tasks)")
      ->required()
      ->check(CLI::Range(1, 100000));
  submit
      ->add_option("--gpus-per-shard", s->gpus_per_shard,
                   "GPUs per shard (--gres=gpu:G); a shard uses all of them, one GPU stage at a time each")
      ->check(CLI::Range(0, 64));
  submit
      ->add_option("--cpus-per-shard", s->cpus_per_shard,
                   "CPUs per shard (--cpus-per-task; also compile workers)")
      ->check(CLI::Range(0, 1024));
  submit->add_option("--partition", s->partition, "Slurm partition");
  submit->add_option("--time", s->time, "time limit per shard (Slurm format, e.g. 4:00:00)");
  submit->add_option("--account", s->account, "Slurm account");
  submit
      ->add_option("--sbatch-arg", s->sbatch_args,
                   "extra sbatch option, written as --sbatch-arg=--qos=high (repeatable)")
      ->allow_extra_args(false);
  submit->add_option("--out", s->out,
                     "top-level run directory (default: the config's out_dir or runs/<run id>)");
  submit->add_option("--run-id", s->run_id, "run id (default: a new one)");
  submit->add_option("--ptxbench", s->ptxbench, "ptxbench program the nodes run (default: this one)");
  submit->add_flag("--dry-run", s->dry_run, "print the script; write and submit nothing");
  submit->callback([s, &action] { action.run = [s] { return run_submit(*s); }; });
}

void add_status_command(CLI::App *cmd, Action &action) {
  auto status_dir = std::make_shared<std::string>();
  auto status_json = std::make_shared<bool>(false);
  CLI::App *status = cmd->add_subcommand(
      "status",
      "Per shard: Slurm state (squeue, else sacct, else the job's exit file) and progress from its\n"
      "trajectories (finished trajectories, turns, verdict counts).");
  status->add_option("dir", *status_dir, "top-level run directory (from slurm submit)")->required();
  status->add_flag("--json", *status_json, "machine-readable output");
  status->callback([status_dir, status_json, &action] {
    action.run = [status_dir, status_json] { return run_status_cmd(*status_dir, *status_json); };
  });
}

void add_resubmit_command(CLI::App *cmd, Action &action) {
  auto re_dir = std::make_shared<std::string>();
  auto re_only = std::make_shared<std::vector<int>>();
  auto re_dry = std::make_shared<bool>(false);
  CLI::App *resubmit = cmd->add_subcommand(
      "resubmit",
      "Resubmit the shards that are neither complete nor queued/running (failed, cancelled, timed out,\n"
      "never submitted). They resume from their records: finished turns are not redone.");
  resubmit->add_option("dir", *re_dir, "top-level run directory (from slurm submit)")->required();
  resubmit->add_option("--shard", *re_only, "only these shards (comma list)")->delimiter(',');
  resubmit->add_flag("--dry-run", *re_dry, "say what would be resubmitted; submit nothing");
  resubmit->callback([re_dir, re_only, re_dry, &action] {
    action.run = [re_dir, re_only, re_dry] { return run_resubmit(*re_dir, *re_only, *re_dry); };
  });
}

/// `slurm serve`: verdict services as one Slurm job.
void add_serve_job_command(CLI::App *cmd, Action &action) {
  auto sv = std::make_shared<ServeArgs>();
  CLI::App *serve = cmd->add_subcommand(
      "serve",
      "Submit verdict services: one job, one `ptxbench serve` per GPU on each node (ports --port, --port+1,\n"
      "...), each appending \"<host>:<port> <id prefix> <job id>\" to DIR/endpoints.txt once it listens.\n"
      "Put HAProxy in front with `ptxbench slurm balancer DIR`. The token passes by environment variable.");
  serve->add_option("--dir", sv->dir, "directory every node sees (script, endpoints.txt, logs/)")->required();
  serve->add_option("--nodes", sv->options.nodes, "nodes")
      ->capture_default_str()
      ->check(CLI::Range(1, 10000));
  serve
      ->add_option("--gpus-per-node", sv->options.gpus_per_node,
                   "GPUs per node, one service each (0: one "
                   "service without GPU stages)")
      ->capture_default_str()
      ->check(CLI::Range(0, 64));
  serve->add_option("--cpus-per-node", sv->options.cpus_per_node, "CPUs per node (--cpus-per-task)")
      ->check(CLI::Range(0, 4096));
  serve->add_option("--port", sv->options.port, "first service's port on each node")->capture_default_str();
  serve->add_option("--partition", sv->options.partition, "Slurm partition");
  serve->add_option("--time", sv->options.time_limit, "time limit (Slurm format)");
  serve->add_option("--account", sv->options.account, "Slurm account");
  serve
      ->add_option("--sbatch-arg", sv->options.sbatch_args, "extra sbatch option, as --sbatch-arg=--qos=high")
      ->allow_extra_args(false);
  serve->add_option("--serve-arg", sv->options.serve_args, "extra serve option, as --serve-arg=--workers=4")
      ->allow_extra_args(false);
  serve->add_option("--token-env", sv->options.token_env,
                    "variable holding the services' bearer token (exported to them as PTXBENCH_SERVE_TOKEN)");
  serve->add_option("--ptxbench", sv->ptxbench, "ptxbench program the nodes run (default: this one)");
  serve->add_flag("--dry-run", sv->dry_run, "print the script; write and submit nothing");
  serve->callback([sv, &action] { action.run = [sv] { return run_serve_job(*sv); }; });
}

void add_balancer_command(CLI::App *cmd, Action &action) {
  auto lb_source = std::make_shared<std::string>();
  auto lb_out = std::make_shared<std::string>();
  auto lb = std::make_shared<slurm::BalancerOptions>();
  CLI::App *balancer = cmd->add_subcommand(
      "balancer",
      "An HAProxy configuration from the endpoints file of `slurm serve`: submissions to the least busy\n"
      "healthy service, each poll to the service holding its request; rerun it when services change.");
  balancer->add_option("endpoints", *lb_source, "DIR of `slurm serve` or its endpoints.txt")->required();
  balancer->add_option("--out", *lb_out, "write here (default: stdout)");
  balancer->add_option("--bind", lb->bind, "where HAProxy listens")->capture_default_str();
  balancer->add_option("--max-wait", lb->max_wait_s, "the services' --max-wait, seconds")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  balancer->callback([lb_source, lb_out, lb, &action] {
    action.run = [lb_source, lb_out, lb] {
      if (lb->bind.find_first_of(" \t\r\n#") != std::string::npos || lb->bind.empty()) {
        fmt::print(stderr, "error: --bind '{}': an address:port without blanks\n", lb->bind);
        return static_cast<int>(kExitUsage);
      }
      return run_balancer(*lb_source, *lb_out, *lb);
    };
  });
}

}  // namespace

void register_slurm_commands(CLI::App &app, Action &action) {
  CLI::App *cmd = app.add_subcommand(
      "slurm", "Run one run sharded over a Slurm array job: submit, follow, resubmit failed shards.\n" +
                   std::string(kLimitsNote));
  cmd->require_subcommand(1);
  add_submit_command(cmd, action);
  add_status_command(cmd, action);
  add_resubmit_command(cmd, action);
  add_serve_job_command(cmd, action);
  add_balancer_command(cmd, action);
}

void register_merge_command(CLI::App &app, Action &action) {
  auto dirs = std::make_shared<std::vector<std::string>>();
  auto out = std::make_shared<std::string>();
  CLI::App *cmd = app.add_subcommand(
      "merge",
      "Merge the shards of one run (a top-level directory or shard directories) into one run directory.\n"
      "Refuses shards of different runs (run id, config hash) and cells present in two shards.");
  cmd->add_option("dirs", *dirs, "top-level directory or shard directories")->required();
  cmd->add_option("--out", *out, "the merged run directory (created; must not hold a run)")->required();
  cmd->callback([dirs, out, &action] { action.run = [dirs, out] { return run_merge(*dirs, *out); }; });
}

}  // namespace ptxbench::cli
