// run.json, typed: what a run directory says about its run (config, seed, GPUs, sessions, shard). The
// runner writes it through RunRecord::to_json and every reader (resume, shards, reports, exports, repairs)
// goes through RunRecord::from_json; field names are the format.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "util/expected.hpp"

namespace ptxbench::traces {

/// Every record below keeps the keys it does not know in `extra` and writes them back, so a run.json
/// written by a newer version survives a resume's rewrite; a known key of the wrong type or out of range is
/// refused by RunRecord::from_json, naming it ("resumes[1].gpu_stages.gpus: expected an array").

/// The program that made the run ("program").
struct ProgramInfo {
  std::string name;          ///< "ptxbench"
  std::string version;       ///< PTXBENCH_VERSION
  std::string git_revision;  ///< of the build, "" when unknown
  nlohmann::json extra = nlohmann::json::object();
};

/// Whether a session ran GPU stages ("gpu_stages"): {enabled: true, gpus} or {enabled: false, reason}.
struct GpuStagesRecord {
  bool enabled = false;
  std::vector<int> gpus;  ///< GPU ordinals used (enabled only)
  std::string reason;     ///< why not (disabled only): "disabled by --no-gpu", "no GPU: ...", ...
  nlohmann::json extra = nlohmann::json::object();
};

/// One `ptxbench resume` session ("resumes" items, oldest first).
struct ResumeRecord {
  std::string at;  ///< ISO-8601 UTC
  std::string program_version;
  std::string git_revision;
  std::optional<GpuStagesRecord> gpu_stages;
  nlohmann::json environment;  ///< that session's environment (shape: RunRecord::environment); null if absent
  nlohmann::json extra = nlohmann::json::object();
};

/// A shard's place in its run ("shard"; `run --shard I/N`).
struct ShardRecord {
  int index = 0;                            ///< 0 <= index < count
  int count = 1;                            ///< >= 1
  std::string config_hash;                  ///< agent::config_hash of the shared config
  std::optional<std::int64_t> cells;        ///< trajectories this shard owns
  std::optional<std::int64_t> cells_total;  ///< trajectories of the whole run
  std::string split;                        ///< how cells are assigned to shards, in words
  nlohmann::json extra = nlohmann::json::object();
};

/// One shard of a merged run ("shards".present items).
struct MergedShard {
  int index = 0;
  std::string dir;           ///< the shard's run directory as it was read
  std::int64_t records = 0;  ///< turn records it held
  nlohmann::json extra = nlohmann::json::object();
};

/// The shards a run was merged from ("shards"; written by traces::load_runs, `ptxbench merge`).
struct MergedShards {
  int count = 0;  ///< the run's shard count (some may be missing from `present`)
  std::vector<MergedShard> present;
  nlohmann::json extra = nlohmann::json::object();
};

/// The evaluation service a session sent its answers to ("evaluator_service"; `evaluator.url`). The token
/// is never recorded, only the variable that held it.
struct EvaluatorServiceRecord {
  std::string url;
  bool authenticated = false;            ///< a bearer token was sent
  double deadline_seconds = 0;           ///< each answer's deadline at the service, seconds
  double retry_seconds = 0;              ///< how long failures were retried, seconds
  int in_flight = 0;                     ///< answers waiting on the service at once
  std::string version;                   ///< the service's version, from its /health
  nlohmann::json gpu_stages;             ///< the service's /health "gpu_stages", as it said it; null if none
  std::optional<std::string> token_env;  ///< the variable holding the token (absent when none)
  nlohmann::json extra = nlohmann::json::object();
};

/// The latest session's throughput ("throughput"; a resume overwrites it).
struct ThroughputRecord {
  double wall_seconds = 0;                          ///< seconds the session ran
  std::map<std::string, double> gpu_busy_fraction;  ///< GPU ordinal (as text) -> its GPU stage's time / wall
  std::int64_t verdicts_made = 0;
  std::int64_t verdicts_reused = 0;             ///< verdicts taken from the verdict cache
  std::optional<double> verdicts_per_gpu_hour;  ///< null without GPU stages
  nlohmann::json extra = nlohmann::json::object();
};

/// run.json. Absent optional fields are left out when written; `resumes` is always written.
struct RunRecord {
  int format_version = 0;  ///< the record format (traces::kFormatVersion when written); 0 when absent
  std::string run_id;      ///< "" when absent
  std::string created_at;  ///< ISO-8601 UTC of the first session
  std::optional<ProgramInfo> program;
  /// The run config without secrets (agent::RunConfig::to_json; agent::parse_run_config reads it back):
  /// JSON here, as traces does not depend on agent. An object, or null when absent.
  nlohmann::json config;
  std::optional<std::vector<std::string>> tasks;  ///< the task ids the run resolved, in order
  /// The first session's evaluator settings (evaluator::EvaluatorSettings::to_json, run seed included):
  /// JSON here, as traces does not depend on evaluator. An object, or null when absent.
  nlohmann::json evaluator_settings;
  std::optional<GpuStagesRecord> gpu_stages;  ///< the first session's
  /// The first session's machine: the GPU worker's `--probe` output (device facts, driver, library
  /// versions, or {error}), or {gpu: why not}; plus `evaluator_service` and `cuda_toolkit_at_build` where
  /// they apply. Free-form JSON (the worker's shape). An object, or null when absent.
  nlohmann::json environment;
  std::vector<ResumeRecord> resumes;       ///< later sessions, oldest first (empty when never resumed)
  std::optional<std::string> config_hash;  ///< agent::config_hash (16 hex digits); absent in early runs
  /// The seed of the GPU stages' inputs (EvaluatorSettings::run_seed): drawn at the start unless configured,
  /// kept on resume. Absent in runs made before seeds were recorded (a resume then records its own).
  std::optional<std::uint64_t> run_seed;
  std::optional<EvaluatorServiceRecord> evaluator_service;  ///< the latest session's service
  std::optional<ShardRecord> shard;                         ///< present in a shard's run directory
  std::optional<MergedShards> shards;                       ///< present in a run merged from shards
  std::optional<ThroughputRecord> throughput;               ///< the latest session's, at its end
  nlohmann::json extra = nlohmann::json::object();          ///< top-level keys this version does not know

  nlohmann::json to_json() const;
  /// Error: the field that does not have its documented type or range, by its path
  /// ("shard.index: must be below count 2, got 3"). Unknown keys are never an error (kept in `extra`).
  static util::Expected<RunRecord> from_json(const nlohmann::json &j);
};

/// The codecs of the parts (nlohmann ADL), for the runner that writes them and for tests.
void to_json(nlohmann::json &j, const GpuStagesRecord &r);
void to_json(nlohmann::json &j, const EvaluatorServiceRecord &r);
void to_json(nlohmann::json &j, const ShardRecord &r);

}  // namespace ptxbench::traces
