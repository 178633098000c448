#include "agent/slurm.hpp"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <random>
#include <set>
#include <sstream>

#include <fmt/core.h>

#include "agent/detail/clocks.hpp"
#include "traces/outcome.hpp"
#include "traces/record.hpp"
#include "util/files.hpp"

extern char **environ;

namespace ptxbench::agent::slurm {

namespace fs = std::filesystem;
using Json = nlohmann::json;

std::string shell_quote(const std::string &text) {
  std::string out = "'";
  for (char c : text) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out += c;
    }
  }
  return out + "'";
}

namespace {

std::optional<int> parse_int(std::string_view s) {
  int value = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
  if (ec != std::errc() || end != s.data() + s.size() || s.empty()) return std::nullopt;
  return value;
}

std::vector<std::string_view> split(std::string_view text, char sep) {
  std::vector<std::string_view> out;
  std::size_t start = 0;
  while (true) {
    const auto at = text.find(sep, start);
    out.push_back(text.substr(start, at == std::string_view::npos ? std::string_view::npos : at - start));
    if (at == std::string_view::npos) break;
    start = at + 1;
  }
  return out;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

/// "123_4" -> {123, [4]}; "123_[1-3,7%2]" -> {123, [1, 2, 3, 7]}; anything else -> no tasks.
std::pair<std::string, std::vector<int>> parse_array_job_id(std::string_view id) {
  const auto underscore = id.find('_');
  if (underscore == std::string_view::npos || underscore == 0) return {};
  std::string job(id.substr(0, underscore));
  if (!std::all_of(job.begin(), job.end(),
                   [](char c) { return std::isdigit(static_cast<unsigned char>(c)); }))
    return {};
  std::string_view rest = id.substr(underscore + 1);
  std::vector<int> tasks;
  if (auto single = parse_int(rest)) {
    tasks.push_back(*single);
    return {job, tasks};
  }
  if (rest.size() < 2 || rest.front() != '[' || rest.back() != ']') return {};
  rest = rest.substr(1, rest.size() - 2);
  if (const auto pct = rest.find('%'); pct != std::string_view::npos) rest = rest.substr(0, pct);
  for (std::string_view part : split(rest, ',')) {
    const auto dash = part.find('-');
    if (dash == std::string_view::npos) {
      if (auto v = parse_int(part)) tasks.push_back(*v);
      continue;
    }
    auto lo = parse_int(part.substr(0, dash));
    auto hi = parse_int(part.substr(dash + 1));
    if (!lo || !hi || *hi < *lo || *hi - *lo > 1'000'000) continue;
    for (int v = *lo; v <= *hi; ++v) tasks.push_back(v);
  }
  return {job, tasks};
}

std::vector<ArrayTask> parse_table(std::string_view text) {
  std::vector<ArrayTask> out;
  for (std::string_view line : split(text, '\n')) {
    line = trim(line);
    if (line.empty()) continue;
    const auto fields = split(line, '|');
    if (fields.size() < 2) continue;
    auto [job, tasks] = parse_array_job_id(trim(fields[0]));
    for (int t : tasks) {
      ArrayTask a;
      a.array_job_id = job;
      a.task = t;
      a.state = job_state_from_slurm(trim(fields[1]));
      if (fields.size() > 2) a.detail = std::string(trim(fields[2]));
      out.push_back(std::move(a));
    }
  }
  return out;
}

std::string first_line(const std::string &text) {
  const auto nl = text.find('\n');
  return std::string(trim(std::string_view(text).substr(0, nl)));
}

}  // namespace

// ---------------------------------------------------------------- the script

std::string job_name(const std::string &run_id) {
  return "ptxbench-" + run_id;
}

void check_job_paths_and_options(std::vector<std::string> &problems, const std::string &dir_name,
                                 const fs::path &dir, const fs::path &ptxbench, const std::string &partition,
                                 const std::string &time_limit, const std::string &account,
                                 const std::vector<std::string> &sbatch_args) {
  if (!dir.is_absolute()) problems.push_back(dir_name + " must be an absolute path");
  if (!ptxbench.is_absolute()) problems.push_back("the ptxbench path must be absolute");
  auto no_newline = [&](const std::string &what, const std::string &value) {
    if (value.find_first_of("\r\n") != std::string::npos)
      problems.push_back(fmt::format("{} must not contain a line break", what));
  };
  // sbatch splits #SBATCH lines at blanks: paths on them must have none.
  if (dir.string().find_first_of(" \t\r\n\"'") != std::string::npos)
    problems.push_back(fmt::format("{} '{}' must not contain blanks or quotes (it appears on #SBATCH lines)",
                                   dir_name, dir.string()));
  no_newline("the ptxbench path", ptxbench.string());
  no_newline("--partition", partition);
  no_newline("--time", time_limit);
  no_newline("--account", account);
  for (const auto &a : sbatch_args) {
    no_newline("--sbatch-arg " + a.substr(0, 40), a);
    if (a.rfind("-", 0) != 0)
      problems.push_back(fmt::format("--sbatch-arg '{}': expected an option such as --qos=high", a));
  }
}

util::Expected<void> check_submit_options(const SubmitOptions &o) {
  std::vector<std::string> problems;
  if (o.shards < 1 || o.shards > 100000) problems.push_back("--shards must be between 1 and 100000");
  if (o.gpus_per_shard < 0) problems.push_back("--gpus-per-shard must be >= 0");
  if (o.cpus_per_shard < 0) problems.push_back("--cpus-per-shard must be >= 0");
  check_job_paths_and_options(problems, "the run directory", o.top_dir, o.ptxbench, o.partition, o.time_limit,
                              o.account, o.sbatch_args);
  for (const auto &a : o.sbatch_args) {
    if (a.rfind("--array", 0) == 0 || a.rfind("-a", 0) == 0 || a.rfind("--output", 0) == 0 ||
        a.rfind("--job-name", 0) == 0)
      problems.push_back(
          fmt::format("--sbatch-arg '{}': the array, output and job name are set by ptxbench", a));
  }
  if (o.run_id.empty() || !std::all_of(o.run_id.begin(), o.run_id.end(), [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.';
      }))
    problems.push_back(fmt::format("run id '{}': use letters, digits, '-', '_' and '.'", o.run_id));
  for (const auto &k : o.key_env_names) {
    if (k.empty() || !std::all_of(k.begin(), k.end(), [](char c) {
          return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
        }))
      problems.push_back(fmt::format("api_key_env '{}' is not a variable name", k));
  }
  if (problems.empty()) return {};
  std::string message;
  for (const auto &p : problems) message += (message.empty() ? "" : "\n") + p;
  return util::unexpected(message);
}

std::string sbatch_resource_lines(int gpus, int cpus, const std::string &partition,
                                  const std::string &time_limit, const std::string &account,
                                  const std::vector<std::string> &extra) {
  std::string s;
  if (gpus > 0) s += fmt::format("#SBATCH --gres=gpu:{}\n", gpus);
  if (cpus > 0) s += fmt::format("#SBATCH --cpus-per-task={}\n", cpus);
  if (!partition.empty()) s += fmt::format("#SBATCH --partition={}\n", partition);
  if (!time_limit.empty()) s += fmt::format("#SBATCH --time={}\n", time_limit);
  if (!account.empty()) s += fmt::format("#SBATCH --account={}\n", account);
  for (const auto &a : extra) s += fmt::format("#SBATCH {}\n", a);
  return s;
}

std::string sbatch_script(const SubmitOptions &o) {
  const std::string top = o.top_dir.string();
  std::string s;
  s += "#!/bin/bash\n";
  s += fmt::format(
      "# PTXBench run {}: one array task per shard ({} shards), written by `ptxbench slurm submit`.\n",
      o.run_id, o.shards);
  s += "# Each task runs `ptxbench run --shard $SLURM_ARRAY_TASK_ID/N` into shard-<I>/, or resumes it when "
       "it\n";
  s += "# already has records. Resubmit failed shards with `ptxbench slurm resubmit <this directory>`.\n";
  s += fmt::format("#SBATCH --job-name={}\n", job_name(o.run_id));
  s += fmt::format("#SBATCH --array=0-{}\n", o.shards - 1);
  s += "#SBATCH --ntasks=1\n";
  s += fmt::format("#SBATCH --chdir={}\n", top);
  s += fmt::format("#SBATCH --output={}/logs/shard-%a.%A.out\n", top);
  s += sbatch_resource_lines(o.gpus_per_shard, o.cpus_per_shard, o.partition, o.time_limit, o.account,
                             o.sbatch_args);
  s += "\nset -u\n";
  s += "shard=\"${SLURM_ARRAY_TASK_ID:?submit this script with sbatch --array}\"\n";
  s += fmt::format("top={}\n", shell_quote(top));
  s += fmt::format("ptxbench={}\n", shell_quote(o.ptxbench.string()));
  s += "dir=\"$top/shard-$shard\"\n";
  s += "exit_file=\"$top/logs/shard-$shard.${SLURM_ARRAY_JOB_ID:-${SLURM_JOB_ID:-0}}.exit\"\n";
  if (!o.key_env_names.empty()) {
    std::string names;
    for (const auto &k : o.key_env_names) names += (names.empty() ? "" : " ") + k;
    s += "# API keys: only the variables' names are written here; sbatch exports the submitting "
         "environment.\n";
    s += fmt::format("for name in {}; do\n", names);
    s += "  if [ -z \"${!name:-}\" ]; then\n";
    s += "    echo \"ptxbench: $name is not set in the job's environment (export it before submitting)\" "
         ">&2\n";
    s += "    echo 3 > \"$exit_file\"\n";
    s += "    exit 3\n";
    s += "  fi\n";
    s += "done\n";
  }
  s += "# GPUs: the ones Slurm allocated to this task (CUDA_VISIBLE_DEVICES); the shard uses all of them.\n";
  s += fmt::format(
      "echo \"ptxbench: shard $shard/{} of run {} on $(hostname), job ${{SLURM_JOB_ID:-?}}, GPUs "
      "${{CUDA_VISIBLE_DEVICES:-none}}\"\n",
      o.shards, o.run_id);
  s += "if [ -f \"$dir/trajectories.jsonl\" ]; then\n";
  s += "  \"$ptxbench\" resume \"$dir\" --progress lines\n";
  s += "else\n";
  s += fmt::format(
      "  \"$ptxbench\" run --config \"$top/config.json\" --shard \"$shard/{}\" --run-id {} --out \"$top\"",
      o.shards, shell_quote(o.run_id));
  if (o.cpus_per_shard > 0) s += fmt::format(" --compile-workers {}", o.cpus_per_shard);
  s += " --progress lines\n";
  s += "fi\n";
  s += "rc=$?\n";
  s += "echo \"$rc\" > \"$exit_file\"\n";
  s += "exit \"$rc\"\n";
  return s;
}

// ---------------------------------------------------------------- states and parsing

std::string to_string(JobState s) {
  switch (s) {
    case JobState::pending:
      return "PENDING";
    case JobState::running:
      return "RUNNING";
    case JobState::suspended:
      return "SUSPENDED";
    case JobState::completing:
      return "COMPLETING";
    case JobState::configuring:
      return "CONFIGURING";
    case JobState::requeued:
      return "REQUEUED";
    case JobState::resizing:
      return "RESIZING";
    case JobState::completed:
      return "COMPLETED";
    case JobState::failed:
      return "FAILED";
    case JobState::cancelled:
      return "CANCELLED";
    case JobState::timeout:
      return "TIMEOUT";
    case JobState::node_fail:
      return "NODE_FAIL";
    case JobState::out_of_memory:
      return "OUT_OF_MEMORY";
    case JobState::preempted:
      return "PREEMPTED";
    case JobState::boot_fail:
      return "BOOT_FAIL";
    case JobState::deadline:
      return "DEADLINE";
    case JobState::unknown:
      return "UNKNOWN";
  }
  return "UNKNOWN";
}

JobState job_state_from_slurm(std::string_view text) {
  text = trim(text);
  const auto blank = text.find(' ');
  if (blank != std::string_view::npos) text = text.substr(0, blank);  // "CANCELLED by 1000"
  if (!text.empty() && text.back() == '+') text.remove_suffix(1);     // sacct's truncation mark
  static const std::pair<std::string_view, JobState> kNames[] = {
      {"PENDING", JobState::pending},
      {"PD", JobState::pending},
      {"RUNNING", JobState::running},
      {"R", JobState::running},
      {"SUSPENDED", JobState::suspended},
      {"S", JobState::suspended},
      {"COMPLETING", JobState::completing},
      {"CG", JobState::completing},
      {"CONFIGURING", JobState::configuring},
      {"CF", JobState::configuring},
      {"REQUEUED", JobState::requeued},
      {"RQ", JobState::requeued},
      {"REQUEUE_HOLD", JobState::requeued},
      {"REQUEUE_FED", JobState::requeued},
      {"RESIZING", JobState::resizing},
      {"RS", JobState::resizing},
      {"COMPLETED", JobState::completed},
      {"CD", JobState::completed},
      {"FAILED", JobState::failed},
      {"F", JobState::failed},
      {"CANCELLED", JobState::cancelled},
      {"CA", JobState::cancelled},
      {"TIMEOUT", JobState::timeout},
      {"TO", JobState::timeout},
      {"NODE_FAIL", JobState::node_fail},
      {"NF", JobState::node_fail},
      {"OUT_OF_MEMORY", JobState::out_of_memory},
      {"OOM", JobState::out_of_memory},
      {"PREEMPTED", JobState::preempted},
      {"PR", JobState::preempted},
      {"BOOT_FAIL", JobState::boot_fail},
      {"BF", JobState::boot_fail},
      {"DEADLINE", JobState::deadline},
      {"DL", JobState::deadline},
  };
  for (const auto &[name, state] : kNames) {
    if (text == name) return state;
  }
  return JobState::unknown;
}

bool is_active(JobState s) {
  switch (s) {
    case JobState::pending:
    case JobState::running:
    case JobState::suspended:
    case JobState::completing:
    case JobState::configuring:
    case JobState::requeued:
    case JobState::resizing:
      return true;
    default:
      return false;
  }
}

std::vector<ArrayTask> parse_squeue(std::string_view text) {
  return parse_table(text);
}

std::vector<ArrayTask> parse_sacct(std::string_view text) {
  return parse_table(text);
}

util::Expected<std::string> parse_sbatch_job_id(std::string_view text) {
  std::string_view t = trim(text);
  // The last non-empty line: sbatch may print warnings before the id.
  if (const auto nl = t.rfind('\n'); nl != std::string_view::npos) t = trim(t.substr(nl + 1));
  if (const auto semi = t.find(';'); semi != std::string_view::npos) t = t.substr(0, semi);
  if (t.empty() ||
      !std::all_of(t.begin(), t.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); }))
    return util::unexpected(
        fmt::format("sbatch printed no job id: '{}'", std::string(trim(text)).substr(0, 200)));
  return std::string(t);
}

