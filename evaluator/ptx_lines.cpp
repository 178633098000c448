#include "evaluator/ptx_lines.hpp"

#include <algorithm>
#include <stdexcept>
#include <vector>

#include <fmt/core.h>

#include "evaluator/ptx.hpp"

namespace ptxbench::evaluator {
namespace {

/// Replace source bytes [begin, end) with `text` (begin == end: a pure insertion).
struct Edit {
  std::size_t begin = 0;
  std::size_t end = 0;
  std::string text;
};

bool blank(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return c == ' ' || c == '\t' || c == '\r'; });
}

}  // namespace

util::Expected<PtxLineAnnotation, std::string> annotate_ptx_line_info(std::string_view ptx,
                                                                      std::string_view file_name) {
  if (file_name.empty() || file_name.find_first_of("\"\\\n\r") != std::string_view::npos)
    return util::unexpected(fmt::format("'{}' cannot be named in a PTX .file directive", file_name));
  auto tokens = lex_ptx(ptx);
  if (!tokens) return util::unexpected("the PTX does not parse: " + tokens.error().text());
  const std::vector<PtxToken> &t = *tokens;
  // The parser locates instructions, the header and the debug directives (token indices into t).
  auto module = parse_ptx_tokens(t);
  if (!module) return util::unexpected("the PTX does not parse: " + module.error().text());

  // Byte offset of each line's start; token columns are 1-based byte columns.
  std::vector<std::size_t> line_start{0};
  for (std::size_t k = 0; k < ptx.size(); ++k)
    if (ptx[k] == '\n') line_start.push_back(k + 1);
  auto begin_of = [&](const PtxToken &tok) {
    return line_start[static_cast<std::size_t>(tok.line - 1)] + static_cast<std::size_t>(tok.column - 1);
  };
  auto end_of = [&](const PtxToken &tok) { return begin_of(tok) + tok.text.size(); };

  PtxLineAnnotation out;
  std::vector<Edit> edits;
  const std::string file_directive = fmt::format(".file 1 \"{}\"", file_name);
  if (const auto header_last = module->header_last_token)  // after its last token: never in a comment
    edits.push_back({end_of(t[*header_last]), end_of(t[*header_last]), "\n" + file_directive + "\n"});
  else
    edits.push_back({0, 0, file_directive + "\n"});
  for (const auto *drops : {&module->line_directives, &module->sections, &module->target_debug})
    for (const PtxTokenRange &r : *drops) {
      edits.push_back({begin_of(t[r.first]), end_of(t[r.last]), ""});
      ++out.dropped_directives;
    }
  int previous_line = 0;
  for (const PtxInstruction &inst : module->instructions) {
    const PtxToken &tok = t[inst.first_token];
    if (tok.line == previous_line) continue;  // one .loc covers every instruction of a line
    previous_line = tok.line;
    const std::size_t at = begin_of(tok);
    const std::size_t line_begin = line_start[static_cast<std::size_t>(tok.line - 1)];
    const std::string loc = fmt::format(".loc 1 {} 1", tok.line);
    if (blank(ptx.substr(line_begin, at - line_begin)))
      edits.push_back({line_begin, line_begin, "\t" + loc + "\n"});
    else  // a label or a closing comment precedes it on its line
      edits.push_back({at, at, "\n\t" + loc + "\n\t"});
    ++out.loc_directives;
  }
  std::stable_sort(edits.begin(), edits.end(),
                   [](const Edit &a, const Edit &b) { return a.begin < b.begin; });

  const std::size_t max_bytes = 2 * ptx.size() + kPtxLineInfoSlackBytes;
  std::size_t copied = 0;
  for (const Edit &e : edits) {
    if (e.begin < copied) throw std::logic_error("annotate_ptx_line_info: overlapping edits");
    out.ptx.append(ptx.substr(copied, e.begin - copied));
    out.ptx.append(e.text);
    copied = e.end;
    if (out.ptx.size() > max_bytes) break;
  }
  out.ptx.append(ptx.substr(copied));
  if (out.ptx.size() > max_bytes)
    return util::unexpected(fmt::format(
        "the PTX with line info would exceed {} bytes (2 x {} + {}): too many short instruction lines",
        max_bytes, ptx.size(), kPtxLineInfoSlackBytes));
  return out;
}

}  // namespace ptxbench::evaluator
