// bench_eval: wall time of full evaluations of one response (median of N, 5 by
// default), where it goes (stages, the worker's phases, the pool), and how well
// its speedup repeats. Evaluations run back to back in one process, as in a run:
// from the second on, the worker was pre-started while the previous one ended.
// --gap-s S waits S seconds between evaluations, as a run waits for the model's
// next answer (a pre-started worker finishes its set-up meanwhile).
//   bench_eval --task gemm_n7168_k5120 --response tasks/solutions/.../response.md [--runs 5] [--gap-s S]
//              [--tasks-dir DIR] [--worker PATH] [--all-trials] [--no-prestart] [--no-prestart-cupti]
//              [--wait-for-exit] [--[no-]autocorrelated-ci] [--no-library-preroll]
//              [--min-seconds S] [--no-reuse-inputs] [--paired-min-samples N]   (the timing policy's
//              min_seconds, reuse_correctness_inputs and paired_min_samples (0 = speedup from the two
//              medians), to compare policies within one session)
//              [--verdicts FILE]  (every run's verdict, one JSON line each, with every timing sample)
//              [--no-hidden] [--time-hidden]  (the task's hidden workloads: not checked / also timed)
//              [--no-profile] [--no-pc-sampling]  (the profile stage off / without its PC-sampled launch)
//              [--profile-metrics standard|full]  (the profile stage's metric set)
//              [--pc-sampling-buffer-mib N]  (CUPTI's hardware sample buffer; 0 = its 512 MiB default)
//              [--pc-sampling-sleep-ms N]  (CUPTI's PC-sampling worker threads' sleep; 0 = its 100 ms
//              default)
// Prints one line per run, the profile of the median run, the cost of a resent
// identical kernel (verdict cache), and a JSON summary last.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "evaluator/evaluator.hpp"
#include "evaluator/protocol/error.hpp"
#include "evaluator/protocol/stages.hpp"
#include "evaluator/verdict_cache.hpp"
#include "tasks/task.hpp"
#include "util/files.hpp"

namespace ev = ptxbench::evaluator;

