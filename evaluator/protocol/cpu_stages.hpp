// The CPU stages' figures: parse (the response's kernel block and the device symbols the manifest
// resolved with), static (the PTX module) and compile (ptxas's report and the SASS listing). One codec
// each: the evaluator's stages (evaluator/detail/cpu_stages.cpp, static_checks.cpp, compile_stage.cpp)
// fill the struct and write it as the stage's figures, and every reader (the feedback, `ptxbench show`,
// bench_eval) decodes it with `*_figures_from_figures` / `Verdict::parse_figures()` and its siblings.
//
// parse: {language "ptx"|"cuda", kernel_first_line, kernel_blocks_seen, json_blocks_seen, kernel_bytes,
//   num_sms|null, num_sms_source[, workspace_bytes {workload: bytes}]}
// static: {entry, ptx_version, ptx_target, instruction_count, entries [..], targets_in_ptx {target: bool},
//   module_globals [..], module_globals_written [..]}
// compile: {[nvrtc_seconds,] [ptxas_seconds, warnings [..],] [registers, spill_store_bytes, spill_load_bytes,
//   shared_bytes, stack_bytes, barriers, cubin_bytes,] [sass_available, targets_in_sass {target: bool},
//   sass_families {family: count},] [sass_instruction_count,] [sass_wait_seconds]}: each bracketed group is
//   written once the step that makes it ran (a compile that failed early has fewer keys).
//
// A field an older record lacks reads as its default (optional ones as none); a key the codec does not
// know is refused, and errors name the field ("kernel_bytes").
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "evaluator/protocol/detail/equality.hpp"

namespace ptxbench::protocol {

struct ParseFigures {
  std::string language;            ///< "ptx" or "cuda": the kernel block's language
  int kernel_first_line = 0;       ///< response line (1-based) of the evaluated kernel block's first line
  int kernel_blocks_seen = 0;      ///< kernel blocks in the response (the last one is evaluated) (count)
  int json_blocks_seen = 0;        ///< JSON blocks in the response (count)
  std::uint64_t kernel_bytes = 0;  ///< bytes of the kernel block
  /// the SM count the manifest's `num_sms` resolved to; none (null) when unknown, and in older records
  std::optional<std::int64_t> num_sms;
  std::string num_sms_source;  ///< where num_sms came from ("" in records before it)
  /// bytes per workload, when the manifest declares a workspace (absent otherwise)
  std::optional<std::map<std::string, std::int64_t>> workspace_bytes;
  PTXBENCH_PROTOCOL_EQUALITY(ParseFigures)
};

struct StaticFigures {
  std::string entry;                           ///< the manifest's entry
  std::string ptx_version;                     ///< the module's .version ("" when missing)
  std::string ptx_target;                      ///< the module's first .target operand ("" when missing)
  std::uint64_t instruction_count = 0;         ///< instructions in the module (count)
  std::vector<std::string> entries;            ///< the module's .entry names
  std::map<std::string, bool> targets_in_ptx;  ///< target name -> its mnemonic is in the PTX
  std::vector<std::string> module_globals;     ///< module-scope .global variables
  /// those a kernel can write (the only ones warned about); none in records before it
  std::optional<std::vector<std::string>> module_globals_written;
  PTXBENCH_PROTOCOL_EQUALITY(StaticFigures)

  /// The module variables that keep state between launches: the written ones, or every .global in
  /// records made before that was known.
  const std::vector<std::string> &stateful_globals() const {
    return module_globals_written ? *module_globals_written : module_globals;
  }
  /// Whether the target's mnemonic is in the PTX; none when the stage did not say.
  std::optional<bool> target_in_ptx(const std::string &target) const;
};

/// Absent keys are steps that did not run (none), never zeros.
struct CompileFigures {
  std::optional<double> nvrtc_seconds;               ///< s: the NVRTC child (CUDA answers only)
  std::optional<double> ptxas_seconds;               ///< s: ptxas's wall time, once it ran
  std::optional<std::vector<std::string>> warnings;  ///< ptxas's warnings, once it ran
  // ptxas's report of the entry, once it compiled:
  std::optional<std::int64_t> registers;          ///< per thread (count)
  std::optional<std::int64_t> spill_store_bytes;  ///< bytes
  std::optional<std::int64_t> spill_load_bytes;   ///< bytes
  std::optional<std::int64_t> shared_bytes;       ///< static shared memory, bytes
  std::optional<std::int64_t> stack_bytes;        ///< bytes
  std::optional<std::int64_t> barriers;           ///< named barriers (count)
  std::optional<std::uint64_t> cubin_bytes;       ///< bytes
  // The SASS listing (false and empty until it is finished):
  std::optional<bool> sass_available;
  std::optional<std::map<std::string, bool>> targets_in_sass;  ///< target name -> a family is in the SASS
  std::optional<std::map<std::string, std::uint64_t>> sass_families;  ///< family -> static count
  std::optional<std::uint64_t> sass_instruction_count;                ///< count, when listed
  std::optional<double> sass_wait_seconds;  ///< s the listing's end blocked on the disassembler
  PTXBENCH_PROTOCOL_EQUALITY(CompileFigures)

  /// Whether some family of the target is in the SASS; none when the listing did not say.
  std::optional<bool> target_in_sass(const std::string &target) const;
};

void to_json(nlohmann::json &j, const ParseFigures &f);
/// Throws ProtocolError naming the field on figures not of that form.
void from_json(const nlohmann::json &j, ParseFigures &f);
void to_json(nlohmann::json &j, const StaticFigures &f);
void from_json(const nlohmann::json &j, StaticFigures &f);
/// Writes only the keys that hold something (none is never written as null).
void to_json(nlohmann::json &j, const CompileFigures &f);
void from_json(const nlohmann::json &j, CompileFigures &f);

/// A stage's figures; nullopt when the stage wrote none (it failed before, or was skipped). Throws
/// ProtocolError naming the field when they are malformed.
std::optional<ParseFigures> parse_figures_from_figures(const nlohmann::json &figures);
std::optional<StaticFigures> static_figures_from_figures(const nlohmann::json &figures);
std::optional<CompileFigures> compile_figures_from_figures(const nlohmann::json &figures);

}  // namespace ptxbench::protocol
