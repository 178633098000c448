// Compiling a candidate: NVRTC (```cuda blocks, in the ptxbench-nvrtc child) and ptxas
// (`-arch=<arch> -v -lineinfo`, in a child process), with the resource usage
// and the warnings that matter parsed from ptxas's report.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "evaluator/verdict.hpp"
#include "util/expected.hpp"
#include "util/subprocess.hpp"

namespace ptxbench::evaluator {

/// Resource usage of one function as `ptxas -v` reports it.
struct PtxasFunctionInfo {
  std::string name;
  int registers = 0;
  int barriers = 0;
  int spill_store_bytes = 0;  ///< bytes
  int spill_load_bytes = 0;   ///< bytes
  int shared_bytes = 0;       ///< static shared memory, bytes
  int stack_bytes = 0;        ///< stack frame, bytes
  int constant_bytes = 0;     ///< cmem[0] (parameters), bytes
};

/// What ptxas printed, parsed.
struct PtxasReport {
  std::vector<PtxasFunctionInfo> functions;
  std::vector<Diagnostic> errors;  ///< "error" lines; line = the PTX line when ptxas names one
  std::vector<Diagnostic>
      warnings;  ///< warnings and performance notes (wgmma serialized, setmaxnreg ignored)
  const PtxasFunctionInfo *find(std::string_view name) const;
};

/// Parses ptxas's stderr (`-v` output, errors, warnings).
PtxasReport parse_ptxas_output(std::string_view text);

/// ptxas: explicit path, else PATH, else /usr/local/cuda/bin. nullopt = not found.
std::optional<std::filesystem::path> find_ptxas(const std::filesystem::path &explicit_path = {});

struct PtxasRun {
  bool ok = false;
  std::string cubin;  ///< bytes, when ok
  PtxasReport report;
  std::string failure;  ///< one sentence when !ok and no ptxas error line explains it (timeout, crash)
  double wall_seconds = 0;
};

/// Runs ptxas on `ptx` in `work_dir` (kernel.ptx -> kernel.cubin). Error only when
/// ptxas cannot be started at all; a failed compile is a PtxasRun with ok = false.
util::Expected<PtxasRun> run_ptxas(const std::filesystem::path &ptxas, const std::string &ptx,
                                   const std::string &arch, const std::filesystem::path &work_dir,
                                   const util::ProcessLimits &limits);

/// The cubin the sanitizer rerun uses: the candidate's PTX with line info.
struct LineInfoCubin {
  std::filesystem::path cubin;  ///< <work_dir>/kernel.cubin
  std::filesystem::path ptx;    ///< <work_dir>/kernel.ptx, the annotated module ptxas compiled
  int loc_directives = 0;       ///< `.loc` lines added
  double ptxas_seconds = 0;     ///< wall time of the ptxas run
};

/// Annotates `ptx` so each instruction carries its own line in `ptx` (evaluator/ptx_lines.hpp,
/// file "kernel.ptx") and compiles it with run_ptxas (same options, limits and scrubbed
/// environment) in `work_dir`. Error (a sentence) when the annotation or the compile fails.
util::Expected<LineInfoCubin> compile_ptx_with_line_info(const std::filesystem::path &ptxas,
                                                         const std::string &ptx, const std::string &arch,
                                                         const std::filesystem::path &work_dir,
                                                         const util::ProcessLimits &limits);

/// Compiles CUDA device code to PTX in the `ptxbench-nvrtc --arch <arch>` child (evaluator/nvrtc/:
/// source on stdin, PTX on stdout) with a scrubbed environment and `limits` (time, CPU, address space,
/// output), so that a crashing, hanging or memory-hungry compile never takes the evaluator down and a
/// huge PTX is cut off. Error = the compiler log or why the child failed.
util::Expected<std::string> nvrtc_compile_in_child(const std::filesystem::path &nvrtc_child,
                                                   const std::string &source, const std::string &arch,
                                                   const std::filesystem::path &work_dir,
                                                   const util::ProcessLimits &limits);

}  // namespace ptxbench::evaluator
