// The run configuration's fields: RunConfig and its parts (endpoints, history policy, stop target, budgets,
// concurrency, variants, repairs, the remote evaluator). run_config.hpp includes it and declares the
// loader and the checks; the run plan (detail/run_plan.hpp) and the remote evaluator's client
// (detail/service_client.hpp) hold these fields.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "agent/detail/shard_spec.hpp"
#include "evaluator/evaluator.hpp"
#include "evaluator/verdict.hpp"
#include "llm_clients/chat_client.hpp"

namespace ptxbench::agent {

/// What of earlier turns the next prompt carries.
enum class HistoryPolicy {
  full,          ///< every earlier attempt and its feedback
  last_attempt,  ///< only the latest attempt and its feedback
  none,          ///< no attempt; only the latest feedback, appended to the task message
};

/// A trajectory stops early once every requested condition holds. No condition = never early.
struct StopTarget {
  bool correct = true;                ///< axes.correct must be true
  bool targets_executed = true;       ///< axes.targets_executed must be true
  std::optional<double> min_speedup;  ///< axes.speedup (library time / candidate time) must be >= this
  bool any() const { return correct || targets_executed || min_speedup.has_value(); }
  bool reached(const evaluator::Axes &axes) const;
};

/// What an endpoint's tokens cost, USD per million tokens.
struct EndpointPrice {
  double prompt_usd_per_mtok = 0;      ///< USD per 1e6 prompt tokens
  double completion_usd_per_mtok = 0;  ///< USD per 1e6 completion tokens
};
struct TokenBudgets {
  std::int64_t per_trajectory = 0;  ///< prompt + completion tokens over a trajectory's turns; 0 = unlimited
  std::int64_t per_run = 0;         ///< prompt + completion tokens over the whole run; 0 = unlimited
};

struct Concurrency {
  int compile_workers = 0;  ///< CPU-stage threads (parse, static checks, ptxas); 0 = CPU cores
  std::vector<int> gpus;    ///< CUDA ordinals for GPU stages (one at a time each); empty = all visible
  int endpoint_failures_before_dead =
      3;  ///< consecutive failed requests after which an endpoint gets no more
  InFlightScope in_flight_scope = InFlightScope::shard;  ///< whom endpoints' max_in_flight limits
};

/// One arm of an experiment: a named set of overrides of the run's prompt and loop settings. A run's
/// cells are model × variant × task × sample; a run without variants has one unnamed arm that uses the
/// run's settings unchanged.
struct Variant {
  std::string name;                      ///< unique within the run, no '/'; recorded in every turn
  std::filesystem::path prompt_dir;      ///< templates for this arm; empty = the run's prompt_dir
  bool target_notes = true;              ///< include the per-target notes (prompts/notes) as without variants
  std::vector<std::string> packs;        ///< knowledge packs (prompts/packs/<name>) appended in this order
  std::optional<HistoryPolicy> history;  ///< empty = the run's history policy
  std::optional<int> turns;              ///< attempts per trajectory; empty = the run's turns
  /// the profile stage on or off for this arm (its feedback with or without the hardware profile);
  /// empty = the run's evaluator.profile.enabled
  std::optional<bool> profile;
  llm::SamplingParams sampling;  ///< fields set here replace the run's (unset = the run's value)

  nlohmann::json to_json() const;
};

/// A repairs run (`ptxbench repairs`): its trajectories start from failed student turns (the seeds)
/// instead of the task prompt; each is teacher × seed × sample. Absent in an ordinary run.
struct RepairsConfig {
  std::filesystem::path seeds_file;  ///< repair_seeds.jsonl: one agent::RepairSeed per line
  std::string seeds_hash;  ///< FNV-1a 64 of the file: a resume or shard must read the seeds selected
  bool synthesize_reasoning =
      false;  ///< ask the teacher to explain a verified repair it sent no reasoning for
  std::vector<std::string> student_runs;                ///< the student run directories the seeds came from
  nlohmann::json selection = nlohmann::json::object();  ///< the selection's settings, as chosen

