// The loop's own CPU cost per turn: 2 models × 5 tasks × 4 samples × 4 turns, GPU stages off, real
// CPU stages (parser, static checks, ptxas in child processes), the scripted
// client (default) or an OpenAI-compatible server (--base-url, e.g.
// tests/fake_openai_server.py). Prints per-turn CPU figures from the records
// and from getrusage.
//
//   bench_orchestrator [--base-url URL] [--model NAME] [--out DIR] [--samples N] [--turns N] [--gpu]
//                      [--tasks ID,ID,...] [--baseline] [--no-reuse]
// --gpu runs the GPU stages too (on a GPU machine) and prints each GPU's busy fraction (time its GPU
// stage ran / wall) and verdicts per GPU-hour. --baseline turns off what makes verdicts cheap (verdict
// reuse, pre-started workers, early stop, skipped counts of incorrect kernels, the timing policy's
// shorter minimum, reused correctness inputs and paired-ratio stop) for a before/after pair measured in
// one session; library selections stay cached across workers either way. SIGTERM (a time limit) ends
// the run after the stages in progress and prints the figures so far.
// With tests/fake_openai_server.py, --model repair answers GEMM tasks with a kernel that fails to
// compile and then the fixed one, so the turns exercise ptxas and the repair prompts; --model mix answers
// with the stated mix of early-turn answers (30% compile errors, 25% incorrect, 25% naive correct, 15%
// mid-speed, 5% near the library; the server's MIX_WEIGHTS). --no-reuse turns the verdict cache off (the
// mix resends committed kernels, a real run's answers rarely repeat). With --gpu the figures end with GPU
// seconds per verdict class and each GPU stage's share of the GPU time.
#include <signal.h>
#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <map>
#include <numeric>
#include <string>
#include <vector>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "agent/run_config.hpp"
#include "agent/runner.hpp"
#include "evaluator/protocol/stages.hpp"
#include "traces/outcome.hpp"
#include "traces/record.hpp"

using namespace ptxbench;
namespace fs = std::filesystem;

namespace {

// SIGTERM/SIGINT (e.g. from `timeout`): the run finishes the stages in progress and the figures so far are
// printed, so a run cut by a time limit still reports its busy fraction.
std::atomic<int> g_interrupts{0};
extern "C" void on_signal(int) {
  g_interrupts.fetch_add(1);
}

double cpu_ms(const timeval &u, const timeval &s) {
  return (static_cast<double>(u.tv_sec) + static_cast<double>(s.tv_sec)) * 1e3 +
         (static_cast<double>(u.tv_usec) + static_cast<double>(s.tv_usec)) / 1e3;
}

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[static_cast<std::size_t>(p * static_cast<double>(v.size() - 1))];
}

// The verdict's class for the GPU-time table: its status, and for ok verdicts the speedup band.
std::string verdict_class(const protocol::Verdict &v) {
  if (v.status != protocol::Status::ok) return std::string(protocol::to_string(v.status));
  if (!v.axes.speedup) return "ok (not timed)";
  const double s = *v.axes.speedup;
  return s < 0.25 ? "ok, < 0.25x" : s < 0.75 ? "ok, 0.25-0.75x" : "ok, >= 0.75x";
}

