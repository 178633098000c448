// The CPU stages in order: parse (response + manifest), static checks, compile
// (NVRTC for ```cuda, ptxas, SASS listing); then the GPU stages when enabled.
#include "evaluator/evaluator.hpp"

#include <algorithm>
#include <chrono>
#include <future>
#include <stdexcept>

#include <fmt/core.h>
#include <fmt/ranges.h>

#include "evaluator/compile.hpp"
#include "evaluator/detail/limits.hpp"
#include "evaluator/ptx.hpp"
#include "evaluator/sass.hpp"
#include "evaluator/static_checks.hpp"
#include "util/files.hpp"

namespace ptxbench::evaluator {
namespace fs = std::filesystem;
using nlohmann::json;

namespace detail {
struct PendingSass {
  util::TempDir dir{"ptxbench-sass"};  ///< holds the cubin being disassembled; outlives `listing`
  std::future<util::Expected<std::string>> listing;  ///< nvdisasm / cuobjdump output, or why there is none
  const tasks::Task *task = nullptr;
  std::vector<std::string> targets_in_ptx;  ///< targets whose mnemonic the PTX has (for the SASS warning)
  ~PendingSass() {
    if (listing.valid()) listing.wait();  // the cubin's folder goes only after the disassembler is done
  }
};
}  // namespace detail

namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

double ms_to_s(std::chrono::milliseconds ms) {
  return std::chrono::duration<double>(ms).count();
}

void fail_stage(StageResult &s, Status status, const std::string &message,
                std::optional<int> line = std::nullopt) {
  s.status = status;
  s.summary = message;
  s.diagnostics.push_back({"error", message, line});
}

// Marks every stage after `from` as skipped because an earlier one failed.
void skip_rest(Verdict &v, StageResult *from) {
  StageResult *order[] = {&v.parse,     &v.static_checks, &v.compile,  &v.correctness,
                          &v.execution, &v.timing,        &v.sanitizer};
  bool after = false;
  for (StageResult *s : order) {
    if (after) {
      s->status = Status::skipped;
      s->summary = fmt::format("not run: an earlier stage ended with {}", to_string(from->status));
    }
    if (s == from) after = true;
  }
}

void skip_gpu_stages(Verdict &v, const std::string &reason) {
  for (StageResult *s : {&v.correctness, &v.execution, &v.timing, &v.sanitizer}) {
    s->status = Status::skipped;
    s->summary = reason;
  }
}

// Response line for a kernel-source line (PTX written by the model).
std::string response_line_note(const ParsedResponse &r, int kernel_line) {
  return fmt::format("line {} of the PTX block (response line {})", kernel_line,
                     r.kernel_first_line + kernel_line - 1);
}

bool notable_warning(const std::string &text) {
  return text.find("setmaxnreg") != std::string::npos || text.find("serialized") != std::string::npos ||
         text.find("spill") != std::string::npos || text.find("Performance Loss") != std::string::npos ||
         text.find("local memory") != std::string::npos || text.find("C75") != std::string::npos;
}

void run_compile(CompiledCandidate &c, const tasks::Task &task, const EvaluatorSettings &settings,
                 const util::TempDir &work, const PtxModule *module) {
  StageResult &stage = c.verdict.compile;
  const auto t0 = Clock::now();
  auto ptxas = find_ptxas(settings.ptxas_path);
  if (!ptxas) {
    fail_stage(stage, Status::compile_error,
               settings.ptxas_path.empty()
                   ? "ptxas not found (PATH, /usr/local/cuda/bin): install the CUDA toolkit"
                   : "ptxas not found at " + settings.ptxas_path.string());
    stage.wall_seconds = seconds_since(t0);
    return;
  }
  c.verdict.environment["ptxas"] = ptxas->string();
  util::ProcessLimits limits;
  limits.wall_time = settings.compile.ptxas_wall;
  limits.address_space_bytes = settings.compile.ptxas_address_space_bytes;
  limits.cpu_seconds = static_cast<std::uint64_t>(ms_to_s(settings.compile.ptxas_wall)) + 5;
  auto run = run_ptxas(*ptxas, c.ptx, task.arch, work.path(), limits);
  if (!run) {
    fail_stage(stage, Status::compile_error, "could not run ptxas: " + run.error());
    stage.wall_seconds = seconds_since(t0);
    return;
  }
  stage.figures["ptxas_seconds"] = run->wall_seconds;
  json warnings = json::array();
  for (const auto &w : run->report.warnings) {
    warnings.push_back(w.text);
    if (notable_warning(w.text)) stage.diagnostics.push_back(w);
  }
  stage.figures["warnings"] = warnings;
  const bool from_ptx_block = c.response.language == KernelLanguage::ptx;
  if (!run->ok) {
    stage.status = Status::compile_error;
    for (const auto &e : run->report.errors) {
      Diagnostic d = e;
      if (e.line)
        d.text = fmt::format("ptxas, {}: {}",
                             from_ptx_block ? response_line_note(c.response, *e.line)
                                            : fmt::format("line {} of the NVRTC-generated PTX", *e.line),
                             e.text);
      else
        d.text = "ptxas: " + e.text;
      stage.diagnostics.push_back(std::move(d));
    }
    if (!run->failure.empty()) stage.diagnostics.push_back({"error", run->failure, std::nullopt});
    auto first = std::find_if(stage.diagnostics.begin(), stage.diagnostics.end(),
                              [](const Diagnostic &d) { return d.severity == "error"; });
    stage.summary = first != stage.diagnostics.end() ? first->text : "ptxas failed";
    if (run->report.errors.size() > 1)
      stage.summary += fmt::format(" (and {} more error(s))", run->report.errors.size() - 1);
    stage.wall_seconds = seconds_since(t0);
    return;
  }
  c.cubin = std::move(run->cubin);

  const std::string &entry = c.manifest.entry;
  const PtxasFunctionInfo *info = run->report.find(entry);
  PtxasFunctionInfo none;
  if (!info) info = &none;
  stage.figures["registers"] = info->registers;
  stage.figures["spill_store_bytes"] = info->spill_store_bytes;
  stage.figures["spill_load_bytes"] = info->spill_load_bytes;
  stage.figures["shared_bytes"] = info->shared_bytes;
  stage.figures["stack_bytes"] = info->stack_bytes;
  stage.figures["barriers"] = info->barriers;
  stage.figures["cubin_bytes"] = c.cubin.size();
  if (info->spill_store_bytes > 0 || info->spill_load_bytes > 0)
    stage.diagnostics.push_back(
        {"warning",
         fmt::format("{} bytes spilled to local memory (stores) and {} bytes reloaded: expect "
                     "slow code; reduce live registers",
                     info->spill_store_bytes, info->spill_load_bytes),
         std::nullopt});

  // Launch resources the device would refuse, known now: launch_error (the manifest asks for more than a
  // block may have), reported before any GPU time is spent.
  const std::int64_t smem_limit = detail::max_shared_bytes_per_block(task.arch);
  for (const auto &plan : c.plans) {
    const std::int64_t threads = plan.block[0] * plan.block[1] * plan.block[2];
    const std::int64_t total_smem = info->shared_bytes + plan.shared_bytes;
    if (total_smem > smem_limit) {
      fail_stage(
          stage, Status::launch_error,
          fmt::format(
              "{} bytes of static shared memory + {} bytes dynamic (workload {}) = {} bytes, more than "
              "the {} bytes a block may use on {}",
              info->shared_bytes, plan.shared_bytes, plan.workload, total_smem, smem_limit, task.arch));
      break;
    }
    // Registers are allocated per warp in units of 256 (8 per thread).
    const std::int64_t regs = (info->registers + 7) / 8 * 8;
    const std::int64_t warps = (threads + 31) / 32;
    if (regs * 32 * warps > detail::kRegistersPerSm) {
      fail_stage(
          stage, Status::launch_error,
          fmt::format("{} registers per thread x {} threads needs {} registers, more than the {} a block may "
                      "use: the launch would fail (lower .maxnreg or use fewer threads)",
                      info->registers, threads, regs * 32 * warps, detail::kRegistersPerSm));
      break;
    }
  }

  if (stage.status != Status::compile_error && stage.status != Status::launch_error) {
    stage.status = Status::ok;
    stage.summary =
        fmt::format("{} registers, {} B static smem, {} B stack, spills {}/{} B", info->registers,
                    info->shared_bytes, info->stack_bytes, info->spill_store_bytes, info->spill_load_bytes);
  }

  // SASS listing and target opcode families: started here, finished by finish_sass.
  stage.figures["sass_available"] = false;
  stage.figures["targets_in_sass"] = json::object();
  stage.figures["sass_families"] = json::object();
  auto disassembler = find_disassembler(settings.disassembler_path);
  auto pending = std::make_shared<detail::PendingSass>();
  pending->task = &task;
  // The static stage's answer (figures.targets_in_ptx), not a second search of the module.
  const json &in_ptx = c.verdict.static_checks.figures.value("targets_in_ptx", json::object());
  for (const auto &t : task.targets)
    if (module && in_ptx.value(t.name, false)) pending->targets_in_ptx.push_back(t.name);
  if (!disassembler) {
    pending->listing = std::async(std::launch::deferred, [] {
      return util::Expected<std::string>(
          util::unexpected(std::string("no cuobjdump/nvdisasm: SASS checks skipped")));
    });
  } else {
    c.verdict.environment["disassembler"] = disassembler->path.string();
    util::ProcessLimits dlimits;
    dlimits.wall_time = settings.compile.disassembler_wall;
    dlimits.max_output_bytes = 64u << 20;
    const fs::path cubin = pending->dir.path() / "kernel.cubin";
    if (auto w = util::write_file_atomic(cubin, c.cubin); !w) throw std::runtime_error(w.error());
    pending->listing = std::async(std::launch::async, [dis = *disassembler, cubin, dlimits] {
      auto text = disassemble_cubin(dis, cubin, dlimits);
      if (!text) return util::Expected<std::string>(util::unexpected("SASS listing failed: " + text.error()));
      return text;
    });
  }
  c.pending_sass = std::move(pending);
  stage.wall_seconds = seconds_since(t0);
}

}  // namespace