// ---------------------------------------------------------------- slurm.json

std::string array_spec(const std::vector<int> &shards) {
  std::vector<int> sorted = shards;
  std::sort(sorted.begin(), sorted.end());
  sorted.erase(std::unique(sorted.begin(), sorted.end()), sorted.end());
  std::string out;
  for (std::size_t i = 0; i < sorted.size();) {
    std::size_t j = i;
    while (j + 1 < sorted.size() && sorted[j + 1] == sorted[j] + 1) ++j;
    out += out.empty() ? "" : ",";
    out += j > i ? fmt::format("{}-{}", sorted[i], sorted[j]) : std::to_string(sorted[i]);
    i = j + 1;
  }
  return out;
}

Json Layout::to_json() const {
  Json subs = Json::array();
  for (const auto &s : submissions)
    subs.push_back({{"job_id", s.job_id}, {"shards", s.shards}, {"kind", s.kind}, {"at", s.at}});
  return {{"format_version", 1}, {"run_id", run_id},         {"config_hash", config_hash},
          {"shards", shards},    {"cells_per_shard", cells}, {"script", script},
          {"options", options},  {"submissions", subs}};
}

util::Expected<Layout> layout_from_json(const Json &j, const std::string &origin) {
  try {
    Layout l;
    l.run_id = j.at("run_id").get<std::string>();
    l.config_hash = j.at("config_hash").get<std::string>();
    l.shards = j.at("shards").get<int>();
    l.cells = j.at("cells_per_shard").get<std::vector<int>>();
    l.script = j.at("script").get<std::string>();
    l.options = j.value("options", Json::object());
    for (const auto &s : j.at("submissions")) {
      Submission sub;
      sub.job_id = s.at("job_id").get<std::string>();
      sub.shards = s.at("shards").get<std::vector<int>>();
      sub.kind = s.value("kind", "");
      sub.at = s.value("at", "");
      l.submissions.push_back(std::move(sub));
    }
    if (l.shards < 1 || static_cast<int>(l.cells.size()) != l.shards)
      return util::unexpected(fmt::format("{}: cells_per_shard must list one count per shard", origin));
    if (l.script.find('/') != std::string::npos)
      return util::unexpected(fmt::format("{}: script must be a file name in the run directory", origin));
    return l;
  } catch (const Json::exception &e) {
    return util::unexpected(fmt::format("{}: not a ptxbench Slurm layout ({})", origin, e.what()));
  }
}

