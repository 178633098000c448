#include "evaluator/compile.hpp"

#include <nvrtc.h>
#include <unistd.h>

#include <csignal>

#include <cctype>
#include <cstdlib>
#include <system_error>

#include <fmt/core.h>

#include "evaluator/detail/cuda_headers.hpp"
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

util::Expected<std::string> nvrtc_compile_in_process(const std::string &source, const std::string &arch) {
  // The stand-in standard headers and the prelude (evaluator/detail/cuda_headers.hpp) are handed to NVRTC
  // in memory; the toolkit's own headers come from its include folders.
  const auto &shims = detail::nvrtc_shim_headers();
  std::vector<const char *> header_sources, header_names;
  for (const auto &[name, text] : shims) {
    header_names.push_back(name.c_str());
    header_sources.push_back(text.c_str());
  }
  nvrtcProgram program = nullptr;
  nvrtcResult rc = nvrtcCreateProgram(&program, source.c_str(), "kernel.cu", static_cast<int>(shims.size()),
                                      header_sources.data(), header_names.data());
  if (rc != NVRTC_SUCCESS)
    return util::unexpected(std::string("nvrtcCreateProgram: ") + nvrtcGetErrorString(rc));
  // compute_90a: PTX for the arch-specific feature set (wgmma, setmaxnreg need it).
  std::string arch_option = "--gpu-architecture=compute_" + (arch.starts_with("sm_") ? arch.substr(3) : arch);
  std::vector<std::string> options{arch_option, "--std=c++17", "-default-device", "-lineinfo",
                                   "--pre-include=" + std::string(detail::kPreludeName)};
  const auto include_dirs = detail::find_cuda_include_dirs();
  if (!include_dirs) {
    nvrtcDestroyProgram(&program);
    return util::unexpected(std::string(
        "the CUDA toolkit's headers were not found (CUDA_PATH, CUDA_HOME, nvcc on PATH, the NVRTC library's "
        "folder): NVRTC cannot compile CUDA candidates"));
  }
  for (const auto &dir : include_dirs->dirs) options.push_back("-I" + dir.string());
  std::vector<const char *> option_ptrs;
  for (const auto &o : options) option_ptrs.push_back(o.c_str());
  rc = nvrtcCompileProgram(program, static_cast<int>(option_ptrs.size()), option_ptrs.data());
  std::size_t log_size = 0;
  std::string log;
  if (nvrtcGetProgramLogSize(program, &log_size) == NVRTC_SUCCESS && log_size > 1) {
    log.resize(log_size);
    if (nvrtcGetProgramLog(program, log.data()) != NVRTC_SUCCESS) log.clear();
    while (!log.empty() && (log.back() == '\0' || log.back() == '\n')) log.pop_back();
  }
  if (rc != NVRTC_SUCCESS) {
    nvrtcDestroyProgram(&program);
    if (std::string hint = detail::host_code_hint(log); !hint.empty()) log = hint + "\n" + log;
    return util::unexpected(log.empty() ? std::string(nvrtcGetErrorString(rc)) : log);
  }
  std::size_t ptx_size = 0;
  std::string ptx;
  rc = nvrtcGetPTXSize(program, &ptx_size);
  if (rc == NVRTC_SUCCESS) {
    ptx.resize(ptx_size);
    rc = nvrtcGetPTX(program, ptx.data());
  }
  nvrtcDestroyProgram(&program);
  if (rc != NVRTC_SUCCESS) return util::unexpected(std::string("nvrtcGetPTX: ") + nvrtcGetErrorString(rc));
  while (!ptx.empty() && ptx.back() == '\0') ptx.pop_back();
  return ptx;
}

util::Expected<std::string> nvrtc_compile_in_child(const fs::path &ptxbench_executable,
                                                   const std::string &source, const std::string &arch,
                                                   const fs::path &work_dir,
                                                   const util::ProcessLimits &limits) {
  util::ProcessSpec spec;
  spec.argv = {ptxbench_executable.string(), "internal", "nvrtc", "--arch", arch};
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
      return util::unexpected(std::string("the PTX NVRTC produced is too large"));
    return std::move(result->stdout_text);
  }
  std::string log = std::string(trim(result->stderr_text));
  if (result->signaled)
    return util::unexpected("the NVRTC child was " + result->describe() + (log.empty() ? "" : ": " + log));
  return util::unexpected(log.empty() ? "NVRTC failed (" + result->describe() + ")" : log);
}

std::optional<fs::path> find_ptxbench_executable(const fs::path &explicit_path) {
  if (!explicit_path.empty()) return executable(explicit_path) ? std::optional(explicit_path) : std::nullopt;
  const fs::path self = util::own_executable();
  if (self.empty()) return std::nullopt;
  if (self.filename() == "ptxbench") return self;
  for (const fs::path &candidate :
       {self.parent_path() / "ptxbench", self.parent_path().parent_path() / "apps" / "ptxbench"})
    if (executable(candidate)) return candidate;
  return std::nullopt;
}

}  // namespace ptxbench::evaluator
