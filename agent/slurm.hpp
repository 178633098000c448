// Scale-out on a Slurm cluster: one run sharded over an sbatch array job (one
// array task per shard, each `ptxbench run --shard $SLURM_ARRAY_TASK_ID/N`),
// tracked from squeue/sacct and the shards' own trajectories, and resubmitted
// where shards failed, were cancelled or timed out (they resume without
// redoing finished turns). Slurm is driven only through its commands (sbatch,
// squeue, sacct), run with argv (never a shell) and parsed from their
// machine-readable output.
//
// Top-level run directory (shared by every node):
//   slurm.json           run id, config hash, shard layout, sbatch options, submissions [{job_id, shards}]
//   config.json          the run config every shard reads (paths resolved, no secrets)
//   ptxbench.sbatch      the array job script
//   logs/                shard-<I>.<array job id>.out (stdout+stderr), shard-<I>.<array job id>.exit (exit
//   code) shard-<I>/           each shard's run directory (run.json + trajectories.jsonl)
#pragma once

#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "util/expected.hpp"
#include "util/subprocess.hpp"

namespace ptxbench::agent::slurm {

/// What an sbatch array job asks for; everything but the paths comes from `ptxbench slurm submit` flags.
struct SubmitOptions {
  std::string run_id;
  int shards = 1;
  int gpus_per_shard = 0;  ///< GPUs per array task ("--gres=gpu:G"); 0 = none requested
  int cpus_per_shard = 0;  ///< "--cpus-per-task"; also the shard's compile workers; 0 = Slurm's default
  std::string partition;   ///< "--partition"; empty = the cluster's default
  std::string time_limit;  ///< "--time" per shard, Slurm's format (e.g. 4:00:00); empty = partition default
  std::string account;     ///< "--account"; empty = the user's default
  std::vector<std::string> sbatch_args;    ///< extra "#SBATCH" options, verbatim (e.g. --qos=high)
  std::filesystem::path top_dir;           ///< absolute; on a file system every node sees
  std::filesystem::path ptxbench;          ///< absolute path of the ptxbench program on the nodes
  std::vector<std::string> key_env_names;  ///< variables that must be set in the job (values never written)
};

/// 'text' for bash: single quotes, each ' written as '\''.
std::string shell_quote(const std::string &text);

/// The #SBATCH lines both job scripts share: --gres=gpu:G and --cpus-per-task=C (when > 0), partition, time
/// and account (when given), then the extra options verbatim.
std::string sbatch_resource_lines(int gpus, int cpus, const std::string &partition,
                                  const std::string &time_limit, const std::string &account,
                                  const std::vector<std::string> &extra);

/// Checks both job scripts share, appended to `problems`: the directory (`dir_name` in messages) and the
/// program absolute, no blanks or quotes in the directory, no line breaks, extra sbatch options start with
/// '-'.
void check_job_paths_and_options(std::vector<std::string> &problems, const std::string &dir_name,
                                 const std::filesystem::path &dir, const std::filesystem::path &ptxbench,
                                 const std::string &partition, const std::string &time_limit,
                                 const std::string &account, const std::vector<std::string> &sbatch_args);

/// Problems with the options (newlines in arguments, shard count, relative paths); one per line.
util::Expected<void> check_submit_options(const SubmitOptions &options);

/// "ptxbench-<run id>": the job name every submission of the run carries (squeue filters on it).
std::string job_name(const std::string &run_id);

/// The sbatch script: #SBATCH header, then per array task `ptxbench run --shard $SLURM_ARRAY_TASK_ID/N`,
/// or `ptxbench resume` when the shard already has records; writes logs/shard-<I>.<job>.exit at the end.
std::string sbatch_script(const SubmitOptions &options);

/// Slurm job states as squeue/sacct print them (%T / State).
enum class JobState {
  pending,
  running,
  suspended,
  completing,
  configuring,
  requeued,
  resizing,
  completed,
  failed,
  cancelled,
  timeout,
  node_fail,
  out_of_memory,
  preempted,
  boot_fail,
  deadline,
  unknown,
};
std::string to_string(JobState);
/// "RUNNING", "CANCELLED by 1000", "OUT_OF_MEMORY", "CD": the first word (long or short form).
JobState job_state_from_slurm(std::string_view text);
/// Still queued or running (a resubmission would run the shard twice).
bool is_active(JobState);

/// One array task as squeue or sacct reports it.
struct ArrayTask {
  std::string array_job_id;  ///< the array's job id (the number sbatch printed)
  int task = -1;             ///< array index = shard index
  JobState state = JobState::unknown;
  std::string detail;  ///< squeue: reason / node list; sacct: ExitCode
};

/// `squeue --noheader --array --states=all --format=%i|%T|%R` output: "123_4|RUNNING|node1" per line.
/// Pending ranges that were not expanded ("123_[5-7]") are expanded. Unparseable lines are skipped.
std::vector<ArrayTask> parse_squeue(std::string_view text);
/// `sacct --noheader --parsable2 --allocations --format=JobID,State,ExitCode` output:
/// "123_4|CANCELLED by 0|0:15" per line; ranges expanded like parse_squeue.
std::vector<ArrayTask> parse_sacct(std::string_view text);
/// sbatch --parsable output "123" or "123;cluster" -> "123".
util::Expected<std::string> parse_sbatch_job_id(std::string_view text);

/// One sbatch call of the run.
struct Submission {
  std::string job_id;
  std::vector<int> shards;
  std::string kind;  ///< "submit" | "resubmit"
  std::string at;    ///< ISO-8601 UTC
};

/// slurm.json.
struct Layout {
  std::string run_id;
  std::string config_hash;
  int shards = 1;
  std::vector<int> cells;  ///< cells (trajectories) per shard
  std::string script = "ptxbench.sbatch";
  nlohmann::json options;  ///< the SubmitOptions as given (for the record)
  std::vector<Submission> submissions;
  nlohmann::json to_json() const;
};
util::Expected<Layout> layout_from_json(const nlohmann::json &j, const std::string &origin);
util::Expected<Layout> read_layout(const std::filesystem::path &top_dir);
util::Expected<void> write_layout(const std::filesystem::path &top_dir, const Layout &layout);
/// "0-2" / "1,4,7"
std::string array_spec(const std::vector<int> &shards);

/// A new run id ("<UTC time>-<4 hex>", like a single-process run's).
std::string new_run_id();
/// A submission stamped with the current time.
Submission make_submission(std::string job_id, std::vector<int> shards, std::string kind);

/// Runs a Slurm command (argv[0] looked up in PATH) with this process's environment: sbatch exports it
/// to the job (API keys reach the shards that way, never through a file), and SLURM_CONF must reach
/// squeue/sacct. Tests swap it for canned output.
using CommandRunner = std::function<util::Expected<util::ProcessResult>(const std::vector<std::string> &)>;
CommandRunner default_command_runner();

/// A shard's state and progress.
struct ShardStatus {
  int index = 0;
  std::string job;  ///< "<array job id>_<index>" of its latest submission; "" when never submitted
  JobState state = JobState::unknown;
  std::string state_source;             ///< "squeue", "sacct", "exit file" or "" (unknown)
  std::string detail;                   ///< squeue reason / sacct exit code / exit file code
  int cells = 0;                        ///< trajectories the shard owns (slurm.json layout)
  int started = 0;                      ///< trajectories with at least one record
  int finished = 0;                     ///< trajectories whose last record has a stop reason
  int turns = 0;                        ///< turn records
  std::map<std::string, int> verdicts;  ///< verdict status (or request_failed) -> turns
  bool has_run_dir = false;             ///< shard-<I>/run.json exists
  bool complete() const { return finished >= cells; }
  /// Not queued or running, and not complete: failed, cancelled, timed out, killed, or never started.
  bool needs_resubmit() const { return !is_active(state) && !complete(); }
};

struct RunStatus {
  Layout layout;
  std::vector<ShardStatus> shards;
  std::vector<std::string> notes;  ///< e.g. "sacct: accounting storage is disabled; ..."
  std::string table() const;
  nlohmann::json to_json() const;
};

/// Reads slurm.json and the shards' directories, asks squeue (by job name) and, for the shards squeue
/// no longer lists, sacct (by job id); without accounting (sacct fails) the job script's exit file
/// tells completed from failed, and a shard that left neither is "unknown" (then its records decide).
util::Expected<RunStatus> run_status(const std::filesystem::path &top_dir, const CommandRunner &run);

}  // namespace ptxbench::agent::slurm
