#include "evaluator/ptx_lines.hpp"

#include <algorithm>
#include <optional>
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

/// Walks the token stream the way parse_ptx does (module statements, function
/// bodies) and records where instructions start and which directives to drop.
class Walker {
 public:
  Walker(const std::vector<PtxToken> &tokens) : t_(tokens) {}

  std::vector<std::size_t> instruction_starts;             ///< token index of each instruction's first token
  std::vector<std::pair<std::size_t, std::size_t>> drops;  ///< token index ranges [first, last] to remove
  std::optional<std::size_t> header_last;                  ///< last token of .version/.target/.address_size

  void run() {
    while (!done()) module_statement();
  }

 private:
  const std::vector<PtxToken> &t_;
  std::size_t i_ = 0;
  bool seen_code_ = false;  ///< a function or variable came: later header directives are not "the header"

  bool done() const { return i_ >= t_.size(); }
  bool is(std::string_view text, std::size_t ahead = 0) const {
    return i_ + ahead < t_.size() && t_[i_ + ahead].text == text;
  }
  void drop_line() {  // .loc / .file end at the line's end (no ';')
    const std::size_t first = i_;
    const int line = t_[i_].line;
    while (!done() && t_[i_].line == line) ++i_;
    drops.emplace_back(first, i_ - 1);
  }
  void skip_statement() {
    int depth = 0;
    while (!done()) {
      const std::string &x = t_[i_++].text;
      if (x == "{") ++depth;
      if (x == "}") --depth;
      if (x == ";" && depth <= 0) return;
    }
  }
  void header_operands() {
    const bool target = t_[i_].text == ".target";
    ++i_;  // the directive
    if (!done()) ++i_;
    while (is(",") && i_ + 1 < t_.size()) {  // .target sm_90a, texmode_independent
      // `debug` makes ptxas demand the DWARF sections this rewrite drops.
      if (target && t_[i_ + 1].text == "debug") drops.emplace_back(i_, i_ + 1);
      i_ += 2;
    }
    if (!seen_code_) header_last = i_ - 1;
  }

  void module_statement() {
    const PtxToken &tok = t_[i_];
    if (tok.text == ".version" || tok.text == ".target" || tok.text == ".address_size") {
      header_operands();
    } else if (tok.text == ".file" || tok.text == ".loc") {
      drop_line();
    } else if (tok.text == ".section") {
      const std::size_t first = i_;
      while (!done() && !is("{")) ++i_;
      int depth = 0;
      while (!done()) {
        const std::string &x = t_[i_++].text;
        if (x == "{") ++depth;
        if (x == "}" && --depth == 0) break;
      }
      drops.emplace_back(first, i_ - 1);
    } else if (tok.text == ".visible" || tok.text == ".extern" || tok.text == ".weak" ||
               tok.text == ".common") {
      ++i_;
    } else if (tok.text == ".entry" || tok.text == ".func") {
      seen_code_ = true;
      const bool extern_decl = i_ > 0 && t_[i_ - 1].text == ".extern";
      while (!done() && !is("{") && !is(";")) ++i_;  // name, parameters, performance directives
      if (is(";") || extern_decl) {
        if (is(";")) ++i_;
        return;
      }
      if (!done()) body();
    } else {
      if (tok.kind == PtxTokenKind::directive) seen_code_ = true;
      skip_statement();
    }
  }

  void body() {
    ++i_;  // '{'
    int depth = 1;
    while (depth > 0 && !done()) {
      const PtxToken &tok = t_[i_];
      if (tok.text == "{") {
        ++depth;
        ++i_;
      } else if (tok.text == "}") {
        --depth;
        ++i_;
      } else if (tok.text == ";") {
        ++i_;
      } else if (tok.text == ".loc" || tok.text == ".file") {
        drop_line();
      } else if (tok.kind == PtxTokenKind::directive) {
        skip_statement();
      } else if (tok.kind == PtxTokenKind::identifier && is(":", 1)) {
        i_ += 2;  // label
      } else if (tok.text == "@" || tok.kind == PtxTokenKind::identifier) {
        instruction_starts.push_back(i_);
        while (!done() && !is(";")) ++i_;
        if (!done()) ++i_;
      } else {
        ++i_;  // parse_ptx rejects this module before the walk matters
      }
    }
  }
};

bool blank(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return c == ' ' || c == '\t' || c == '\r'; });
}

}  // namespace

util::Expected<PtxLineAnnotation, std::string> annotate_ptx_line_info(std::string_view ptx,
                                                                      std::string_view file_name) {
  if (file_name.empty() || file_name.find_first_of("\"\\\n\r") != std::string_view::npos)
    return util::unexpected(fmt::format("'{}' cannot be named in a PTX .file directive", file_name));
  auto module = parse_ptx(ptx);
  if (!module) return util::unexpected("the PTX does not parse: " + module.error());
  auto tokens = lex_ptx(ptx);
  if (!tokens) return util::unexpected("the PTX does not lex: " + tokens.error());
  const std::vector<PtxToken> &t = *tokens;

  // Byte offset of each line's start; token columns are 1-based byte columns.
  std::vector<std::size_t> line_start{0};
  for (std::size_t k = 0; k < ptx.size(); ++k)
    if (ptx[k] == '\n') line_start.push_back(k + 1);
  auto begin_of = [&](const PtxToken &tok) {
    return line_start[static_cast<std::size_t>(tok.line - 1)] + static_cast<std::size_t>(tok.column - 1);
  };
  auto end_of = [&](const PtxToken &tok) { return begin_of(tok) + tok.text.size(); };

  Walker walker(t);
  walker.run();
  // The parser is the authority on what an instruction is; the walk only locates them.
  const auto &instructions = module->instructions;
  bool agree = walker.instruction_starts.size() == instructions.size();
  for (std::size_t k = 0; agree && k < instructions.size(); ++k)
    agree = t[walker.instruction_starts[k]].line == instructions[k].line;
  if (!agree)
    return util::unexpected(
        fmt::format("could not locate the {} instructions of the PTX for line info ({} found)",
                    instructions.size(), walker.instruction_starts.size()));

  PtxLineAnnotation out;
  std::vector<Edit> edits;
  const std::string file_directive = fmt::format(".file 1 \"{}\"", file_name);
  if (walker.header_last)  // after the header's last token, so never inside a comment
    edits.push_back(
        {end_of(t[*walker.header_last]), end_of(t[*walker.header_last]), "\n" + file_directive + "\n"});
  else
    edits.push_back({0, 0, file_directive + "\n"});
  for (const auto &[first, last] : walker.drops) {
    edits.push_back({begin_of(t[first]), end_of(t[last]), ""});
    ++out.dropped_directives;
  }
  int previous_line = 0;
  for (std::size_t index : walker.instruction_starts) {
    const PtxToken &tok = t[index];
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
