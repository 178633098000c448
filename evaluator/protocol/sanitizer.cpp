#include "evaluator/protocol/sanitizer.hpp"

#include "evaluator/protocol/fields.hpp"

namespace ptxbench::protocol {

using codec::Bounds;
using nlohmann::json;

template <class IO>
void fields(IO &io, SanitizerFigures &f) {
  io("tool", f.tool);
  io("exit", f.exit);
  io("reports", f.reports);
  io("workload", f.workload);
  io("line_info", f.line_info);
  io("line_info_file", f.line_info_file);
  io("line_info_error", f.line_info_error);
  io("line_info_ptxas_seconds", f.line_info_ptxas_seconds, Bounds{0});
  io("line_info_sass_error", f.line_info_sass_error);
}

void to_json(json &j, const SanitizerFigures &f) {
  j = codec::plain_json(f);
  codec::erase_nulls(j);
}

void from_json(const json &j, SanitizerFigures &f) {
  codec::read_plain(j, f);
}

std::optional<SanitizerFigures> sanitizer_figures_from_figures(const json &figures) {
  return codec::figures_record<SanitizerFigures>(figures);
}

}  // namespace ptxbench::protocol
