// `ptxbench doctor`: is this machine ready to evaluate kernels? One line per
// check (ok / warn / FAIL with what to do); exit 0 only when every essential
// check passes. Works on a machine without a GPU (it says so).
#include <dlfcn.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <fmt/core.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "cli/cli.hpp"
#include "evaluator/evaluator.hpp"
#include "evaluator/sass.hpp"
#include "evaluator/worker_client.hpp"
#include "util/subprocess.hpp"

namespace ptxbench::cli {
namespace {

using nlohmann::json;

struct DoctorOptions {
  bool as_json = false;
  int device = 0;
  std::string worker;  ///< empty = found like the evaluator finds it
};

struct Check {
  std::string name;
  std::string level;  ///< "ok" | "warn" | "fail"
  std::string detail;
  bool essential = false;
};

/// dlopen one of `names`; returns the name that loaded.
std::optional<std::string> loadable(const std::vector<std::string> &names) {
  for (const auto &n : names)
    if (void *h = dlopen(n.c_str(), RTLD_NOW | RTLD_LOCAL)) {
      dlclose(h);
      return n;
    }
  return std::nullopt;
}

std::string version_text(std::int64_t v) {  // 90100 -> 9.1.0 (cuDNN, cuBLASLt style)
  return fmt::format("{}.{}.{}", v / 10000, (v / 100) % 100, v % 100);
}

/// Asks the worker (the only process that loads the driver's compute side) for GPU facts and a CUPTI
/// probe. The probe's JSON, or null with a failed GPU check added.
json probe_gpu(const DoctorOptions &o, const evaluator::EvaluatorSettings &settings,
               std::vector<Check> &checks) {
  json probe;
  const std::string gpu_reason = evaluator::gpu_unavailable_reason(settings);
  if (!gpu_reason.empty()) {
    checks.push_back(
        {"GPU", "fail",
         "no GPU: " + gpu_reason + " (compile and static checks still work; GPU stages are skipped)", true});
    return probe;
  }
  const auto worker = evaluator::find_worker_binary(settings);
  auto r =
      evaluator::run_worker_command(worker.value_or("ptxbench-worker"), evaluator::WorkerCommand::probe(0),
                                    evaluator::WorkerPlace{.home = "/tmp",
                                                           .visible_device = o.device,
                                                           .wall = std::chrono::milliseconds(60'000),
                                                           .sandboxed = false,
                                                           .working_directory = false});
  if (!r || !r->ok()) {
    checks.push_back({"GPU", "fail",
                      "the worker probe failed (" + (r ? r->describe() + ": " + r->stderr_text : r.error()) +
                          "); set PTXBENCH_WORKER to the ptxbench-worker binary",
                      true});
    return probe;
  }
  try {
    probe = json::parse(r->stdout_text);
  } catch (const json::exception &e) {
    checks.push_back({"GPU", "fail", std::string("unreadable probe output: ") + e.what(), true});
  }
  return probe;
}

/// The GPU, driver, runtime, libraries and CUPTI counting as the worker's probe found them.
void add_probe_checks(const json &probe, int device, std::vector<Check> &checks) {
  const std::string cc = probe.value("compute_capability", "?");
  checks.push_back({"GPU", "ok",
                    fmt::format("{} (compute capability {}, {} SMs, L2 {} MiB), GPU index {}",
                                probe.value("gpu_name", "?"), cc, probe.value("sm_count", 0),
                                probe.value("l2_bytes", 0) >> 20, device),
                    true});
  if (cc.rfind("9.", 0) != 0)
    checks.push_back({"architecture", "warn", "the tasks target sm_90a (Hopper); this GPU is " + cc, false});
  const int drv = probe.value("driver_version", 0);
  checks.push_back(
      {"driver", "ok", fmt::format("CUDA driver API {}.{}", drv / 1000, (drv % 1000) / 10), true});
  const int rt = probe.value("cuda_runtime_version", 0);
  checks.push_back({"CUDA runtime", "ok", fmt::format("{}.{}", rt / 1000, (rt % 1000) / 10), false});
  checks.push_back({"cuBLASLt", "ok", version_text(probe.value("cublaslt_version", 0)), true});
  if (probe.contains("cudnn_version") && probe["cudnn_version"].is_number())
    checks.push_back({"cuDNN", "ok", version_text(probe["cudnn_version"].get<std::int64_t>()), false});
  else
    checks.push_back({"cuDNN", "warn", "libcudnn.so.9 not loadable: attention tasks cannot be timed", false});
  const json c = probe.value("cupti_sass_metrics", json::object());
  if (c.value("available", false) && c.value("warp_instructions", 0) > 0)
    checks.push_back(
        {"CUPTI", "ok",
         fmt::format("SASS metrics count instructions here ({} records, {} warp instructions, {} on "
                     "the probe's dead branch never executed)",
                     c.value("records", 0), c.value("warp_instructions", 0),
                     c.value("never_executed_records", 0)),
         true});
  else
    checks.push_back({"CUPTI", "fail",
                      "cannot count executed instructions: " + c.value("reason", std::string("no records")) +
                          " (the execution axis will be skipped)",
                      true});
}

/// No GPU: report the libraries as installed files.
void add_library_file_checks(std::vector<Check> &checks) {
  const auto lt = loadable({"libcublasLt.so.13", "libcublasLt.so.12", "libcublasLt.so"});
  checks.push_back({"cuBLASLt", lt ? "ok" : "fail", lt ? *lt + " loadable" : "libcublasLt not found", false});
  const auto dnn = loadable({"libcudnn.so.9"});
  checks.push_back(
      {"cuDNN", dnn ? "ok" : "warn", dnn ? *dnn + " loadable" : "libcudnn.so.9 not found", false});
  const auto cupti = loadable({"libcupti.so.13", "libcupti.so.12", "libcupti.so"});
  checks.push_back({"CUPTI", cupti ? "ok" : "warn",
                    cupti ? *cupti + " loadable (counting needs a GPU)" : "libcupti not found", false});
}

/// The CUDA tools beside the compiler: the SASS disassembler and compute-sanitizer.
void add_tool_checks(std::vector<Check> &checks) {
  const auto dis = evaluator::find_disassembler();
  checks.push_back(
      {"disassembler", dis ? "ok" : "warn",
       dis ? dis->path.string()
           : "neither cuobjdump nor nvdisasm found: no SASS listing, so targets cannot be joined "
             "with execution counts (install the CUDA toolkit's binaries or the "
             "nvidia-cuda-nvdisasm wheel)",
       false});
  const auto sanitizer = util::find_program("compute-sanitizer", {"/usr/local/cuda/bin"});
  checks.push_back({"compute-sanitizer", sanitizer ? "ok" : "warn",
                    sanitizer ? *sanitizer : "not found: faults and races get no sanitizer report", false});
}

std::vector<Check> run_checks(const DoctorOptions &o, json &facts) {
  std::vector<Check> checks;
  evaluator::EvaluatorSettings settings;
  settings.device = o.device;
  if (!o.worker.empty()) settings.worker_path = o.worker;

  const auto ptxas = util::find_program("ptxas", {"/usr/local/cuda/bin"});
  checks.push_back({"ptxas", ptxas ? "ok" : "fail",
                    ptxas ? *ptxas : "not found: install the CUDA toolkit (12.4+) or put its bin/ on PATH",
                    true});
  const json probe = probe_gpu(o, settings, checks);
  if (probe.is_object()) {
    facts = probe;
    add_probe_checks(probe, o.device, checks);
  } else {
    add_library_file_checks(checks);
  }
  add_tool_checks(checks);
  return checks;
}

int doctor(const DoctorOptions &o) {
  json facts = json::object();
  const auto checks = run_checks(o, facts);
  bool essential_ok = true;
  for (const auto &c : checks) essential_ok = essential_ok && (c.level != "fail" || !c.essential);
  if (o.as_json) {
    json list = json::array();
    for (const auto &c : checks)
      list.push_back(
          {{"check", c.name}, {"level", c.level}, {"detail", c.detail}, {"essential", c.essential}});
    fmt::print("{}\n", json{{"ok", essential_ok}, {"checks", list}, {"gpu", facts}}.dump(2));
  } else {
    for (const auto &c : checks)
      fmt::print("[{:<4}] {:<18} {}\n", c.level == "fail" ? "FAIL" : c.level, c.name, c.detail);
    fmt::print("{}\n", essential_ok ? "ready: every essential check passed"
                                    : "not ready for GPU evaluation: see the FAIL lines above");
  }
  return essential_ok ? kExitOk : kExitEnvironment;
}

}  // namespace

void register_doctor_command(CLI::App &app, Action &action) {
  auto options = std::make_shared<DoctorOptions>();
  CLI::App *cmd = app.add_subcommand("doctor", "Check GPU, driver, CUDA, cuBLASLt, cuDNN, CUPTI and tools");
  cmd->add_flag("--json", options->as_json, "Print the checks and GPU facts as JSON");
  cmd->add_option("--device", options->device, "CUDA device index to check (default 0)");
  cmd->add_option("--worker", options->worker,
                  "Path of ptxbench-worker (default: found like the evaluator does)");
  cmd->callback([&action, options] { action.run = [options] { return doctor(*options); }; });
}

}  // namespace ptxbench::cli