json EvaluatorSettings::to_json() const {
  return json{{"parse",
               {{"max_response_bytes", parse.max_response_bytes},
                {"max_kernel_bytes", parse.max_kernel_bytes},
                {"max_manifest_bytes", parse.max_manifest_bytes}}},
              {"compile",
               {{"ptxas_wall_seconds", ms_to_s(compile.ptxas_wall)},
                {"ptxas_address_space_bytes", compile.ptxas_address_space_bytes},
                {"nvrtc_wall_seconds", ms_to_s(compile.nvrtc_wall)},
                {"max_ptx_bytes", compile.max_ptx_bytes},
                {"max_ptx_instructions", compile.max_ptx_instructions},
                {"disassembler_wall_seconds", ms_to_s(compile.disassembler_wall)}}},
              {"correctness", correctness},
              {"timing", timing},
              {"worker", worker},
              {"run_gpu", run_gpu},
              {"run_sanitizer", run_sanitizer},
              {"min_target_work_share", min_target_work_share},
              {"min_tma_byte_share", min_tma_byte_share},
              {"device", device},
              {"worker_path", worker_path.string()},
              {"ptxas_path", ptxas_path.string()},
              {"disassembler_path", disassembler_path.string()},
              {"ptxbench_path", ptxbench_path.string()},
              {"lock_dir", lock_dir.string()}};
}

