// SASS listings: parsing `cuobjdump -sass` / `nvdisasm` output into
// per-function instructions, finding a disassembler, and running it on a cubin.
// The GPU stage joins these instructions (by function and byte offset) with the
// per-PC counts CUPTI reports, so the offsets must be exact.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "evaluator/protocol/job.hpp"
#include "tasks/task.hpp"
#include "util/expected.hpp"
#include "util/subprocess.hpp"

namespace ptxbench::evaluator {

/// One instruction of the listing, as the job hands it to the worker (evaluator/protocol/job.hpp).
using protocol::SassInstruction;

/// A source line the cubin's line info names for an instruction.
struct SassSourceLine {
  std::string file;  ///< as the line table names it: "kernel.cu", or ".nv_debug_ptx_txt" for the PTX input
  int line = 0;      ///< 1-based
};

struct SassListing {
  std::string arch;  ///< e.g. "sm_90a" (from "code for ..." or ".target"); "" when absent
  std::vector<SassInstruction> instructions;  ///< in listing order (function by function, ascending offset)
  /// (function, offset) -> source line, when the listing was made with line info (SassLineInfo)
  std::map<std::pair<std::string, std::uint32_t>, SassSourceLine> source_lines;

  /// Function names in listing order, each once.
  std::vector<std::string> functions() const;
  /// Static count of instructions per opcode family (all functions).
  std::map<std::string, int> family_counts() const;
  /// The instruction of `function` at byte `offset`, if any.
  const SassInstruction *find(std::string_view function, std::uint32_t offset) const;
};

using protocol::sass_family;

/// Parses either disassembler's text format. Lines that are not instructions
/// (headers, encodings, labels, directives) are skipped.
SassListing parse_sass_listing(std::string_view text);

/// For each task target: is any of its SASS families present in the listing?
/// {"wgmma": true, "tma_load": false}
nlohmann::json targets_in_sass(const SassListing &listing,
                               const std::vector<tasks::TargetInstruction> &targets);

enum class DisassemblerKind { cuobjdump, nvdisasm };

struct Disassembler {
  DisassemblerKind kind = DisassemblerKind::nvdisasm;
  std::filesystem::path path;  ///< absolute path of the executable
  /// cuobjdump -sass calls nvdisasm; this is the folder holding it ("" = cuobjdump's own folder).
  std::filesystem::path nvdisasm_dir;
};

/// Finds a disassembler, in order: `explicit_path` (if not empty), $PTXBENCH_CUOBJDUMP,
/// PATH, /usr/local/cuda/bin, and the `nvidia-cuda-nvdisasm` / `nvidia-cuda-cuobjdump`
/// pip wheels (site-packages/nvidia/cu13/bin). nvdisasm is preferred where a
/// folder has both (cuobjdump -sass needs nvdisasm anyway). nullopt = none usable.
std::optional<Disassembler> find_disassembler(const std::filesystem::path &explicit_path = {});

/// Which line info nvdisasm prints before the instructions it covers ("//## File ..., line N"):
/// none; the source lines of the .debug_line table (CUDA compiled with -lineinfo); or the lines of the PTX
/// ptxas read (its .nv_debug_line_sass table, which ptxas -lineinfo writes even for PTX without .loc).
/// cuobjdump prints none.
enum class SassLineInfo { none, source, ptx };

/// Runs the disassembler on a cubin file and returns the listing text. Error
/// (a sentence) when it cannot start, fails, or passes the limits.
util::Expected<std::string> disassemble_cubin(const Disassembler &disassembler,
                                              const std::filesystem::path &cubin,
                                              const util::ProcessLimits &limits,
                                              SassLineInfo line_info = SassLineInfo::none);

}  // namespace ptxbench::evaluator
