// The parse, PTX source and static stages (evaluator/detail/pipeline.hpp).
#include <fmt/core.h>

#include "evaluator/compile.hpp"
#include "evaluator/detail/pipeline.hpp"
#include "evaluator/evaluator.hpp"
#include "evaluator/ptx.hpp"
#include "evaluator/static_checks.hpp"
#include "util/files.hpp"

namespace ptxbench::evaluator::detail {

namespace {

void fail(StageResult &s, Status status, const std::string &message, std::optional<int> line = std::nullopt) {
  s.status = status;
  s.summary = message;
  s.diagnostics.push_back({"error", message, line});
}

double ms_to_s(std::chrono::milliseconds ms) {
  return std::chrono::duration<double>(ms).count();
}

// The manifest, parsed and resolved for every workload; false (with the stage failed) when it is not.
bool resolve_manifest(StageResult &s, ParseOutput &out, const tasks::Task &task,
                      const DeviceSymbols &device) {
  auto manifest = parse_manifest(out.response.manifest_text, task, device);
  if (!manifest) {
    fail(s, Status::bad_manifest, "launch manifest: " + manifest.error());
    return false;
  }
  out.manifest = std::move(*manifest);
  for (const auto &w : task.workloads) {
    auto plan = resolve_launch(out.manifest, task, w, device);
    if (!plan) {
      fail(s, Status::bad_manifest, fmt::format("launch manifest, workload {}: {}", w.name, plan.error()));
      return false;
    }
    out.plans.push_back(std::move(*plan));
  }
  // Hidden workloads: a manifest that does not resolve there is a kernel that does not generalize, not a
  // bad manifest (the model never saw those shapes); the generalization result says so.
  for (const auto &w : task.hidden_workloads) {
    auto plan = resolve_launch(out.manifest, task, w, device);
    if (plan)
      out.hidden_plans.push_back(std::move(*plan));
    else
      out.hidden_plan_errors[w.name] = plan.error();
  }
  return true;
}

}  // namespace

StageOutcome<ParseOutput> parse_stage(const tasks::Task &task, std::string_view text, std::size_t bytes,
                                      bool at_least, const ParseLimits &limits, const DeviceSymbols &device) {
  StageOutcome<ParseOutput> out;
  StageResult &s = out.result;
  auto too_large = response_size_error(bytes, limits, at_least);
  auto parsed = too_large ? util::Expected<ParsedResponse, ParseError>(util::unexpected(*too_large))
                          : parse_response(text, limits);
  if (!parsed) {
    fail(s, parsed.error().status, parsed.error().message);
    return out;
  }
  ParsedResponse &r = out.output.response = std::move(*parsed);
  protocol::ParseFigures figures;
  figures.language = r.language == KernelLanguage::ptx ? "ptx" : "cuda";
  figures.kernel_first_line = r.kernel_first_line;
  figures.kernel_blocks_seen = r.kernel_blocks_seen;
  figures.json_blocks_seen = r.json_blocks_seen;
  figures.kernel_bytes = r.kernel_source.size();
  // The device symbols the expressions resolved with: num_sms and where it came from.
  if (device.num_sms > 0) figures.num_sms = device.num_sms;
  figures.num_sms_source = device.source;
  const bool resolved = resolve_manifest(s, out.output, task, device);
  if (resolved && !out.output.manifest.workspace_bytes.empty()) {
    figures.workspace_bytes.emplace();  // workload -> bytes
    for (const auto &plan : out.output.plans)
      (*figures.workspace_bytes)[plan.workload] = plan.workspace_bytes;
  }
  s.figures = figures;
  if (r.kernel_blocks_seen > 1)
    s.diagnostics.push_back({"note",
                             fmt::format("{} kernel blocks found; the last one (line {}) was evaluated",
                                         r.kernel_blocks_seen, r.kernel_first_line - 1),
                             std::nullopt});
  if (!resolved) return out;
  s.status = Status::ok;
  s.summary = fmt::format("{} kernel ({} bytes) and manifest for entry {}; {} workload(s) resolved",
                          r.language == KernelLanguage::ptx ? "PTX" : "CUDA", r.kernel_source.size(),
                          out.output.manifest.entry, out.output.plans.size());
  return out;
}

StageOutcome<PtxSource> ptx_source_stage(const ParsedResponse &response, const tasks::Task &task,
                                         const EvaluatorSettings &settings,
                                         const std::filesystem::path &work) {
  StageOutcome<PtxSource> out;
  out.result.status = Status::ok;
  if (response.language == KernelLanguage::ptx) {
    out.output.ptx = response.kernel_source;
    return out;
  }
  const auto t0 = std::chrono::steady_clock::now();
  const auto child = find_nvrtc_child(settings);
  util::ProcessLimits limits;
  limits.wall_time = settings.compile.nvrtc_wall;
  limits.cpu_seconds = static_cast<std::uint64_t>(ms_to_s(settings.compile.nvrtc_wall)) + 5;
  limits.address_space_bytes = settings.compile.nvrtc_address_space_bytes;
  limits.max_output_bytes = settings.compile.max_ptx_bytes;
  util::Expected<std::string> ptx =
      child ? nvrtc_compile_in_child(*child, response.kernel_source, task.arch, work, limits)
            : util::Expected<std::string>(util::unexpected(
                  std::string("the ptxbench-nvrtc child was not found next to the worker (build it, or set "
                              "EvaluatorSettings::nvrtc_child_path)")));
  out.output.nvrtc_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  out.result.figures = protocol::CompileFigures{.nvrtc_seconds = out.output.nvrtc_seconds};
  if (!ptx) {
    fail(out.result, Status::compile_error, "NVRTC: " + ptx.error());
    return out;
  }
  out.output.ptx = std::move(*ptx);
  return out;
}

StageOutcome<StaticOutput> static_stage(const std::string &ptx, const Manifest &manifest,
                                        const std::vector<LaunchPlan> &plans, const tasks::Task &task,
                                        const CompileLimits &limits) {
  StageOutcome<StaticOutput> out;
  out.output.kernel_hash = util::fnv1a64_hex(ptx);
  if (ptx.size() > limits.max_ptx_bytes) {
    fail(out.result, Status::static_error,
         fmt::format("the PTX is {} bytes, more than the limit of {}", ptx.size(), limits.max_ptx_bytes));
    return out;
  }
  auto module = parse_ptx(ptx);
  if (!module) {
    fail(out.result, Status::static_error, "PTX syntax: " + module.error().text(), module.error().line);
    return out;
  }
  out.output.kernel_hash = module->normalized_hash;
  StaticCheckResult checked = run_static_checks(*module, manifest, task, plans, limits.max_ptx_instructions);
  out.result = std::move(checked.stage);
  out.output.entry_param_types = std::move(checked.entry_param_types);
  out.output.targets_in_ptx = std::move(checked.targets_in_ptx);
  return out;
}

}  // namespace ptxbench::evaluator::detail