int main(int argc, char **argv) {
  std::string task_id, response_path, tasks_dir, verdicts_path;
  int runs = 5;
  double gap_s = 0;  // s between evaluations
  ev::EvaluatorSettings settings;
  ev::TimingPolicy &timing = settings.timing;
  // Switches that set one setting each (to compare settings within one session).
  const std::map<std::string, std::function<void()>> switches = {
      {"--all-trials", [&] { settings.correctness.all_trials = true; }},
      {"--no-prestart", [&] { settings.worker.prestart = false; }},
      {"--prestart-cupti", [&] { settings.worker.prestart_cupti = true; }},
      {"--no-prestart-cupti", [&] { settings.worker.prestart_cupti = false; }},
      {"--wait-for-exit", [&] { settings.worker.wait_for_exit = true; }},
      {"--no-reuse-inputs", [&] { timing.reuse_correctness_inputs = false; }},
      {"--autocorrelated-ci", [&] { timing.autocorrelated_ci = true; }},
      {"--no-autocorrelated-ci", [&] { timing.autocorrelated_ci = false; }},
      {"--no-library-preroll", [&] { timing.library_preroll = false; }},
      {"--no-hidden", [&] { settings.hidden.check = false; }},
      {"--time-hidden", [&] { settings.hidden.time = true; }},
      {"--no-profile", [&] { settings.profile.enabled = false; }},
      {"--no-pc-sampling", [&] { settings.profile.pc_sampling = false; }}};
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (auto it = switches.find(a); it != switches.end()) {
      it->second();
      continue;
    }
    if (a.starts_with("--") && i + 1 >= argc) {
      std::fprintf(stderr, "%s needs a value (or is unknown)\n", a.c_str());
      return 2;
    }
    ++i;
    if (a == "--task")
      task_id = argv[i];
    else if (a == "--response")
      response_path = argv[i];
    else if (a == "--runs")
      runs = std::max(1, std::atoi(argv[i]));
    else if (a == "--gap-s")
      gap_s = std::max(0.0, std::atof(argv[i]));
    else if (a == "--min-seconds")
      timing.min_seconds = std::atof(argv[i]);
    else if (a == "--paired-min-samples")
      timing.paired_min_samples = std::max(0, std::atoi(argv[i]));
    else if (a == "--tasks-dir")
      tasks_dir = argv[i];
    else if (a == "--worker")
      settings.worker_path = argv[i];
    else if (a == "--verdicts")
      verdicts_path = argv[i];
    else if (a == "--pc-sampling-sleep-ms")
      settings.profile.pc_sampling_worker_sleep_ms =
          static_cast<std::uint32_t>(std::max(0, std::atoi(argv[i])));
    else if (a == "--profile-metrics") {
      try {
        settings.profile.metrics = nlohmann::json(argv[i]).get<ptxbench::protocol::ProfileMetricSet>();
      } catch (const ptxbench::protocol::ProtocolError &e) {
        std::fprintf(stderr, "--profile-metrics: %s\n", e.what());
        return 2;
      }
    } else if (a == "--pc-sampling-buffer-mib")
      settings.profile.pc_sampling_hardware_buffer_mib =
          static_cast<std::uint32_t>(std::max(0, std::atoi(argv[i])));
    else {
      std::fprintf(stderr, "unknown argument %s\n", a.c_str());
      return 2;
    }
  }
  if (task_id.empty() || response_path.empty()) {
    std::fprintf(
        stderr, "usage: bench_eval --task ID --response FILE [--runs N] [--tasks-dir DIR] [--worker PATH]\n");
    return 2;
  }
  const std::filesystem::path dir =
      tasks_dir.empty() ? ptxbench::tasks::default_task_dir() : std::filesystem::path(tasks_dir);
  auto task = ptxbench::tasks::load_task_file(dir / (task_id + ".json"));
  if (!task) {
    std::fprintf(stderr, "%s\n", task.error().c_str());
    return 3;
  }
  auto response = ptxbench::util::read_file(response_path);
  if (!response) {
    std::fprintf(stderr, "%s\n", response.error().c_str());
    return 3;
  }
  settings.timing.record_samples = !verdicts_path.empty();
  if (const std::string why = ev::gpu_unavailable_reason(settings); !why.empty()) {
    std::printf("SKIPPED: %s\n", why.c_str());
    return 77;
  }
  std::vector<double> walls, speedups;
  std::vector<ev::Verdict> verdicts;
  std::string status;
  for (int r = 0; r < runs; ++r) {
    if (r > 0 && gap_s > 0) std::this_thread::sleep_for(std::chrono::duration<double>(gap_s));
    const auto start = std::chrono::steady_clock::now();
    const ev::Verdict v = ev::evaluate(*task, *response, settings);
    const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    walls.push_back(wall);
    verdicts.push_back(v);
    status = std::string(ev::to_string(v.status));
    const double speedup = v.axes.speedup.value_or(0);
    speedups.push_back(speedup);
    // Where the time goes: CPU stages, the three GPU stages, and the rest (worker start, CUDA context,
    // library handles, process spawn) as "other".
    const double cpu_s = v.parse.wall_seconds + v.static_checks.wall_seconds + v.compile.wall_seconds;
    const double gpu_s = v.correctness.wall_seconds + v.timing.wall_seconds + v.execution.wall_seconds +
                         v.generalization.wall_seconds;
    // Whether the profile's PC sampler got samples, beside the kind of worker that ran the job, so that a
    // sampling gap can be tied to pre-started workers.
    std::string sampled = "not profiled";
    if (const auto kp = v.kernel_profile())
      sampled = kp->pc_sampling.samples > 0 ? std::to_string(kp->pc_sampling.samples) + " PC samples"
                                            : "no PC samples";
    const bool pooled = v.profile.value("pool", nlohmann::json::object()).value("prestarted", false);
    std::string setup;
    if (const auto it = v.profile.find("worker_setup"); it != v.profile.end() && it->is_object())
      if (const auto ph = it->find("phase_seconds"); ph != it->end() && ph->is_object())
        for (const auto &[phase, s] : ph->items())
          if (phase != "idle" && phase != "lock_wait") setup += (setup.empty() ? "" : ",") + phase;
    std::printf(
        "run %d: %s wall %.3f s (parse+static+compile %.3f, correctness %.3f, timing %.3f, execution "
        "%.3f, generalization %.3f, other %.3f), speedup %.4f; %s, worker %s (set up: %s)\n",
        r + 1, status.c_str(), wall, cpu_s, v.correctness.wall_seconds, v.timing.wall_seconds,
        v.execution.wall_seconds, v.generalization.wall_seconds,
        wall - cpu_s - gpu_s - v.sanitizer.wall_seconds, speedup, sampled.c_str(),
        pooled ? "pre-started in the pool" : "started for this job", setup.c_str());
    std::fflush(stdout);
  }
  if (!verdicts_path.empty()) {
    std::string lines;
    for (const auto &v : verdicts) lines += v.to_json().dump() + "\n";
    if (auto w = ptxbench::util::write_file_atomic(verdicts_path, lines); !w) {
      std::fprintf(stderr, "%s\n", w.error().c_str());
      return 3;
    }
  }
  // The median run's profile: every stage, the worker's own phases and the pool, in seconds.
  std::size_t median_run = 0;
  {
    std::vector<std::size_t> order(walls.size());
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return walls[a] < walls[b]; });
    median_run = order[order.size() / 2];
  }
  const ev::Verdict &median = verdicts[median_run];
  nlohmann::json profile = {{"wall_s", walls[median_run]}};
  for (const auto &row : ptxbench::protocol::kStageTable) {
    const std::string stage(row.name);
    if (!median.written(row.stage)) continue;  // generalization: only tasks with hidden workloads
    const ev::StageResult &st = median.stage(row.stage);
    profile["stages"][stage] = {{"status", ev::to_string(st.status)}, {"s", st.wall_seconds}};
    // The stages that time their phases, and the compile stage's wait for the SASS listing, through their
    // figures' codecs (figures that do not decode show no phases).
    using ptxbench::protocol::Stage;
    std::optional<std::map<std::string, double>> phases;
    std::optional<double> sass_wait;
    try {
      if (row.stage == Stage::correctness) {
        if (const auto f = median.correctness_figures()) phases = f->phase_seconds;
      } else if (row.stage == Stage::timing) {
        if (const auto f = median.timing_figures()) phases = f->phase_seconds;
      } else if (row.stage == Stage::generalization) {
        if (const auto f = median.generalization_figures()) phases = f->phase_seconds;
      } else if (row.stage == Stage::profile) {
        if (const auto f = median.profile_figures()) phases = f->phase_seconds;
      } else if (row.stage == Stage::compile) {
        if (const auto f = median.compile_figures()) sass_wait = f->sass_wait_seconds;
      }
    } catch (const ptxbench::protocol::ProtocolError &e) {
      std::fprintf(stderr, "the %s figures do not decode: %s\n", stage.c_str(), e.what());
    }
    if (phases) profile["stages"][stage]["phases"] = *phases;
    if (sass_wait) profile["stages"][stage]["sass_wait_s (overlapped)"] = *sass_wait;
  }
  profile["gpu_stage"] = median.profile;
  std::printf("profile of run %zu (median wall):\n%s\n", median_run + 1, profile.dump(1).c_str());

  // A resent identical kernel: answered from the verdict cache (parse + hash, no compile, no GPU).
  ev::VerdictCache cache(verdicts.front().environment);
  double resend_s = -1;
  bool reused = false;
  if (auto key = cache.key(*task, *response, settings)) {
    cache.put(*key, verdicts.front(), "run 1");
    const auto start = std::chrono::steady_clock::now();
    const auto again = cache.key(*task, *response, settings);
    const auto hit = again ? cache.get(*again) : std::nullopt;
    resend_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    reused = hit && !hit->reused_from.is_null();
  }
  std::printf("resent identical kernel: %.4f s, %s\n", resend_s,
              reused ? "reused (verdict cache)" : "NOT reused");

  auto sorted = walls;
  std::sort(sorted.begin(), sorted.end());
  const auto [smin, smax] = std::minmax_element(speedups.begin(), speedups.end());
  auto s_sorted = speedups;
  std::sort(s_sorted.begin(), s_sorted.end());
  const double s_med = s_sorted[s_sorted.size() / 2];
  nlohmann::json summary = {{"task", task_id},
                            {"response", response_path},
                            {"runs", runs},
                            {"status", status},
                            {"median_wall_s", sorted[sorted.size() / 2]},
                            {"min_wall_s", sorted.front()},
                            {"max_wall_s", sorted.back()},
                            {"speedups", speedups},
                            {"speedup_median", s_med},
                            {"speedup_rel_range", s_med > 0 ? (*smax - *smin) / s_med : 0.0},
                            {"walls", walls},
                            {"all_trials", settings.correctness.all_trials},
                            {"timing_policy", timing},
                            {"worker", settings.worker},
                            {"resend_s", resend_s},
                            {"resend_reused", reused},
                            {"profile", profile}};
  std::printf("%s\n", summary.dump().c_str());
  return 0;
}
