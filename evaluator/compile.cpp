#include "evaluator/compile.hpp"

#include <unistd.h>

#include <csignal>

#include <cctype>
#include <cstdlib>
#include <system_error>

#include <fmt/core.h>

#include "evaluator/ptx_lines.hpp"
#include "util/files.hpp"

#include "util/strings.hpp"

namespace ptxbench::evaluator {
namespace fs = std::filesystem;

namespace {

using util::trim;

// The integer right before `unit` in `line` ("58 registers" -> 58); nullopt when absent.
std::optional<int> number_before(std::string_view line, std::string_view unit) {
  std::size_t pos = line.find(unit);
  if (pos == std::string_view::npos || pos == 0) return std::nullopt;
  std::size_t end = pos;
  while (end > 0 && line[end - 1] == ' ') --end;
  std::size_t start = end;
  while (start > 0 && std::isdigit(static_cast<unsigned char>(line[start - 1]))) --start;
  if (start == end) return std::nullopt;
  return std::atoi(std::string(line.substr(start, end - start)).c_str());
}

// "'name'" -> name, or the rest of the line after `key`.
std::string quoted_or_rest(std::string_view line, std::string_view key) {
  std::string_view rest = trim(line.substr(line.find(key) + key.size()));
  if (!rest.empty() && rest.front() == '\'') {
    std::size_t close = rest.find('\'', 1);
    return std::string(rest.substr(1, close == std::string_view::npos ? std::string_view::npos : close - 1));
  }
  return std::string(rest.substr(0, rest.find_first_of(" \t")));
}

bool executable(const fs::path &p) {
  std::error_code ec;
  return fs::is_regular_file(p, ec) && ::access(p.c_str(), X_OK) == 0;
}

}  // namespace

const PtxasFunctionInfo *PtxasReport::find(std::string_view name) const {
  for (const auto &f : functions)
    if (f.name == name) return &f;
  return nullptr;
}

PtxasReport parse_ptxas_output(std::string_view text) {
  PtxasReport report;
  PtxasFunctionInfo *current = nullptr;
  auto function_named = [&](const std::string &name) {
    for (auto &f : report.functions)
      if (f.name == name) return &f;
    report.functions.push_back(PtxasFunctionInfo{name});
    return &report.functions.back();
  };
  std::size_t pos = 0;
  while (pos < text.size()) {
    std::size_t nl = text.find('\n', pos);
    std::string_view line =
        trim(text.substr(pos, nl == std::string_view::npos ? std::string_view::npos : nl - pos));
    pos = nl == std::string_view::npos ? text.size() : nl + 1;
    if (line.empty()) continue;

    if (line.find("Compiling entry function") != std::string_view::npos) {
      current = function_named(quoted_or_rest(line, "Compiling entry function"));
      continue;
    }
    if (line.find("Function properties for") != std::string_view::npos) {
      current = function_named(quoted_or_rest(line, "Function properties for"));
      continue;
    }
    if (current && line.find("bytes stack frame") != std::string_view::npos) {
      current->stack_bytes = number_before(line, "bytes stack frame").value_or(0);
      current->spill_store_bytes = number_before(line, "bytes spill stores").value_or(0);
      current->spill_load_bytes = number_before(line, "bytes spill loads").value_or(0);
      continue;
    }
    if (current && line.find("Used ") != std::string_view::npos &&
        line.find("registers") != std::string_view::npos) {
      current->registers = number_before(line, "registers").value_or(0);
      current->barriers = number_before(line, "barriers").value_or(0);
      current->shared_bytes = number_before(line, "bytes smem").value_or(0);
      current->constant_bytes = number_before(line, "bytes cmem[0]").value_or(0);
      continue;
    }
    // "ptxas kernel.ptx, line 37; error   : Unknown modifier '.bar'"
    std::optional<int> line_no;
    if (auto l = line.find(", line "); l != std::string_view::npos && line.starts_with("ptxas"))
      line_no = std::atoi(std::string(line.substr(l + 7, 12)).c_str());
    std::size_t colon = line.find(" : ");
    std::string message =
        colon == std::string_view::npos ? std::string(line) : std::string(trim(line.substr(colon + 3)));
    std::string_view head = colon == std::string_view::npos ? line : line.substr(0, colon);
    if (head.find("error") != std::string_view::npos) {
      report.errors.push_back({"error", message, line_no});
    } else if (head.find("fatal") != std::string_view::npos) {
      // "Ptx assembly aborted due to errors" only repeats what the error lines said.
      if (report.errors.empty() || message.find("aborted due to errors") == std::string::npos)
        report.errors.push_back({"error", message, line_no});
    } else if (head.find("warning") != std::string_view::npos) {
      report.warnings.push_back({"warning", message, line_no});
    } else if (message.find("Performance Loss") != std::string::npos ||
               message.find("serialized") != std::string::npos) {
      report.warnings.push_back(
          {"warning", message, line_no});  // e.g. C7515 wgmma serialization (an info line)
    }
  }
  return report;
}

std::optional<fs::path> find_ptxas(const fs::path &explicit_path) {
  if (!explicit_path.empty()) return executable(explicit_path) ? std::optional(explicit_path) : std::nullopt;
  if (auto p = util::find_program("ptxas")) return fs::path(*p);
  if (executable("/usr/local/cuda/bin/ptxas")) return fs::path("/usr/local/cuda/bin/ptxas");
  return std::nullopt;
}

util::Expected<PtxasRun> run_ptxas(const fs::path &ptxas, const std::string &ptx, const std::string &arch,
                                   const fs::path &work_dir, const util::ProcessLimits &limits) {
  const fs::path input = work_dir / "kernel.ptx";
  const fs::path output = work_dir / "kernel.cubin";
  if (auto w = util::write_file_atomic(input, ptx); !w) return util::unexpected(w.error());
  util::ProcessSpec spec;
  spec.argv = {ptxas.string(),     "-arch=" + arch, "-v", "-lineinfo",   "-warn-spills",
               "-warn-lmem-usage", "kernel.ptx",    "-o", "kernel.cubin"};
  spec.env = util::scrubbed_environment(work_dir.string());
  spec.working_directory = work_dir.string();
  spec.limits = limits;
  auto result = util::run_process(spec);
  if (!result) return util::unexpected(result.error());

  PtxasRun run;
  run.wall_seconds = result->wall_seconds;
  run.report = parse_ptxas_output(result->stderr_text + "\n" + result->stdout_text);
  if (result->timed_out) {
    run.failure = fmt::format(
        "ptxas took longer than {:.1f} s and was stopped; simplify the kernel (e.g. less full unrolling)",
        std::chrono::duration<double>(limits.wall_time).count());
    return run;
  }
  if (result->signaled) {
    bool memory = limits.address_space_bytes > 0 &&
                  (result->stderr_text.find("memory") != std::string::npos || result->signal == SIGABRT ||
                   result->signal == SIGSEGV || result->signal == SIGKILL);
    run.failure =
        fmt::format("ptxas was {}{}", result->describe(),
                    memory ? fmt::format(" (it may have run out of its {:.1f} GiB memory limit)",
                                         static_cast<double>(limits.address_space_bytes) / (1u << 30))
                           : "");
    return run;
  }
  if (result->exit_code != 0) {
    if (run.report.errors.empty()) {
      std::string text = std::string(trim(result->stderr_text)).substr(0, 2000);
      run.failure = fmt::format("ptxas failed ({}){}", result->describe(), text.empty() ? "" : ": " + text);
    }
    return run;
  }
  auto cubin = util::read_file(output, 256u << 20);
  if (!cubin) {
    run.failure = "ptxas reported success but wrote no cubin: " + cubin.error();
    return run;
  }
  run.cubin = std::move(*cubin);
  run.ok = true;
  return run;
}

util::Expected<LineInfoCubin> compile_ptx_with_line_info(const fs::path &ptxas, const std::string &ptx,
                                                         const std::string &arch, const fs::path &work_dir,
                                                         const util::ProcessLimits &limits) {
  auto annotated = annotate_ptx_line_info(ptx, "kernel.ptx");
  if (!annotated) return util::unexpected("adding line info failed: " + annotated.error());
  std::error_code ec;
  fs::create_directories(work_dir, ec);
  if (ec) return util::unexpected("cannot create " + work_dir.string() + ": " + ec.message());
  auto run = run_ptxas(ptxas, annotated->ptx, arch, work_dir, limits);
  if (!run) return util::unexpected("could not run ptxas: " + run.error());
  if (!run->ok) {
    std::string why = run->failure;
    if (why.empty() && !run->report.errors.empty()) {
      const Diagnostic &e = run->report.errors.front();
      why = e.line ? fmt::format("ptxas, line {} of the annotated PTX: {}", *e.line, e.text)
                   : "ptxas: " + e.text;
    }
    return util::unexpected("the PTX with line info did not compile: " +
                            (why.empty() ? "ptxas failed" : why));
  }
  return LineInfoCubin{work_dir / "kernel.cubin", work_dir / "kernel.ptx", annotated->loc_directives,
                       run->wall_seconds};
}

util::Expected<std::string> nvrtc_compile_in_child(const fs::path &nvrtc_child, const std::string &source,
                                                   const std::string &arch, const fs::path &work_dir,
                                                   const util::ProcessLimits &limits) {
  util::ProcessSpec spec;
  spec.argv = {nvrtc_child.string(), "--arch", arch};
  spec.env = util::scrubbed_environment(work_dir.string());
  spec.working_directory = work_dir.string();
  spec.stdin_data = source;
  spec.limits = limits;
  auto result = util::run_process(spec);
  if (!result) return util::unexpected("could not start the NVRTC child: " + result.error());
  if (result->timed_out)
    return util::unexpected(fmt::format("NVRTC took longer than {:.1f} s and was stopped",
                                        std::chrono::duration<double>(limits.wall_time).count()));
  if (result->ok()) {
    if (result->stdout_dropped > 0)
      return util::unexpected(
          fmt::format("the PTX NVRTC produced is more than {} bytes (the limit)", limits.max_output_bytes));
    return std::move(result->stdout_text);
  }
  std::string log = std::string(trim(result->stderr_text));
  if (result->signaled)
    return util::unexpected("the NVRTC child was " + result->describe() + (log.empty() ? "" : ": " + log));
  return util::unexpected(log.empty() ? "NVRTC failed (" + result->describe() + ")" : log);
}

}  // namespace ptxbench::evaluator