// GPU seconds per verdict class (the worker's run, from each record's gpu_stage_s) and the share of the
// GPU time per stage (the stages' wall seconds; "other" is worker set-up, hand-over and teardown).
void print_gpu_classes(const traces::LoadedRun &run) {
  struct Class {
    int verdicts = 0;
    double gpu_s = 0;
  };
  std::map<std::string, Class> classes;
  std::map<std::string, double> stage_s;
  double gpu_total = 0;
  for (const auto &r : run.turns) {
    const auto v = r.decoded_verdict();
    if (!v || !v->reused_from.is_null()) continue;
    const double g = r.timings ? r.timings->gpu_stage_s.value_or(0.0) : 0.0;
    Class &c = classes[verdict_class(*v)];
    ++c.verdicts;
    c.gpu_s += g;
    gpu_total += g;
    if (g <= 0) continue;
    double staged = 0;
    for (const auto &row : protocol::kStageTable) {  // the GPU stages, the sanitizer rerun included
      if (row.side == protocol::StageSide::cpu || row.stage == protocol::Stage::profile) continue;
      const double s = v->stage(row.stage).wall_seconds;
      stage_s[std::string(row.name)] += s;
      staged += s;
    }
    stage_s["other"] += std::max(0.0, g - staged);
  }
  fmt::print("  GPU time per verdict class (verdicts made here, not reused):\n");
  fmt::print("    {:22} {:>8} {:>10} {:>10} {:>8}\n", "class", "verdicts", "GPU s", "s/verdict", "share");
  for (const auto &[name, c] : classes)
    fmt::print("    {:22} {:>8} {:>10.1f} {:>10.2f} {:>7.1f}%\n", name, c.verdicts, c.gpu_s,
               c.verdicts ? c.gpu_s / c.verdicts : 0.0, gpu_total > 0 ? 100.0 * c.gpu_s / gpu_total : 0.0);
  std::string shares;
  for (const auto &[stage, s] : stage_s)
    shares += fmt::format(" {} {:.1f}%", stage, gpu_total > 0 ? 100.0 * s / gpu_total : 0.0);
  fmt::print("  GPU time per stage   {}\n", shares);
}

}  // namespace

