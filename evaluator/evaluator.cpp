// The CPU stages' runner: parse, then the PTX source (NVRTC for ```cuda), static checks and compile
// (ptxas, SASS listing), each a function from typed inputs to a typed outcome (detail/pipeline.hpp);
// then the GPU stages when enabled.
#include "evaluator/evaluator.hpp"

#include <chrono>
#include <random>
#include <string>
#include <utility>

#include "evaluator/detail/pipeline.hpp"
#include "evaluator/static_checks.hpp"
#include "util/files.hpp"

namespace ptxbench::evaluator {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

double ms_to_s(std::chrono::milliseconds ms) {
  return std::chrono::duration<double>(ms).count();
}

using protocol::Stage;

// Runs one stage: times it, stores its result in `slot` and, unless it passed, skips the stages after
// it. The output when it passed, else nullopt.
template <class Run>
auto run_stage(Verdict &v, Stage slot, Run &&run) -> std::optional<decltype(run().output)> {
  const auto t0 = Clock::now();
  auto outcome = run();
  outcome.result.wall_seconds += seconds_since(t0);
  v.stage(slot) = std::move(outcome.result);
  if (v.stage(slot).status != Status::ok) {
    v.skip_from(slot);
    return std::nullopt;
  }
  return std::move(outcome.output);
}

void merge_environment(Verdict &v, const json &entries) {
  for (const auto &[key, value] : entries.items()) v.environment[key] = value;
}

// The stages after parse; returns at the first that does not pass (run_stage has skipped the rest).
void run_after_parse(CompiledCandidate &c, const tasks::Task &task, const EvaluatorSettings &settings) {
  Verdict &v = c.verdict;
  util::TempDir work("ptxbench-eval");
  // A CUDA block that does not compile fails the compile stage before the static stage could run.
  auto source = run_stage(v, Stage::compile,
                          [&] { return detail::ptx_source_stage(c.response, task, settings, work.path()); });
  if (!source) {
    v.static_checks.status = Status::skipped;
    v.static_checks.summary = "not run: the CUDA source did not compile to PTX";
    return;
  }
  c.ptx = std::move(source->ptx);
  v.compile.wall_seconds = 0;  // the compile stage's time is ptxas's; NVRTC's is its figure
  auto checked = run_stage(v, Stage::static_checks, [&] {
    auto outcome = detail::static_stage(c.ptx, c.manifest, c.plans, task, settings.compile);
    v.kernel_hash = outcome.output.kernel_hash;  // named even when the module does not pass
    return outcome;
  });
  if (!checked) return;
  c.plans = with_param_types(std::move(c.plans), checked->entry_param_types);
  c.hidden_plans = with_param_types(std::move(c.hidden_plans), checked->entry_param_types);
  const detail::CompileInput in{c.ptx,
                                c.response.language == KernelLanguage::ptx,
                                c.response.kernel_first_line,
                                c.manifest.entry,
                                c.plans,
                                checked->targets_in_ptx,
                                source->nvrtc_seconds};
  std::shared_ptr<detail::PendingSass> pending;
  run_stage(v, Stage::compile, [&] {
    auto outcome = detail::compile_stage(in, task, settings, work.path());
    merge_environment(v, outcome.output.environment);
    c.cubin = std::move(outcome.output.cubin);
    pending = std::move(outcome.output.pending_sass);  // a launch_error keeps its SASS figures too
    return outcome;
  });
  c.pending_sass = std::move(pending);
}

}  // namespace

