// The run plan: what a run is (its config, tasks, arms and their prompts, clients, GPUs, seed and the
// trajectories to run), fixed once set up. build() makes it; after that the scheduler, the turn recorder
// and the runner's loops only read it.
#pragma once

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "agent/detail/run_config_types.hpp"
#include "agent/detail/runner_types.hpp"
#include "agent/detail/service_client.hpp"
#include "evaluator/evaluator.hpp"
#include "llm_clients/chat_client.hpp"
#include "tasks/task.hpp"
#include "traces/record.hpp"
#include "traces/run_record.hpp"
#include "util/expected.hpp"

// Declared ahead: held here in a std::vector (which needs them complete only where its members are used);
// the runner's source files include their headers.
namespace ptxbench::agent {
class PromptBuilder;  // prompt_builder.hpp
struct RepairSeed;    // repair_selection.hpp
}  // namespace ptxbench::agent

namespace ptxbench::agent::detail {

/// Who one trajectory is: model × variant × task × sample (a repairs run: teacher × seed × sample).
struct TrajectoryPlan {
  std::size_t endpoint = 0;
  std::size_t arm = 0;  ///< index into RunPlan::arms (the run variant)
  const tasks::Task *task = nullptr;
  int sample = 0;
  std::string id;  ///< "<model>/<task>/<sample>", or "<model>/<variant>/<task>/<sample>" with variants
  const RepairSeed *seed = nullptr;  ///< a repairs run: the student failure this trajectory starts from
  int repair_sample = 0;             ///< which of the seed's samples (its sample index counts per task)
  std::uint64_t order = 0;           ///< its place in the run's order (FIFO tie-break among equal turns)
};

/// The tasks config.tasks names ("all", "core" or ids), in order, each once.
util::Expected<std::vector<tasks::Task>> select_tasks(const RunConfig &config);

struct RunPlan {
  RunConfig config;
  RunServices services;
  RunOptions options;
  std::filesystem::path dir;  ///< the run directory (a resume sets it, and run_id, before build)
  std::string run_id;
  std::vector<tasks::Task> tasks;
  std::vector<Variant> arms;               ///< config.arms(): the variants, or one unnamed arm
  std::vector<PromptBuilder> arm_prompts;  ///< per arm: its templates and packs
  std::map<std::pair<std::size_t, std::string>, std::pair<std::string, std::string>>
      task_prompts;                                       ///< (arm, task id) -> (system, task)
  std::vector<std::unique_ptr<llm::ChatClient>> clients;  ///< per endpoint (config.endpoints' order)
  /// evaluator.url: verdicts come from this service; the CPU loop's threads wait on it (no local stages).
  std::unique_ptr<ServiceClient> service;
  std::vector<RepairSeed> repair_seeds;  ///< a repairs run's seeds (config.repairs)

  bool gpu_enabled = false;
  std::string gpu_skip_reason;  ///< why GPU stages are skipped ("" when enabled)
  std::vector<int> gpus;
  /// The run's seed for the GPU stages' inputs (EvaluatorSettings::run_seed; run.json "run_seed"). Every
  /// evaluation's settings carry it, so the verdict cache's key (which holds the settings) never reuses a
  /// verdict made with other inputs.
  std::uint64_t run_seed = 0;

  std::vector<TrajectoryPlan> trajectories;  ///< this run's (a shard's: its own), in the run's order
  std::size_t cells_total = 0;               ///< trajectories of the whole run, every shard's

  /// Sets everything above from config, services and options: tasks, prompts, clients, the evaluator
  /// service (`cancel`: the run's stop flag, which ends its waits), GPUs, trajectories, the run directory
  /// (a new run's: made; `previous`, a resumed run, has one) and the run seed. Returns run.json's
  /// "environment".
  util::Expected<nlohmann::json> build(const traces::LoadedRun *previous, const std::atomic<bool> *cancel);
  /// run.json for this session: a new run's, or `recorded` (a resumed run's) with this session added.
  traces::RunRecord run_record(const traces::RunRecord *recorded, const nlohmann::json &environment) const;

  /// `s` with the run seed (every evaluation of the run uses it).
  evaluator::EvaluatorSettings settings_with_seed(evaluator::EvaluatorSettings s) const {
    s.run_seed = run_seed;
    return s;
  }
  /// The run's evaluator settings with an arm's overrides (the profile stage on or off).
  evaluator::EvaluatorSettings settings_for(std::size_t arm) const;

 private:
  util::Expected<void> load_prompts();
  util::Expected<void> make_clients();
  /// Decides whether GPU stages run and on which GPUs; returns run.json's "environment".
  nlohmann::json probe_gpus();
  util::Expected<void> add_repair_trajectories();
  void add_arm_trajectories();
  /// Keeps the trajectories (cells) that go to config.shard (see assign_shards), in their order.
  void keep_shard_trajectories();
  util::Expected<void> create_run_dir();
  /// Sets run_seed: the config's, the one a resumed run recorded, or a fresh one (a shard's from its run id).
  void choose_run_seed(const traces::RunRecord *recorded);
};

}  // namespace ptxbench::agent::detail
