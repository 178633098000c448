// The compile stage (ptxas, the launch resources its report implies, the SASS listing) and the end of a
// deferred SASS listing (evaluator/detail/pipeline.hpp).
#include <algorithm>
#include <chrono>
#include <map>
#include <stdexcept>

#include <fmt/core.h>
#include <fmt/ranges.h>

#include "evaluator/compile.hpp"
#include "evaluator/detail/limits.hpp"
#include "evaluator/detail/pipeline.hpp"
#include "evaluator/evaluator.hpp"
#include "evaluator/sass.hpp"

namespace ptxbench::evaluator::detail {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

void fail(StageResult &s, Status status, const std::string &message) {
  s.status = status;
  s.summary = message;
  s.diagnostics.push_back({"error", message, std::nullopt});
}

double ms_to_s(std::chrono::milliseconds ms) {
  return std::chrono::duration<double>(ms).count();
}

bool notable_warning(const std::string &text) {
  return text.find("setmaxnreg") != std::string::npos || text.find("serialized") != std::string::npos ||
         text.find("spill") != std::string::npos || text.find("Performance Loss") != std::string::npos ||
         text.find("local memory") != std::string::npos || text.find("C75") != std::string::npos;
}

// A ptxas error, said where it is: the response line for the model's own PTX, else the generated PTX's.
Diagnostic located(const Diagnostic &e, const CompileInput &in) {
  Diagnostic d = e;
  if (!e.line) {
    d.text = "ptxas: " + e.text;
  } else if (in.from_ptx_block) {
    d.text = fmt::format("ptxas, line {} of the PTX block (response line {}): {}", *e.line,
                         in.kernel_first_line + *e.line - 1, e.text);
  } else {
    d.text = fmt::format("ptxas, line {} of the NVRTC-generated PTX: {}", *e.line, e.text);
  }
  return d;
}

void report_ptxas_failure(StageResult &stage, const PtxasRun &run, const CompileInput &in) {
  stage.status = Status::compile_error;
  for (const auto &e : run.report.errors) stage.diagnostics.push_back(located(e, in));
  if (!run.failure.empty()) stage.diagnostics.push_back({"error", run.failure, std::nullopt});
  auto first = std::find_if(stage.diagnostics.begin(), stage.diagnostics.end(),
                            [](const Diagnostic &d) { return d.severity == "error"; });
  stage.summary = first != stage.diagnostics.end() ? first->text : "ptxas failed";
  if (run.report.errors.size() > 1)
    stage.summary += fmt::format(" (and {} more error(s))", run.report.errors.size() - 1);
}

void record_resources(StageResult &stage, protocol::CompileFigures &figures, const PtxasFunctionInfo &info,
                      std::size_t cubin_bytes) {
  figures.registers = info.registers;
  figures.spill_store_bytes = info.spill_store_bytes;
  figures.spill_load_bytes = info.spill_load_bytes;
  figures.shared_bytes = info.shared_bytes;
  figures.stack_bytes = info.stack_bytes;
  figures.barriers = info.barriers;
  figures.cubin_bytes = cubin_bytes;
  if (info.spill_store_bytes > 0 || info.spill_load_bytes > 0)
    stage.diagnostics.push_back(
        {"warning",
         fmt::format("{} bytes spilled to local memory (stores) and {} bytes reloaded: expect "
                     "slow code; reduce live registers",
                     info.spill_store_bytes, info.spill_load_bytes),
         std::nullopt});
}

// Launch resources the device would refuse, known now: launch_error (the manifest asks for more than a
// block may have), reported before any GPU time is spent.
void check_launch_resources(StageResult &stage, const PtxasFunctionInfo &info,
                            const std::vector<LaunchPlan> &plans, const std::string &arch) {
  const std::int64_t smem_limit = max_shared_bytes_per_block(arch);
  const std::int64_t register_limit = registers_per_block(arch);
  for (const auto &plan : plans) {
    const std::int64_t threads = plan.block[0] * plan.block[1] * plan.block[2];
    const std::int64_t total_smem = info.shared_bytes + plan.shared_bytes;
    if (total_smem > smem_limit) {
      fail(stage, Status::launch_error,
           fmt::format("{} bytes of static shared memory + {} bytes dynamic (workload {}) = {} bytes, more "
                       "than the {} bytes a block may use on {}",
                       info.shared_bytes, plan.shared_bytes, plan.workload, total_smem, smem_limit, arch));
      return;
    }
    // Registers are allocated per warp in units of 256 (8 per thread).
    const std::int64_t regs = (info.registers + 7) / 8 * 8;
    const std::int64_t warps = (threads + 31) / 32;
    if (regs * 32 * warps > register_limit) {
      fail(
          stage, Status::launch_error,
          fmt::format("{} registers per thread x {} threads needs {} registers, more than the {} a block may "
                      "use: the launch would fail (lower .maxnreg or use fewer threads)",
                      info.registers, threads, regs * 32 * warps, register_limit));
      return;
    }
  }
}

// Starts the disassembly of `cubin` (on a thread; deferred with the reason when there is no
// disassembler), so that it overlaps whatever runs next.
std::shared_ptr<PendingSass> start_sass(const std::string &cubin, const CompileInput &in,
                                        const tasks::Task &task, const EvaluatorSettings &settings,
                                        json &environment) {
  auto pending = std::make_shared<PendingSass>();
  pending->task = &task;
  pending->targets_in_ptx = in.targets_in_ptx;
  auto disassembler = find_disassembler(settings.disassembler_path);
  if (!disassembler) {
    pending->listing = std::async(std::launch::deferred, [] {
      return util::Expected<std::string>(
          util::unexpected(std::string("no cuobjdump/nvdisasm: SASS checks skipped")));
    });
    return pending;
  }
  environment["disassembler"] = disassembler->path.string();
  util::ProcessLimits limits;
  limits.wall_time = settings.compile.disassembler_wall;
  limits.max_output_bytes = 64u << 20;
  const fs::path path = pending->dir.path() / "kernel.cubin";
  if (auto w = util::write_file_atomic(path, cubin); !w) throw std::runtime_error(w.error());
  // With line info, so sampled PCs can name the model's lines: the PTX it wrote, or its CUDA source.
  const SassLineInfo line_info = in.from_ptx_block ? SassLineInfo::ptx : SassLineInfo::source;
  pending->listing = std::async(std::launch::async, [dis = *disassembler, path, limits, line_info] {
    auto text = disassemble_cubin(dis, path, limits, line_info);
    if (!text) return util::Expected<std::string>(util::unexpected("SASS listing failed: " + text.error()));
    return text;
  });
  return pending;
}

}  // namespace