json EvaluatorSettings::to_json() const {
  return json{
      {"parse",
       {{"max_response_bytes", parse.max_response_bytes},
        {"max_kernel_bytes", parse.max_kernel_bytes},
        {"max_manifest_bytes", parse.max_manifest_bytes}}},
      {"compile",
       {{"ptxas_wall_seconds", ms_to_s(compile.ptxas_wall)},
        {"ptxas_address_space_bytes", compile.ptxas_address_space_bytes},
        {"nvrtc_wall_seconds", ms_to_s(compile.nvrtc_wall)},
        {"nvrtc_address_space_bytes", compile.nvrtc_address_space_bytes},
        {"max_ptx_bytes", compile.max_ptx_bytes},
        {"max_ptx_instructions", compile.max_ptx_instructions},
        {"disassembler_wall_seconds", ms_to_s(compile.disassembler_wall)}}},
      {"correctness", correctness},
      {"timing", timing},
      {"worker", worker},
      {"profile", profile},
      {"run_seed", run_seed},
      {"hidden_workloads", {{"check", hidden.check}, {"time", hidden.time}, {"reveal", hidden.reveal}}},
      {"run_gpu", run_gpu},
      {"run_sanitizer", run_sanitizer},
      {"min_target_work_share", min_target_work_share},
      {"min_tma_byte_share", min_tma_byte_share},
      {"redundant_work", redundant_work},
      {"num_sms", num_sms},
      {"device", device},
      {"worker_path", worker_path.string()},
      {"ptxas_path", ptxas_path.string()},
      {"disassembler_path", disassembler_path.string()},
      {"nvrtc_child_path", nvrtc_child_path.string()},
      {"lock_dir", lock_dir.string()}};
}

std::uint64_t task_input_seed(std::uint64_t run_seed, std::string_view task_id) {
  const std::string key = std::to_string(run_seed) + "/" + std::string(task_id);
  const std::uint64_t seed = util::fnv1a64(key);
  return seed != 0 ? seed : 1;
}

std::uint64_t draw_run_seed() {
  // 53 bits: every JSON reader (jq and JavaScript read numbers as doubles) keeps the recorded value exact.
  std::random_device source;
  for (;;) {
    const std::uint64_t seed = ((std::uint64_t{source()} << 32) ^ source()) & ((std::uint64_t{1} << 53) - 1);
    if (seed != 0) return seed;
  }
}

bool CompiledCandidate::ready_for_gpu() const {
  return verdict.parse.status == Status::ok && verdict.static_checks.status == Status::ok &&
         verdict.compile.status == Status::ok && !cubin.empty() && !plans.empty();
}

std::string finish_sass(CompiledCandidate &c) {
  if (!c.pending_sass) return "";
  const std::shared_ptr<detail::PendingSass> pending = std::move(c.pending_sass);
  auto text = detail::finish_pending_sass(*pending, c.verdict.compile, c.sass_listing);
  if (!text) return text.error();
  c.sass = std::move(*text);
  return "";
}

std::optional<fs::path> find_nvrtc_child(const EvaluatorSettings &settings) {
  if (!settings.nvrtc_child_path.empty()) {
    std::error_code ec;
    if (fs::is_regular_file(settings.nvrtc_child_path, ec)) return settings.nvrtc_child_path;
    return std::nullopt;
  }
  const auto worker = find_worker_binary(settings);
  if (!worker) return std::nullopt;
  const fs::path child = worker->parent_path() / "ptxbench-nvrtc";
  std::error_code ec;
  return fs::is_regular_file(child, ec) ? std::optional(child) : std::nullopt;
}

