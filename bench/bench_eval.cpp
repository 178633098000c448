// bench_eval: wall time of full evaluations of one response (median of N, 5 by
// default) and how well its speedup repeats.
//   bench_eval --task gemm_n7168_k5120 --response tasks/solutions/.../response.md [--runs 5]
//              [--tasks-dir DIR] [--worker PATH]
// Prints one line per run and a JSON summary last.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "evaluator/evaluator.hpp"
#include "tasks/task.hpp"
#include "util/files.hpp"

namespace ev = ptxbench::evaluator;

int main(int argc, char **argv) {
  std::string task_id, response_path, tasks_dir, worker;
  int runs = 5;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--task")
      task_id = argv[i + 1];
    else if (a == "--response")
      response_path = argv[i + 1];
    else if (a == "--runs")
      runs = std::max(1, std::atoi(argv[i + 1]));
    else if (a == "--tasks-dir")
      tasks_dir = argv[i + 1];
    else if (a == "--worker")
      worker = argv[i + 1];
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
  ev::EvaluatorSettings settings;
  if (!worker.empty()) settings.worker_path = worker;
  if (const std::string why = ev::gpu_unavailable_reason(settings); !why.empty()) {
    std::printf("SKIPPED: %s\n", why.c_str());
    return 77;
  }
  std::vector<double> walls, speedups;
  std::string status;
  for (int r = 0; r < runs; ++r) {
    const auto start = std::chrono::steady_clock::now();
    const ev::Verdict v = ev::evaluate(*task, *response, settings);
    const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    walls.push_back(wall);
    status = std::string(ev::to_string(v.status));
    const double speedup = v.axes.speedup.value_or(0);
    speedups.push_back(speedup);
    // Where the time goes: CPU stages, the three GPU stages, and the rest (worker start, CUDA context,
    // library handles, process spawn) as "other".
    const double cpu_s = v.parse.wall_seconds + v.static_checks.wall_seconds + v.compile.wall_seconds;
    const double gpu_s = v.correctness.wall_seconds + v.timing.wall_seconds + v.execution.wall_seconds;
    std::printf(
        "run %d: %s wall %.3f s (parse+static+compile %.3f, correctness %.3f, timing %.3f, execution "
        "%.3f, other %.3f), speedup %.4f\n",
        r + 1, status.c_str(), wall, cpu_s, v.correctness.wall_seconds, v.timing.wall_seconds,
        v.execution.wall_seconds, wall - cpu_s - gpu_s - v.sanitizer.wall_seconds, speedup);
    std::fflush(stdout);
  }
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
                            {"speedup_rel_range", s_med > 0 ? (*smax - *smin) / s_med : 0.0}};
  std::printf("%s\n", summary.dump().c_str());
  return 0;
}