StageOutcome<CompileOutput> compile_stage(const CompileInput &in, const tasks::Task &task,
                                          const EvaluatorSettings &settings, const fs::path &work) {
  StageOutcome<CompileOutput> out;
  StageResult &stage = out.result;
  protocol::CompileFigures figures;
  figures.nvrtc_seconds = in.nvrtc_seconds;
  stage.figures = figures;  // written again after each step below
  auto ptxas = find_ptxas(settings.ptxas_path);
  if (!ptxas) {
    fail(stage, Status::compile_error,
         settings.ptxas_path.empty() ? "ptxas not found (PATH, /usr/local/cuda/bin): install the CUDA toolkit"
                                     : "ptxas not found at " + settings.ptxas_path.string());
    return out;
  }
  out.output.environment["ptxas"] = ptxas->string();
  util::ProcessLimits limits;
  limits.wall_time = settings.compile.ptxas_wall;
  limits.address_space_bytes = settings.compile.ptxas_address_space_bytes;
  limits.cpu_seconds = static_cast<std::uint64_t>(ms_to_s(settings.compile.ptxas_wall)) + 5;
  auto run = run_ptxas(*ptxas, in.ptx, task.arch, work, limits);
  if (!run) {
    fail(stage, Status::compile_error, "could not run ptxas: " + run.error());
    return out;
  }
  figures.ptxas_seconds = run->wall_seconds;
  figures.warnings.emplace();
  for (const auto &w : run->report.warnings) {
    figures.warnings->push_back(w.text);
    if (notable_warning(w.text)) stage.diagnostics.push_back(w);
  }
  stage.figures = figures;
  if (!run->ok) {
    report_ptxas_failure(stage, *run, in);
    return out;
  }
  out.output.cubin = std::move(run->cubin);
  const PtxasFunctionInfo *found = run->report.find(in.entry);
  const PtxasFunctionInfo info = found ? *found : PtxasFunctionInfo{};
  record_resources(stage, figures, info, out.output.cubin.size());
  check_launch_resources(stage, info, in.plans, task.arch);
  if (stage.status != Status::launch_error) {
    stage.status = Status::ok;
    stage.summary =
        fmt::format("{} registers, {} B static smem, {} B stack, spills {}/{} B", info.registers,
                    info.shared_bytes, info.stack_bytes, info.spill_store_bytes, info.spill_load_bytes);
  }
  // SASS listing and target opcode families: started here, finished by finish_pending_sass.
  figures.sass_available = false;
  figures.targets_in_sass.emplace();
  figures.sass_families.emplace();
  stage.figures = figures;
  out.output.pending_sass = start_sass(out.output.cubin, in, task, settings, out.output.environment);
  return out;
}