bool CompiledCandidate::ready_for_gpu() const {
  return verdict.parse.status == Status::ok && verdict.static_checks.status == Status::ok &&
         verdict.compile.status == Status::ok && !cubin.empty() && !plans.empty();
}

std::string finish_sass(CompiledCandidate &c) {
  if (!c.pending_sass) return "";
  const std::shared_ptr<detail::PendingSass> pending = std::move(c.pending_sass);
  const tasks::Task &task = *pending->task;
  StageResult &stage = c.verdict.compile;
  const auto t0 = Clock::now();
  util::Expected<std::string> listing_text = pending->listing.get();
  // How long this call blocked on the disassembler (when deferred, on a thread beside the worker).
  stage.figures["sass_wait_seconds"] = seconds_since(t0);
  if (!listing_text) {
    stage.diagnostics.push_back({"note", listing_text.error(), std::nullopt});
  } else {
    c.sass = std::move(*listing_text);
    c.sass_listing = parse_sass_listing(c.sass);
    const SassListing &listing = c.sass_listing;
    stage.figures["sass_available"] = true;
    stage.figures["sass_instruction_count"] = listing.instructions.size();
    stage.figures["targets_in_sass"] = targets_in_sass(listing, task.targets);
    json families = json::object();
    for (const auto &[family, count] : listing.family_counts()) families[family] = count;
    stage.figures["sass_families"] = families;
    for (const auto &t : task.targets) {
      const bool in_ptx = std::find(pending->targets_in_ptx.begin(), pending->targets_in_ptx.end(), t.name) !=
                          pending->targets_in_ptx.end();
      if (in_ptx && !stage.figures["targets_in_sass"][t.name].get<bool>())
        stage.diagnostics.push_back(
            {"warning",
             fmt::format(
                 "target {}: `{}` is in the PTX but no {} instruction is in the SASS (dead code removed?)",
                 t.name, t.ptx_mnemonic, fmt::join(t.sass_families, "/")),
             std::nullopt});
    }
  }
  if (stage.status == Status::ok) {
    std::vector<std::string> present;
    for (const auto &t : task.targets)
      if (stage.figures["targets_in_sass"].value(t.name, false)) present.push_back(t.name);
    stage.summary +=
        fmt::format("; SASS: {}", stage.figures["sass_available"].get<bool>()
                                      ? (present.empty() ? std::string("no target families")
                                                         : fmt::format("{}", fmt::join(present, ", ")))
                                      : std::string("not available"));
  }
  return listing_text ? "" : listing_text.error();
}

