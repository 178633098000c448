// The sanitizer stage's figures: compute-sanitizer's rerun of one trial of the smallest workload, and
// whether its reports could name the model's source lines. One codec: the evaluator's sanitizer rerun
// (evaluator/gpu_stage.cpp) fills SanitizerFigures and writes it as the stage's figures; readers decode it
// with `sanitizer_figures_from_figures` / `Verdict::sanitizer_figures()`.
//
// figures: {tool "memcheck"|"racecheck", exit, reports, workload, line_info[, line_info_file]
//   [, line_info_error][, line_info_ptxas_seconds][, line_info_sass_error]}
//
// A field an older record lacks reads as its default (optional ones as none); a key the codec does not
// know is refused, and errors name the field ("reports").
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "evaluator/protocol/detail/equality.hpp"

namespace ptxbench::protocol {

struct SanitizerFigures {
  std::string tool;           ///< the compute-sanitizer tool: memcheck, or racecheck for a race
  std::string exit;           ///< how its run ended ("exit 0", "killed by signal 9", ...)
  std::uint64_t reports = 0;  ///< reports parsed into the stage's diagnostics (count)
  std::string workload;       ///< the workload it ran (the smallest shown one)
  /// the reports name source lines (false: SASS offsets only); none in records before it
  std::optional<bool> line_info;
  std::optional<std::string> line_info_file;        ///< the lines' file: "kernel.ptx" or "kernel.cu"
  std::optional<std::string> line_info_error;       ///< why the reports have no lines
  std::optional<double> line_info_ptxas_seconds;    ///< s: the recompile with a .loc per PTX line
  std::optional<std::string> line_info_sass_error;  ///< why the recompiled cubin has no SASS listing
  PTXBENCH_PROTOCOL_EQUALITY(SanitizerFigures)
};

/// Writes only the keys that hold something (none is never written as null).
void to_json(nlohmann::json &j, const SanitizerFigures &f);
/// Throws ProtocolError naming the field on figures not of that form.
void from_json(const nlohmann::json &j, SanitizerFigures &f);

/// The sanitizer stage's figures; nullopt when it wrote none (skipped, or not run). Throws ProtocolError
/// naming the field when they are malformed.
std::optional<SanitizerFigures> sanitizer_figures_from_figures(const nlohmann::json &figures);

}  // namespace ptxbench::protocol