namespace {

void record_sass(StageResult &stage, protocol::CompileFigures &figures, const SassListing &listing,
                 const PendingSass &pending) {
  const tasks::Task &task = *pending.task;
  figures.sass_available = true;
  figures.sass_instruction_count = listing.instructions.size();
  figures.targets_in_sass = targets_in_sass(listing, task.targets).get<std::map<std::string, bool>>();
  figures.sass_families.emplace();
  for (const auto &[family, count] : listing.family_counts()) (*figures.sass_families)[family] = count;
  for (const auto &t : task.targets) {
    const bool in_ptx = std::find(pending.targets_in_ptx.begin(), pending.targets_in_ptx.end(), t.name) !=
                        pending.targets_in_ptx.end();
    if (in_ptx && figures.target_in_sass(t.name) == false)
      stage.diagnostics.push_back(
          {"warning",
           fmt::format(
               "target {}: `{}` is in the PTX but no {} instruction is in the SASS (dead code removed?)",
               t.name, t.ptx_mnemonic, fmt::join(t.sass_families, "/")),
           std::nullopt});
  }
}

}  // namespace

util::Expected<std::string> finish_pending_sass(PendingSass &pending, StageResult &stage,
                                                SassListing &listing) {
  const auto t0 = std::chrono::steady_clock::now();
  util::Expected<std::string> text = pending.listing.get();
  // The figures the compile stage wrote (through the codec: this stage's own record).
  protocol::CompileFigures figures =
      protocol::compile_figures_from_figures(stage.figures).value_or(protocol::CompileFigures{});
  // How long this call blocked on the disassembler (when deferred, on a thread beside the worker).
  figures.sass_wait_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!text) {
    stage.diagnostics.push_back({"note", text.error(), std::nullopt});
  } else {
    listing = parse_sass_listing(*text);
    record_sass(stage, figures, listing, pending);
  }
  stage.figures = figures;
  if (stage.status == Status::ok) {
    std::vector<std::string> present;
    for (const auto &t : pending.task->targets)
      if (figures.target_in_sass(t.name) == true) present.push_back(t.name);
    stage.summary +=
        fmt::format("; SASS: {}", !text ? std::string("not available")
                                        : (present.empty() ? std::string("no target families")
                                                           : fmt::format("{}", fmt::join(present, ", "))));
  }
  return text;
}

}  // namespace ptxbench::evaluator::detail