CompiledCandidate run_cpu_stages(const tasks::Task &task, std::string_view response,
                                 const EvaluatorSettings &settings, bool defer_sass) {
  const auto t_all = Clock::now();
  CompiledCandidate c;
  Verdict &v = c.verdict;
  v.task_id = task.id;
  v.settings = settings.to_json();
  skip_gpu_stages(v, "not run yet");

  // Parse: kernel block + manifest, resolved for every workload.
  auto t0 = Clock::now();
  auto parsed = parse_response(response, settings.parse);
  if (!parsed) {
    fail_stage(v.parse, parsed.error().status, parsed.error().message);
    v.parse.wall_seconds = seconds_since(t0);
    skip_rest(v, &v.parse);
    v.finalize_status();
    v.wall_seconds = seconds_since(t_all);
    return c;
  }
  c.response = std::move(*parsed);
  v.parse.figures["language"] = c.response.language == KernelLanguage::ptx ? "ptx" : "cuda";
  v.parse.figures["kernel_first_line"] = c.response.kernel_first_line;
  v.parse.figures["kernel_blocks_seen"] = c.response.kernel_blocks_seen;
  v.parse.figures["json_blocks_seen"] = c.response.json_blocks_seen;
  v.parse.figures["kernel_bytes"] = c.response.kernel_source.size();
  auto manifest = parse_manifest(c.response.manifest_text, task);
  if (!manifest) {
    fail_stage(v.parse, Status::bad_manifest, "launch manifest: " + manifest.error());
  } else {
    c.manifest = std::move(*manifest);
    for (const auto &w : task.workloads) {
      auto plan = resolve_launch(c.manifest, task, w);
      if (!plan) {
        fail_stage(v.parse, Status::bad_manifest,
                   fmt::format("launch manifest, workload {}: {}", w.name, plan.error()));
        break;
      }
      c.plans.push_back(std::move(*plan));
    }
  }
  if (c.response.kernel_blocks_seen > 1)
    v.parse.diagnostics.push_back(
        {"note",
         fmt::format("{} kernel blocks found; the last one (line {}) was evaluated",
                     c.response.kernel_blocks_seen, c.response.kernel_first_line - 1),
         std::nullopt});
  v.parse.wall_seconds = seconds_since(t0);
  if (v.parse.status == Status::bad_manifest) {
    skip_rest(v, &v.parse);
    v.finalize_status();
    v.wall_seconds = seconds_since(t_all);
    return c;
  }
  v.parse.status = Status::ok;
  v.parse.summary = fmt::format("{} kernel ({} bytes) and manifest for entry {}; {} workload(s) resolved",
                                c.response.language == KernelLanguage::ptx ? "PTX" : "CUDA",
                                c.response.kernel_source.size(), c.manifest.entry, c.plans.size());

  util::TempDir work("ptxbench-eval");

  // CUDA source -> PTX (NVRTC child), reported under compile.
  if (c.response.language == KernelLanguage::cuda) {
    t0 = Clock::now();
    auto exe = find_ptxbench_executable(settings.ptxbench_path);
    util::ProcessLimits limits;
    limits.wall_time = settings.compile.nvrtc_wall;
    limits.cpu_seconds = static_cast<std::uint64_t>(ms_to_s(settings.compile.nvrtc_wall)) + 5;
    limits.max_output_bytes = settings.compile.max_ptx_bytes;
    util::Expected<std::string> ptx =
        exe ? nvrtc_compile_in_child(*exe, c.response.kernel_source, task.arch, work.path(), limits)
            : util::Expected<std::string>(
                  util::unexpected(std::string("the ptxbench executable for the NVRTC child was not found "
                                               "(set EvaluatorSettings::ptxbench_path)")));
    v.compile.figures["nvrtc_seconds"] = seconds_since(t0);
    if (!ptx) {
      fail_stage(v.compile, Status::compile_error, "NVRTC: " + ptx.error());
      v.compile.wall_seconds = seconds_since(t0);
      v.static_checks.status = Status::skipped;
      v.static_checks.summary = "not run: the CUDA source did not compile to PTX";
      skip_gpu_stages(v, "not run: an earlier stage ended with compile_error");
      v.finalize_status();
      v.wall_seconds = seconds_since(t_all);
      return c;
    }
    c.ptx = std::move(*ptx);
  } else {
    c.ptx = c.response.kernel_source;
  }

  // Static checks.
  t0 = Clock::now();
  PtxModule module;
  bool have_module = false;
  if (c.ptx.size() > settings.compile.max_ptx_bytes) {
    fail_stage(v.static_checks, Status::static_error,
               fmt::format("the PTX is {} bytes, more than the limit of {}", c.ptx.size(),
                           settings.compile.max_ptx_bytes));
  } else if (auto parsed_ptx = parse_ptx(c.ptx); !parsed_ptx) {
    fail_stage(v.static_checks, Status::static_error, "PTX syntax: " + parsed_ptx.error().text(),
               parsed_ptx.error().line);
  } else {
    module = std::move(*parsed_ptx);
    have_module = true;
    v.kernel_hash = module.normalized_hash;
    v.static_checks =
        run_static_checks(module, c.manifest, task, c.plans, settings.compile.max_ptx_instructions);
  }
  if (v.kernel_hash.empty()) v.kernel_hash = util::fnv1a64_hex(c.ptx);
  v.static_checks.wall_seconds = seconds_since(t0);
  if (v.static_checks.status != Status::ok) {
    skip_rest(v, &v.static_checks);
    v.finalize_status();
    v.wall_seconds = seconds_since(t_all);
    return c;
  }

  run_compile(c, task, settings, work, have_module ? &module : nullptr);
  if (!defer_sass || v.compile.status != Status::ok) {
    const auto t_sass = Clock::now();
    finish_sass(c);
    v.compile.wall_seconds += seconds_since(t_sass);  // not overlapped with anything: the stage's time
  }
  if (v.compile.status != Status::ok)
    skip_rest(v, &v.compile);
  else
    skip_gpu_stages(v, "not run yet");
  v.finalize_status();
  v.wall_seconds = seconds_since(t_all);
  return c;
}

Verdict evaluate(const tasks::Task &task, std::string_view response, const EvaluatorSettings &settings) {
  const auto t0 = Clock::now();
  // The SASS listing is made while the worker runs (run_gpu_stages hands it over when it is done).
  CompiledCandidate c = run_cpu_stages(task, response, settings, /*defer_sass=*/true);
  if (c.ready_for_gpu()) {
    if (settings.run_gpu) {
      run_gpu_stages(c, task, settings);
    } else {
      skip_gpu_stages(c.verdict, "disabled by --no-gpu");
    }
  }
  finish_sass(c);
  c.verdict.finalize_status();
  c.verdict.wall_seconds = seconds_since(t0);
  return std::move(c.verdict);
}

}  // namespace ptxbench::evaluator