util::Expected<Layout> read_layout(const fs::path &top_dir) {
  const fs::path file = top_dir / "slurm.json";
  auto text = util::read_file(file, 16u << 20);
  if (!text) {
    return util::unexpected(fmt::format(
        "{}: no slurm.json (is this the directory `ptxbench slurm submit` created?)", top_dir.string()));
  }
  Json j = Json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return util::unexpected(fmt::format("{}: not valid JSON", file.string()));
  return layout_from_json(j, file.string());
}

util::Expected<void> write_layout(const fs::path &top_dir, const Layout &layout) {
  return util::write_file_atomic(top_dir / "slurm.json", layout.to_json().dump(2) + "\n");
}

// ---------------------------------------------------------------- commands

std::string new_run_id() {
  std::random_device rd;
  return fmt::format("{}-{:04x}", detail::compact_utc_now(), rd() & 0xffff);
}

Submission make_submission(std::string job_id, std::vector<int> shards, std::string kind) {
  return Submission{std::move(job_id), std::move(shards), std::move(kind), detail::iso8601_utc_now()};
}

CommandRunner default_command_runner() {
  return [](const std::vector<std::string> &argv) -> util::Expected<util::ProcessResult> {
    util::ProcessSpec spec;
    spec.argv = argv;
    for (char **e = environ; e != nullptr && *e != nullptr; ++e) {
      std::string_view kv(*e);
      const auto eq = kv.find('=');
      if (eq == std::string_view::npos) continue;
      spec.env.emplace(std::string(kv.substr(0, eq)), std::string(kv.substr(eq + 1)));
    }
    spec.limits.wall_time = std::chrono::milliseconds(120'000);
    spec.limits.cpu_seconds = 120;
    return util::run_process(spec);
  };
}

// ---------------------------------------------------------------- status

namespace {

void read_progress(const fs::path &dir, ShardStatus &s) {
  std::error_code ec;
  s.has_run_dir = fs::exists(dir / "run.json", ec);
  if (!fs::exists(dir / "trajectories.jsonl", ec)) return;
  auto run = traces::load_run(dir);
  if (!run) return;
  std::map<std::string, std::pair<int, bool>> last;  // trajectory -> (last turn, stopped)
  for (const auto &r : run->turns) {
    ++s.turns;
    s.verdicts[traces::status_of(r)] += 1;
    const int turn = r.turn;
    const bool stopped = !r.stop_reason.empty();
    auto [it, inserted] = last.try_emplace(r.trajectory_id, turn, stopped);
    if (!inserted && turn >= it->second.first) it->second = {turn, stopped};
  }
  s.started = static_cast<int>(last.size());
  for (const auto &[id, l] : last) s.finished += l.second ? 1 : 0;
}

using LatestJobs = std::map<int, std::string>;  // shard -> array job id of its latest submission

/// Takes each shard's state from `tasks` (as `source` lists them), for shards not resolved yet.
void take_states(RunStatus &status, LatestJobs &latest_job, const std::vector<ArrayTask> &tasks,
                 const std::string &source) {
  for (auto &s : status.shards) {
    if (!s.state_source.empty() || s.job.empty()) continue;
    const std::string &job = latest_job[s.index];
    for (const auto &t : tasks) {
      if (t.array_job_id == job && t.task == s.index) {
        s.state = t.state;
        s.state_source = source;
        s.detail = t.detail;
      }
    }
  }
}

/// Queued and running tasks (and those squeue still remembers) of the run's job name.
void states_from_squeue(RunStatus &status, LatestJobs &latest_job, const CommandRunner &run) {
  auto squeue = run({"squeue", "--noheader", "--array", "--states=all",
                     "--name=" + job_name(status.layout.run_id), "--format=%i|%T|%R"});
  if (!squeue) {
    status.notes.push_back("squeue: " + squeue.error());
  } else if (!squeue->ok()) {
    status.notes.push_back(
        fmt::format("squeue: {}: {}", squeue->describe(), first_line(squeue->stderr_text)));
  } else {
    take_states(status, latest_job, parse_squeue(squeue->stdout_text), "squeue");
  }
}

/// Accounting, by job id, for the shards squeue no longer lists.
void states_from_sacct(RunStatus &status, LatestJobs &latest_job, const CommandRunner &run) {
  std::set<std::string> unresolved;
  for (const auto &s : status.shards) {
    if (s.state_source.empty() && !s.job.empty()) unresolved.insert(latest_job[s.index]);
  }
  if (unresolved.empty()) return;
  std::string jobs;
  for (const auto &j : unresolved) jobs += (jobs.empty() ? "" : ",") + j;
  auto sacct = run({"sacct", "--noheader", "--parsable2", "--allocations", "--jobs=" + jobs,
                    "--format=JobID,State,ExitCode"});
  if (!sacct) {
    status.notes.push_back("sacct: " + sacct.error() +
                           "; finished shards' states come from their exit files");
  } else if (!sacct->ok()) {
    status.notes.push_back(
        fmt::format("sacct unavailable ({}: {}); finished shards' states come from their exit files",
                    sacct->describe(), first_line(sacct->stderr_text + sacct->stdout_text)));
  } else {
    take_states(status, latest_job, parse_sacct(sacct->stdout_text), "sacct");
  }
}

/// Last resort: the exit code the job script wrote for the shard.
void states_from_exit_files(RunStatus &status, LatestJobs &latest_job, const fs::path &top_dir) {
  for (auto &s : status.shards) {
    if (!s.state_source.empty() || s.job.empty()) continue;
    const fs::path exit_file =
        top_dir / "logs" / fmt::format("shard-{}.{}.exit", s.index, latest_job[s.index]);
    auto text = util::read_file(exit_file, 4096);
    if (!text) continue;  // killed before it could write one (cancelled, timed out, node lost)
    const auto code = parse_int(trim(*text));
    if (!code) continue;
    s.state = *code == 0 ? JobState::completed : JobState::failed;
    s.state_source = "exit file";
    s.detail = fmt::format("exit {}", *code);
  }
}

}  // namespace

util::Expected<RunStatus> run_status(const fs::path &top_dir, const CommandRunner &run) {
  auto layout = read_layout(top_dir);
  if (!layout) return util::unexpected(layout.error());
  RunStatus status;
  status.layout = *layout;
  LatestJobs latest_job;
  for (const auto &sub : layout->submissions) {
    for (int shard : sub.shards) latest_job[shard] = sub.job_id;
  }
  for (int i = 0; i < layout->shards; ++i) {
    ShardStatus s;
    s.index = i;
    s.cells = layout->cells[static_cast<std::size_t>(i)];
    if (auto it = latest_job.find(i); it != latest_job.end()) s.job = fmt::format("{}_{}", it->second, i);
    read_progress(top_dir / fmt::format("shard-{}", i), s);
    status.shards.push_back(std::move(s));
  }
  if (latest_job.empty()) {
    status.notes.push_back("not submitted yet");
    return status;
  }
  states_from_squeue(status, latest_job, run);
  states_from_sacct(status, latest_job, run);
  states_from_exit_files(status, latest_job, top_dir);
  return status;
}

std::string RunStatus::table() const {
  std::string out = fmt::format("{:>5}  {:<14}  {:<13}  {:<9}  {:>11}  {:>5}  {}\n", "shard", "job", "state",
                                "from", "trajectories", "turns", "verdicts");
  int done = 0, cells = 0;
  for (const auto &s : shards) {
    std::string verdicts;
    for (const auto &[k, v] : s.verdicts)
      verdicts += fmt::format("{}{} {}", verdicts.empty() ? "" : ", ", k, v);
    std::string state = s.job.empty() ? "not submitted" : to_string(s.state);
    if (!s.job.empty() && s.state_source.empty()) state = s.complete() ? "ended" : "ended?";
    out += fmt::format("{:>5}  {:<14}  {:<13}  {:<9}  {:>11}  {:>5}  {}\n", s.index,
                       s.job.empty() ? "-" : s.job, state, s.state_source.empty() ? "-" : s.state_source,
                       fmt::format("{}/{}", s.finished, s.cells), s.turns, verdicts.empty() ? "-" : verdicts);
    done += s.finished;
    cells += s.cells;
  }
  int resubmit = 0;
  for (const auto &s : shards) resubmit += s.needs_resubmit() && !s.job.empty() ? 1 : 0;
  out += fmt::format("{} of {} trajectories finished; {} shard(s) to resubmit\n", done, cells, resubmit);
  for (const auto &n : notes) out += "note: " + n + "\n";
  return out;
}

Json RunStatus::to_json() const {
  Json list = Json::array();
  for (const auto &s : shards) {
    list.push_back({{"shard", s.index},
                    {"job", s.job},
                    {"state", to_string(s.state)},
                    {"state_source", s.state_source},
                    {"detail", s.detail},
                    {"cells", s.cells},
                    {"started", s.started},
                    {"finished", s.finished},
                    {"turns", s.turns},
                    {"verdicts", s.verdicts},
                    {"complete", s.complete()},
                    {"needs_resubmit", s.needs_resubmit()}});
  }
  return {{"run_id", layout.run_id}, {"config_hash", layout.config_hash}, {"shards", list}, {"notes", notes}};
}

}  // namespace ptxbench::agent::slurm