  nlohmann::json to_json() const;
};

/// `evaluator.url`: the run's verdicts come from a remote `ptxbench serve` (POST /v1/verdicts, then a
/// blocking GET) instead of this process's evaluator. The token is sent, never recorded: run.json names only
/// `token_env`, so a run that gave a literal `token` needs the variable to resume.
struct EvaluatorService {
  std::string url;          ///< e.g. http://gpu-balancer:8700; empty = evaluate in this process
  std::string token_env;    ///< environment variable holding the bearer token ("" = none)
  std::string token;        ///< a literal token (not written anywhere)
  double deadline_s = 900;  ///< each answer's deadline_seconds at the service
  double retry_s = 300;  ///< how long an unreachable service or its 429/5xx are retried before the run stops
  int in_flight = 8;     ///< answers waiting on the service at once (the threads that wait)
  bool enabled() const { return !url.empty(); }
};

struct RunConfig {
  std::vector<llm::EndpointConfig> endpoints;  ///< the models; names must be unique
  std::vector<std::string> tasks{"core"};      ///< task ids, or "core" (suite=core) / "all"
  std::filesystem::path task_dir;              ///< empty = tasks::default_task_dir()
  std::filesystem::path prompt_dir;            ///< empty = PromptBuilder::default_dir()
  int samples = 1;                             ///< independent trajectories per model × task
  int turns = 4;                               ///< attempts per trajectory at most
  HistoryPolicy history = HistoryPolicy::full;
  StopTarget stop;
  llm::SamplingParams sampling;  ///< default for every endpoint (n is forced to 1)
  TokenBudgets budgets;
  Concurrency concurrency;
  evaluator::EvaluatorSettings evaluator;  ///< defaults with the config's "evaluator" overrides applied
  EvaluatorService evaluator_service;      ///< evaluator.url and its settings: verdicts from a service
  std::filesystem::path out_dir;           ///< run directory; empty = runs/<run id> under the current dir
  /// Endpoint name -> token prices, USD per million tokens ({"prompt_usd_per_mtok",
  /// "completion_usd_per_mtok"}), for the report's costs; endpoints without an entry are reported without
  /// cost.
  std::map<std::string, EndpointPrice> prices;
  std::vector<Variant> variants;  ///< experiment arms; empty = one arm with the run's settings
  /// true: a kernel resent unchanged within the run (same task, launch plan, settings and machine) takes
  /// the verdict made the first time, recorded as reused; false: every answer is evaluated afresh (e.g. to
  /// study the spread of repeated measurements)
  bool reuse_verdicts = true;
  std::optional<RepairsConfig> repairs;  ///< a repairs run: trajectories start from student failures

  /// The arms the run iterates over: `variants`, or one unnamed arm when there are none.
  std::vector<Variant> arms() const;
  /// An arm's effective settings: its own where set, else the run's.
  HistoryPolicy history_of(const Variant &v) const { return v.history.value_or(history); }
  int turns_of(const Variant &v) const { return v.turns.value_or(turns); }
  llm::SamplingParams sampling_of(const Variant &v) const;
  std::filesystem::path prompt_dir_of(const Variant &v) const {
    return v.prompt_dir.empty() ? prompt_dir : v.prompt_dir;
  }
  /// This process's part of a sharded run (`run --shard I/N`); recorded as run.json "shard", not in the
  /// config's JSON, so every shard of a run has the same config.
  std::optional<ShardSpec> shard;
  std::string run_id;  ///< empty = a new id (shards without one share default_shard_run_id)

  /// The config as JSON in the file format, without secrets (keys live only in the environment).
  nlohmann::json to_json() const;
  nlohmann::json prices_json() const;  ///< the "prices" object of to_json()
};

}  // namespace ptxbench::agent
