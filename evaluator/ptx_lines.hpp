// Line info for model-written PTX. Such PTX has no `.loc` directives, so
// `ptxas -lineinfo` alone maps nothing; this rewrite adds one `.file` and a
// `.loc` per source line holding instructions, naming the line of the text
// the model wrote, so tools that print source locations (compute-sanitizer,
// nvdisasm --print-line-info) point at lines the model can see.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "util/expected.hpp"

namespace ptxbench::evaluator {

/// Bytes the rewrite may add beyond doubling its input (the .file line and short modules).
inline constexpr std::size_t kPtxLineInfoSlackBytes = 4096;

struct PtxLineAnnotation {
  std::string ptx;             ///< the annotated module
  int loc_directives = 0;      ///< `.loc` lines added: one per source line that holds instructions
  int dropped_directives = 0;  ///< `.file` / `.loc` directives, `.section` blocks and `, debug` removed
};

/// Rewrites a PTX module for line info: drops any `.file` / `.loc` directives,
/// debug `.section` blocks and the `.target` option `debug` (ptxas demands DWARF
/// sections with it), adds `.file 1 "<file_name>"` after the header
/// directives and `.loc 1 <L> 1` before the first instruction of each source
/// line L (L = the line in `ptx` itself). Labels, braces, declarations and
/// comments are kept. Instructions are found with the PTX lexer/parser
/// (evaluator/ptx.hpp). Error (a sentence) when the module does not parse, when
/// `file_name` cannot be a PTX string, or when the result would be larger than
/// 2 x ptx.size() + kPtxLineInfoSlackBytes.
util::Expected<PtxLineAnnotation, std::string> annotate_ptx_line_info(
    std::string_view ptx, std::string_view file_name = "kernel.ptx");

}  // namespace ptxbench::evaluator
