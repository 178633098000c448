// The run plan's set-up: tasks, prompts, clients, GPUs, the trajectories, the run directory and seed; and
// run.json as the plan describes it. Also the public plan_cells (the cells without the rest of a plan).
#include "agent/detail/run_plan.hpp"

#include <algorithm>
#include <random>
#include <set>
#include <thread>

#include <fmt/core.h>

#include "agent/detail/clocks.hpp"
#include "agent/prompt_builder.hpp"
#include "agent/repair_selection.hpp"
#include "agent/runner.hpp"
#include "agent/shard.hpp"

namespace ptxbench::agent {

namespace fs = std::filesystem;
using Json = nlohmann::json;

namespace detail {

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

namespace {

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

std::string random_suffix() {
  std::random_device rd;
  return fmt::format("{:04x}", rd() & 0xffff);
}

traces::GpuStagesRecord gpu_stages_record(bool enabled, const std::vector<int> &gpus,
                                          const std::string &skip_reason) {
  return enabled ? traces::GpuStagesRecord{.enabled = true, .gpus = gpus}
                 : traces::GpuStagesRecord{.enabled = false, .reason = skip_reason};
}

}  // namespace

util::Expected<Json> RunPlan::build(const traces::LoadedRun *previous, const std::atomic<bool> *cancel) {
  if (auto ok = validate(config); !ok) return util::unexpected(ok.error());
  auto selected = select_tasks(config);
  if (!selected) return util::unexpected(selected.error());
  tasks = std::move(*selected);
  if (auto ok = load_prompts(); !ok) return util::unexpected(ok.error());
  if (auto ok = make_clients(); !ok) return util::unexpected(ok.error());
  if (config.evaluator_service.enabled()) {
    auto client = ServiceClient::connect(config.evaluator_service, cancel);
    if (!client) return util::unexpected(client.error());
    service = std::move(*client);
  }
  Json environment = probe_gpus();
  if (config.concurrency.compile_workers <= 0) {
    config.concurrency.compile_workers = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  }

  // Trajectories in a stable order: model, variant, task, sample.
  if (config.repairs) {
    if (auto ok = add_repair_trajectories(); !ok) return util::unexpected(ok.error());
  } else {
    add_arm_trajectories();
  }
  cells_total = trajectories.size();
  if (config.shard) keep_shard_trajectories();
  if (previous == nullptr) {
    if (auto ok = create_run_dir(); !ok) return util::unexpected(ok.error());
  }
  choose_run_seed(previous != nullptr ? &previous->run : nullptr);
  return environment;
}

util::Expected<void> RunPlan::load_prompts() {
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
  return {};
}

util::Expected<void> RunPlan::make_clients() {
  for (const auto &e : config.endpoints) {
    auto client = services.make_client(e);
    if (!client) return util::unexpected(fmt::format("endpoint '{}': {}", e.name, client.error()));
    clients.push_back(std::move(client.value()));
  }
  return {};
}

Json RunPlan::probe_gpus() {
  Json environment = Json::object();
  if (service) {
    // No local GPU stage: the service runs them (or says why not in each verdict).
    gpu_enabled = false;
    gpu_skip_reason = fmt::format("evaluated by the service at {}", config.evaluator_service.url);
    environment["evaluator_service"] = Json(service->record());
  } else if (!config.evaluator.run_gpu) {
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
  return environment;
}

util::Expected<void> RunPlan::add_repair_trajectories() {
  auto seeds = load_repair_seeds(config.repairs->seeds_file, config.repairs->seeds_hash);
  if (!seeds) return util::unexpected(seeds.error());
  repair_seeds = std::move(*seeds);
  for (std::size_t e = 0; e < config.endpoints.size(); ++e) {
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
        TrajectoryPlan t;
        t.endpoint = e;
        t.task = &*task;
        t.sample = next_sample[seed.task_id]++;
        t.seed = &seed;
        t.repair_sample = k;
        t.id = fmt::format("{}/{}/{}", config.endpoints[e].name, task->id, t.sample);
        t.order = trajectories.size();
        trajectories.push_back(std::move(t));
      }
    }
  }
  return {};
}

void RunPlan::add_arm_trajectories() {
  for (std::size_t e = 0; e < config.endpoints.size(); ++e) {
    for (std::size_t a = 0; a < arms.size(); ++a) {
      for (const auto &task : tasks) {
        for (int s = 0; s < config.samples; ++s) {
          TrajectoryPlan t;
          t.endpoint = e;
          t.arm = a;
          t.task = &task;
          t.sample = s;
          t.id = config.variants.empty()
                     ? fmt::format("{}/{}/{}", config.endpoints[e].name, task.id, s)
                     : fmt::format("{}/{}/{}/{}", config.endpoints[e].name, arms[a].name, task.id, s);
          t.order = trajectories.size();
          trajectories.push_back(std::move(t));
        }
      }
    }
  }
}

void RunPlan::keep_shard_trajectories() {
  std::vector<CellIdentity> cells;
  for (const auto &t : trajectories)
    cells.push_back(trajectory_cell(config.endpoints[t.endpoint].name, t.task->id, t.sample,
                                    config.variants.empty() ? std::string() : config.variants[t.arm].name));
  const std::vector<int> shard_of = assign_shards(cells, config.shard->count);
  std::vector<TrajectoryPlan> mine;
  for (std::size_t i = 0; i < trajectories.size(); ++i) {
    if (shard_of[i] == config.shard->index) mine.push_back(std::move(trajectories[i]));
  }
  trajectories = std::move(mine);
}

util::Expected<void> RunPlan::create_run_dir() {
  run_id = config.run_id.empty() ? fmt::format("{}-{}", compact_utc_now(), random_suffix()) : config.run_id;
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
  return {};
}

void RunPlan::choose_run_seed(const traces::RunRecord *recorded) {
  // Kept apart from the config, so a drawn seed changes neither the config's JSON nor its hash.
  if (config.evaluator.run_seed != 0)
    run_seed = config.evaluator.run_seed;
  else if (recorded != nullptr && recorded->run_seed.value_or(0) != 0)
    run_seed = *recorded->run_seed;
  else
    run_seed = config.shard ? shard_run_seed(run_id) : evaluator::draw_run_seed();
}

traces::RunRecord RunPlan::run_record(const traces::RunRecord *recorded, const Json &environment) const {
  traces::RunRecord r;
  if (recorded == nullptr) {
    r.format_version = traces::kFormatVersion;
    r.run_id = run_id;
    r.created_at = iso8601_utc_now();
    r.program = traces::ProgramInfo{
        .name = "ptxbench", .version = PTXBENCH_VERSION, .git_revision = build_git_revision()};
    r.config = config.to_json();
    r.tasks.emplace();
    for (const auto &t : tasks) r.tasks->push_back(t.id);
    r.evaluator_settings = settings_with_seed(config.evaluator).to_json();
    r.gpu_stages = gpu_stages_record(gpu_enabled, gpus, gpu_skip_reason);
    r.environment = environment;
    r.config_hash = config_hash(config);
    r.run_seed = run_seed;
    if (config.shard) r.shard = shard_record(*config.shard, *r.config_hash, trajectories.size(), cells_total);
  } else {
    r = *recorded;  // its unknown keys (`extra`) are written back
    // A run made before run seeds were recorded gets the one drawn now for the turns still to come.
    if (!r.run_seed) r.run_seed = run_seed;
    r.resumes.push_back({.at = iso8601_utc_now(),
                         .program_version = PTXBENCH_VERSION,
                         .git_revision = build_git_revision(),
                         .gpu_stages = gpu_stages_record(gpu_enabled, gpus, gpu_skip_reason),
                         .environment = environment});
  }
  if (service) r.evaluator_service = service->record();  // on resume, the latest session's service
  return r;
}

evaluator::EvaluatorSettings RunPlan::settings_for(std::size_t arm) const {
  evaluator::EvaluatorSettings s = settings_with_seed(config.evaluator);
  if (const auto &variant = arms.at(arm); variant.profile) s.profile.enabled = *variant.profile;
  return s;
}

}  // namespace detail

util::Expected<std::vector<PlannedCell>> plan_cells(const RunConfig &config) {
  auto selected = detail::select_tasks(config);
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

}  // namespace ptxbench::agent
