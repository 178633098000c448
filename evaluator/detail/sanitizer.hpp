// compute-sanitizer's text reports -> diagnostics a model can act on: each
// report's first lines, the SASS instruction its function+offset names, and,
// when the cubin carries line info, the kernel source line and its text.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "evaluator/protocol/result.hpp"

namespace ptxbench::evaluator {
struct SassListing;
}  // namespace ptxbench::evaluator

namespace ptxbench::evaluator::detail {

/// The source the sanitized cubin's line info names.
struct SanitizerSource {
  std::string
      file_name;  ///< as in the .file directive ("kernel.ptx"); a location matches on its last path part
  std::string_view text;      ///< that file's text; its lines are quoted in diagnostics
  std::string label = "PTX";  ///< how messages name a line: "PTX line 57" / "CUDA line 12"
};

/// One device code location as a report prints it.
struct SanitizerFrame {
  std::string function;      ///< as printed, e.g. "gemm_bf16" or "void k<int>(int *)"
  std::uint32_t offset = 0;  ///< byte offset in the function (the SASS PC)
  std::string file;          ///< source file of the line info ("" without line info)
  int line = 0;              ///< 1-based source line (0 without line info)
  std::string lead;          ///< text before " at " ("and Read access"); "" for "at ..." and device frames
  bool caller = false;       ///< a "Device Frame:" line: a function up the device call stack
  std::string rest;          ///< text after it ("[4 hazards]")
};

/// The location in one report line: "at f+0x1f0 in kernel.ptx:57", "Device Frame: f+0x30 in /p/k.ptx:9",
/// "... Write access at f+0x1b0 in k.ptx:12", the older "at 0x1f0 in /p/k.cu:57:f(int)" or one without
/// line info ("at f+0x1f0"). nullopt when the line names no device location.
std::optional<SanitizerFrame> parse_sanitizer_frame(std::string_view text);

/// The first `max_reports` reports of compute-sanitizer's output (memcheck, racecheck,
/// initcheck, synccheck text format), each one diagnostic. Host backtraces are dropped.
/// With `source`, a location in that file sets Diagnostic::line (the first such location of
/// the report) and appends "at PTX line N: <the line's text>".
std::vector<protocol::Diagnostic> sanitizer_reports(std::string_view output, const SassListing &listing,
                                                    int max_reports, const SanitizerSource *source = nullptr);

}  // namespace ptxbench::evaluator::detail