namespace {

ParsedCandidate parse_input(const tasks::Task &task, std::string_view text, std::size_t bytes, bool at_least,
                            const EvaluatorSettings &settings) {
  const auto t0 = Clock::now();
  auto outcome = detail::parse_stage(task, text, bytes, at_least, settings.parse,
                                     device_symbols(task, settings.num_sms));
  ParsedCandidate p;
  p.parse = std::move(outcome.result);
  p.parse.wall_seconds += seconds_since(t0);
  // What the stage got to, also when it failed after splitting the text (a bad manifest keeps the kernel
  // for the record's source lines).
  p.response = std::move(outcome.output.response);
  p.manifest = std::move(outcome.output.manifest);
  p.plans = std::move(outcome.output.plans);
  p.hidden_plans = std::move(outcome.output.hidden_plans);
  p.hidden_plan_errors = std::move(outcome.output.hidden_plan_errors);
  return p;
}

CompiledCandidate cpu_stages_after_parse(const tasks::Task &task, ParsedCandidate parsed,
                                         const EvaluatorSettings &settings, bool defer_sass) {
  const auto t_all = Clock::now();
  CompiledCandidate c;
  Verdict &v = c.verdict;
  v.task_id = task.id;
  v.settings = settings.to_json();
  if (!task.hidden_workloads.empty()) v.generalizes = Generalization{};  // decided by the GPU stage
  v.skip_gpu_stages("not run yet");
  const double parse_seconds = parsed.parse.wall_seconds;
  v.parse = std::move(parsed.parse);
  if (v.parse.status != Status::ok) {
    v.skip_from(Stage::parse);
  } else {
    c.response = std::move(parsed.response);
    c.manifest = std::move(parsed.manifest);
    c.plans = std::move(parsed.plans);
    c.hidden_plans = std::move(parsed.hidden_plans);
    c.hidden_plan_errors = std::move(parsed.hidden_plan_errors);
    run_after_parse(c, task, settings);
  }
  if (!defer_sass || v.compile.status != Status::ok) {
    const auto t_sass = Clock::now();
    finish_sass(c);
    if (v.compile.status != Status::skipped)
      v.compile.wall_seconds += seconds_since(t_sass);  // not overlapped with anything: the stage's time
  }
  v.finalize_status();
  v.wall_seconds = parse_seconds + seconds_since(t_all);
  return c;
}

Verdict evaluate_parsed(const tasks::Task &task, ParsedCandidate parsed, const EvaluatorSettings &settings) {
  const auto t0 = Clock::now();
  const double parse_seconds = parsed.parse.wall_seconds;
  // The SASS listing is made while the worker runs (run_gpu_stages hands it over when it is done).
  CompiledCandidate c = cpu_stages_after_parse(task, std::move(parsed), settings, /*defer_sass=*/true);
  if (c.ready_for_gpu()) {
    if (settings.run_gpu) {
      run_gpu_stages(c, task, settings);
    } else {
      c.verdict.skip_gpu_stages("disabled by --no-gpu");
    }
  }
  finish_sass(c);
  c.verdict.finalize_status();
  c.verdict.wall_seconds = parse_seconds + seconds_since(t0);
  return std::move(c.verdict);
}

}  // namespace

ParsedCandidate parse_candidate(const tasks::Task &task, std::string_view response,
                                const EvaluatorSettings &settings) {
  return parse_input(task, response, response.size(), false, settings);
}

ParsedCandidate parse_candidate(const tasks::Task &task, const ResponseInput &response,
                                const EvaluatorSettings &settings) {
  return parse_input(task, response.text, response.bytes, response.bytes_at_least, settings);
}

CompiledCandidate run_cpu_stages(const tasks::Task &task, std::string_view response,
                                 const EvaluatorSettings &settings, bool defer_sass) {
  return cpu_stages_after_parse(task, parse_candidate(task, response, settings), settings, defer_sass);
}

CompiledCandidate run_cpu_stages(const tasks::Task &task, ParsedCandidate parsed,
                                 const EvaluatorSettings &settings, bool defer_sass) {
  return cpu_stages_after_parse(task, std::move(parsed), settings, defer_sass);
}

Verdict evaluate(const tasks::Task &task, std::string_view response, const EvaluatorSettings &settings) {
  return evaluate_parsed(task, parse_candidate(task, response, settings), settings);
}

Verdict evaluate(const tasks::Task &task, const ResponseInput &response, const EvaluatorSettings &settings) {
  return evaluate_parsed(task, parse_candidate(task, response, settings), settings);
}

Verdict evaluate(const tasks::Task &task, ParsedCandidate parsed, const EvaluatorSettings &settings) {
  return evaluate_parsed(task, std::move(parsed), settings);
}

}  // namespace ptxbench::evaluator