int main(int argc, char **argv) {
  std::string base_url, model = "normal";
  fs::path out;
  int samples = 4, turns = 4;
  bool gpu = false, baseline = false, no_reuse = false;
  std::vector<std::string> tasks{"gemm_n7168_k5120", "gemm_n4096_k4096", "gemm_n8192_k8192", "mha_fwd_d128",
                                 "mha_bwd_d128"};
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        fmt::print(stderr, "{} needs a value\n", a);
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--base-url")
      base_url = next();
    else if (a == "--model")
      model = next();
    else if (a == "--out")
      out = next();
    else if (a == "--samples")
      samples = std::stoi(next());
    else if (a == "--turns")
      turns = std::stoi(next());
    else if (a == "--gpu")
      gpu = true;
    else if (a == "--baseline")
      baseline = true;
    else if (a == "--no-reuse")
      no_reuse = true;
    else if (a == "--tasks") {
      tasks.clear();
      std::string list = next();
      for (std::size_t at = 0; at <= list.size();) {
        const std::size_t comma = std::min(list.find(',', at), list.size());
        if (comma > at) tasks.push_back(list.substr(at, comma - at));
        at = comma + 1;
      }
    } else {
      fmt::print(stderr,
                 "usage: bench_orchestrator [--base-url URL] [--model NAME] [--out DIR] [--samples N] "
                 "[--turns N] [--gpu] [--tasks ID,...] [--baseline] [--no-reuse]\n");
      return 2;
    }
  }
  if (out.empty()) out = fs::temp_directory_path() / fmt::format("ptxbench-bench-orch-{}", ::getpid());

  agent::RunConfig c;
  const fs::path examples = agent::default_examples_dir();
  for (int m = 0; m < 2; ++m) {
    llm::EndpointConfig e;
    e.name = fmt::format("model{}", m);
    if (base_url.empty()) {
      e.kind = "scripted";
      e.scripted_file = (examples / "scripted" / "responses.json").string();
      e.model = e.name;
    } else {
      e.kind = "openai";
      e.base_url = base_url;
      e.model = model;
      e.max_retries = 2;
    }
    c.endpoints.push_back(e);
  }
  c.tasks = tasks;
  c.samples = samples;
  c.turns = turns;
  c.stop = agent::StopTarget{false, false, std::nullopt};  // every trajectory runs all its turns
  c.evaluator.run_gpu = gpu;
  if (baseline) {
    c.reuse_verdicts = false;
    c.evaluator.worker.prestart = false;
    c.evaluator.correctness.all_trials = true;
    c.evaluator.worker.incorrect_execution_budget = std::chrono::hours(1);
    c.evaluator.timing.min_seconds = 0.5;
    c.evaluator.timing.reuse_correctness_inputs = false;
    c.evaluator.timing.paired_min_samples = 0;
  }
  if (no_reuse) c.reuse_verdicts = false;
  c.out_dir = out;

  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  ::sigaction(SIGINT, &sa, nullptr);
  ::sigaction(SIGTERM, &sa, nullptr);
  agent::RunOptions options;
  options.interrupts = &g_interrupts;
  // Log lines on stderr: a run cut short by a time limit still shows how far it got.
  options.progress = gpu ? agent::ProgressMode::lines : agent::ProgressMode::quiet;
  auto runner = agent::Runner::start(c, agent::RunServices::defaults(), options);
  if (!runner) {
    fmt::print(stderr, "error: {}\n", runner.error());
    return 1;
  }
  rusage self0{}, child0{};
  getrusage(RUSAGE_SELF, &self0);
  getrusage(RUSAGE_CHILDREN, &child0);
  const auto result = (*runner)->run();
  rusage self1{}, child1{};
  getrusage(RUSAGE_SELF, &self1);
  getrusage(RUSAGE_CHILDREN, &child1);

  auto run = traces::load_run(out);
  if (!run) {
    fmt::print(stderr, "error: {}\n", run.error());
    return 1;
  }
  std::vector<double> per_record;
  std::map<std::string, int> statuses;
  for (const auto &r : run->turns) {
    per_record.push_back(r.timings ? r.timings->orchestrator_cpu_ms.value_or(0.0) : 0.0);
    statuses[traces::status_of(r)] += 1;
  }
  const int n = std::max(1, result.turns_recorded);
  const double self_ms = cpu_ms(self1.ru_utime, self1.ru_stime) - cpu_ms(self0.ru_utime, self0.ru_stime);
  const double child_ms = cpu_ms(child1.ru_utime, child1.ru_stime) - cpu_ms(child0.ru_utime, child0.ru_stime);
  fmt::print("bench_orchestrator: 2 models x {} tasks x {} samples x {} turns, client {}, GPU stages {}{}\n",
             tasks.size(), samples, turns, base_url.empty() ? "scripted" : base_url, gpu ? "on" : "off",
             baseline ? " (baseline: no verdict reuse, no pre-started workers, every trial, every count, the "
                        "earlier timing policy)"
                      : "");
  fmt::print("  turns recorded        {} in {:.2f} s wall ({})\n", result.turns_recorded, result.wall_seconds,
             result.end == agent::RunEnd::completed ? "completed" : result.message);
  std::string st;
  for (const auto &[s, k] : statuses) st += fmt::format(" {}={}", s, k);
  fmt::print("  verdicts             {}\n", st);
  fmt::print(
      "  orchestrator CPU      {:.3f} ms/turn mean (records: p50 {:.3f}, p95 {:.3f}, max {:.3f}; total incl. "
      "trace writes {:.3f} ms/turn)  target < 5 ms\n",
      std::accumulate(per_record.begin(), per_record.end(), 0.0) /
          static_cast<double>(std::max<std::size_t>(1, per_record.size())),
      percentile(per_record, 0.5), percentile(per_record, 0.95), percentile(per_record, 1.0),
      result.orchestrator_cpu_ms / n);
  fmt::print("  chat client CPU       {:.3f} ms/turn\n", result.client_cpu_ms / n);
  fmt::print("  evaluator in-process  {:.3f} ms/turn (parse, static checks; excluded)\n",
             result.evaluator_cpu_ms / n);
  fmt::print("  process CPU (rusage)  {:.3f} ms/turn self, {:.3f} ms/turn children (ptxas etc.; excluded)\n",
             self_ms / n, child_ms / n);
  for (const auto &[g, busy] : result.gpu_busy_fraction)
    fmt::print("  GPU {} busy            {:.1f}% of the wall time\n", g, 100.0 * busy);
  fmt::print("  verdicts made/reused  {} / {}{}\n", result.verdicts_made, result.verdicts_reused,
             result.verdicts_per_gpu_hour > 0
                 ? fmt::format(", {:.0f} per GPU-hour", result.verdicts_per_gpu_hour)
                 : std::string());
  if (gpu) print_gpu_classes(*run);
  fmt::print("  run directory         {}\n", out.string());
  return result.end == agent::RunEnd::completed ? 0 : result.end == agent::RunEnd::interrupted ? 3 : 1;
}
