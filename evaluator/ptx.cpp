#include "evaluator/ptx.hpp"
#include "evaluator/detail/module_state.hpp"

#include <cctype>
#include <charconv>
#include <set>

#include <fmt/core.h>

#include "util/files.hpp"

namespace ptxbench::evaluator {
namespace {

bool ident_start(char c) {
  return std::isalpha(static_cast<unsigned char>(c)) || c == '_' || c == '$' || c == '%';
}
bool ident_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '$';
}
bool alpha(char c) {
  return std::isalpha(static_cast<unsigned char>(c)) || c == '_';
}

std::optional<std::int64_t> parse_integer(std::string_view text) {
  std::int64_t v = 0;
  int base = 10;
  if (text.size() > 2 && text[0] == '0' && (text[1] == 'x' || text[1] == 'X')) {
    base = 16;
    text.remove_prefix(2);
  }
  if (!text.empty() && (text.back() == 'U' || text.back() == 'u')) text.remove_suffix(1);
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v, base);
  if (ec != std::errc() || ptr != text.data() + text.size()) return std::nullopt;
  return v;
}

const std::set<std::string_view> &type_names() {
  static const std::set<std::string_view> names{
      ".b8",  ".b16",  ".b32",  ".b64",  ".b128", ".u8",     ".u16",        ".u32",    ".u64",
      ".s8",  ".s16",  ".s32",  ".s64",  ".f16",  ".f16x2",  ".bf16",       ".bf16x2", ".f32",
      ".f64", ".pred", ".tf32", ".e4m3", ".e5m2", ".texref", ".samplerref", ".surfref"};
  return names;
}

bool is_state_space(std::string_view d) {
  return d == ".global" || d == ".shared" || d == ".const" || d == ".local" || d == ".param" ||
         d.starts_with(".shared::");
}

}  // namespace

int ptx_type_bytes(std::string_view type) {
  if (type == ".b8" || type == ".u8" || type == ".s8" || type == ".e4m3" || type == ".e5m2") return 1;
  if (type == ".b16" || type == ".u16" || type == ".s16" || type == ".f16" || type == ".bf16") return 2;
  if (type == ".b32" || type == ".u32" || type == ".s32" || type == ".f32" || type == ".f16x2" ||
      type == ".bf16x2" || type == ".tf32")
    return 4;
  if (type == ".b64" || type == ".u64" || type == ".s64" || type == ".f64") return 8;
  if (type == ".b128") return 16;
  return 0;
}

std::int64_t PtxParam::size_bytes() const {
  return ptx_type_bytes(type) * std::max<std::int64_t>(1, array_size);
}

std::string PtxParam::declaration() const {
  std::string d = ".param";
  if (!type.empty() && ptr) d += " " + type + " .ptr" + (state_space.empty() ? "" : " " + state_space);
  if (align > 0) d += " .align " + std::to_string(align);
  if (!type.empty() && !ptr) d += " " + type;
  d += " " + name;
  if (array_size > 0) d += "[" + std::to_string(array_size) + "]";
  return d;
}

std::string PtxInstruction::base() const {
  return mnemonic.substr(0, mnemonic.find('.'));
}

std::string PtxSyntaxError::text() const {
  return column ? fmt::format("line {}, column {}: {}", line, *column, message)
                : fmt::format("line {}: {}", line, message);
}

namespace {

/// One pass over a PTX source, token by token; the line and where it starts give each token's column.
class Lexer {
 public:
  explicit Lexer(std::string_view s) : s_(s) {}

  util::Expected<std::vector<PtxToken>, PtxSyntaxError> run() {
    std::vector<PtxToken> tokens;
    for (;;) {
      if (auto e = skip_blanks_and_comments()) return util::unexpected(std::move(*e));
      if (i_ >= s_.size()) return tokens;
      PtxToken tok;
      if (auto e = token(tok)) return util::unexpected(std::move(*e));
      tokens.push_back(std::move(tok));
    }
  }

 private:
  int column(std::size_t pos) const { return static_cast<int>(pos - line_start_) + 1; }
  PtxSyntaxError error(std::size_t pos, std::string what) const {
    return {line_, column(pos), std::move(what)};
  }
  bool next_is(char c) const { return i_ + 1 < s_.size() && s_[i_ + 1] == c; }
  void skip_ident_chars() {
    while (i_ < s_.size() && ident_char(s_[i_])) ++i_;
  }
  /// "::name" (state-space qualifiers: .shared::cta, .shared::cluster), taken when it follows.
  bool take_qualifier() {
    if (!(i_ + 2 < s_.size() && s_[i_] == ':' && s_[i_ + 1] == ':' && alpha(s_[i_ + 2]))) return false;
    i_ += 2;
    skip_ident_chars();
    return true;
  }

  /// Up to the next token or the end: blanks, newlines (counted), // and /* */ comments.
  std::optional<PtxSyntaxError> skip_blanks_and_comments() {
    while (i_ < s_.size()) {
      const char c = s_[i_];
      if (c == '\n') {
        ++line_;
        line_start_ = ++i_;
      } else if (c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v') {
        ++i_;
      } else if (c == '/' && next_is('/')) {
        while (i_ < s_.size() && s_[i_] != '\n') ++i_;
      } else if (c == '/' && next_is('*')) {
        std::size_t end = s_.find("*/", i_ + 2);
        if (end == std::string_view::npos) return error(i_, "unterminated /* comment (no closing */)");
        for (std::size_t k = i_; k < end; ++k)
          if (s_[k] == '\n') {
            ++line_;
            line_start_ = k + 1;
          }
        i_ = end + 2;
      } else {
        return std::nullopt;
      }
    }
    return std::nullopt;
  }

  /// The token at i_: a string, directive, identifier (with its modifiers), number or punctuation.
  std::optional<PtxSyntaxError> token(PtxToken &tok) {
    const std::size_t start = i_;
    const char c = s_[i_];
    tok.line = line_;
    tok.column = column(start);
    if (c == '"') {
      ++i_;
      while (i_ < s_.size() && s_[i_] != '"' && s_[i_] != '\n')
        i_ += (s_[i_] == '\\' && i_ + 1 < s_.size()) ? 2 : 1;
      if (i_ >= s_.size() || s_[i_] != '"') return error(start, "unterminated string");
      ++i_;
      tok.kind = PtxTokenKind::string;
    } else if (c == '.' && i_ + 1 < s_.size() && (alpha(s_[i_ + 1]) || s_[i_ + 1] == '$')) {
      ++i_;
      skip_ident_chars();
      while (take_qualifier()) {
      }
      tok.kind = PtxTokenKind::directive;
    } else if (ident_start(c)) {
      identifier();
      tok.kind = PtxTokenKind::identifier;
    } else if (std::isdigit(static_cast<unsigned char>(c))) {
      if (auto e = number(start)) return e;
      tok.kind = PtxTokenKind::number;
    } else if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) >= 0x7f) {
      return error(start,
                   fmt::format("unexpected byte 0x{:02x} (PTX is plain ASCII outside comments and strings)",
                               static_cast<unsigned char>(c)));
    } else {
      ++i_;
      tok.kind = PtxTokenKind::punct;
    }
    tok.text = std::string(s_.substr(start, i_ - start));
    return std::nullopt;
  }

  /// Modifiers belong to the name: mov.u32, %tid.x, cp.async.bulk.tensor.2d.shared::cluster.global
  void identifier() {
    ++i_;
    skip_ident_chars();
    for (;;) {
      if (i_ + 1 < s_.size() && s_[i_] == '.' && ident_char(s_[i_ + 1])) {
        ++i_;
        skip_ident_chars();
      } else if (!take_qualifier()) {
        break;
      }
    }
  }

  /// Hex floats (0f + 8 hex digits for f32, 0d + 16 for f64), else digits, letters and dots with an
  /// exponent's sign (1e-5; not in 0x...).
  std::optional<PtxSyntaxError> number(std::size_t start) {
    const char c = s_[i_];
    if (c == '0' && i_ + 1 < s_.size() &&
        (s_[i_ + 1] == 'f' || s_[i_ + 1] == 'F' || s_[i_ + 1] == 'd' || s_[i_ + 1] == 'D')) {
      std::size_t want = (s_[i_ + 1] == 'f' || s_[i_ + 1] == 'F') ? 8 : 16;
      i_ += 2;
      std::size_t digits = 0;
      while (i_ < s_.size() && std::isxdigit(static_cast<unsigned char>(s_[i_]))) ++i_, ++digits;
      if (digits != want)
        return error(start, fmt::format("hex float '{}' needs exactly {} hex digits",
                                        s_.substr(start, i_ - start), want));
      return std::nullopt;
    }
    while (i_ < s_.size()) {
      char d = s_[i_];
      if (std::isalnum(static_cast<unsigned char>(d)) || d == '.') {
        ++i_;
      } else if ((d == '+' || d == '-') && (s_[i_ - 1] == 'e' || s_[i_ - 1] == 'E') &&
                 !(s_.substr(start, 2) == "0x" || s_.substr(start, 2) == "0X")) {
        ++i_;  // exponent sign: 1e-5
      } else {
        break;
      }
    }
    return std::nullopt;
  }

  std::string_view s_;
  std::size_t i_ = 0;
  int line_ = 1;
  std::size_t line_start_ = 0;
};

}  // namespace

util::Expected<std::vector<PtxToken>, PtxSyntaxError> lex_ptx(std::string_view s) {
  return Lexer(s).run();
}

namespace {

class Parser {
 public:
  explicit Parser(const std::vector<PtxToken> &tokens) : t_(tokens) {}

  util::Expected<PtxModule, PtxSyntaxError> run() {
    try {
      module_.normalized_hash = hash();
      while (!done()) module_statement();
    } catch (const PtxSyntaxError &e) {
      return util::unexpected(e);
    }
    return std::move(module_);
  }

 private:
  const std::vector<PtxToken> &t_;
  std::size_t i_ = 0;
  PtxModule module_;
  bool seen_code_ = false;  ///< a function or variable came: later header directives are not "the header"

  bool done() const { return i_ >= t_.size(); }
  const PtxToken &peek(std::size_t ahead = 0) const {
    static const PtxToken kEnd{PtxTokenKind::punct, "", 0, 0};
    return i_ + ahead < t_.size() ? t_[i_ + ahead] : kEnd;
  }
  bool is(std::string_view text, std::size_t ahead = 0) const {
    return i_ + ahead < t_.size() && t_[i_ + ahead].text == text;
  }
  int last_line() const { return t_.empty() ? 1 : t_.back().line; }
  [[noreturn]] void fail(const std::string &what) const {
    throw PtxSyntaxError{done() ? last_line() : peek().line, std::nullopt, what};
  }
  const PtxToken &next() {
    if (done()) fail("unexpected end of the module");
    return t_[i_++];
  }
  void expect(std::string_view text, std::string_view context) {
    if (!is(text))
      fail(fmt::format("expected '{}' {}{}", text, context,
                       done() ? "" : fmt::format(" but found '{}'", peek().text)));
    ++i_;
  }
  void line_directive() {  // .loc / .file end at the line's end (no ';')
    const std::size_t first = i_;
    int line = peek().line;
    while (!done() && peek().line == line) ++i_;
    module_.line_directives.push_back({first, i_ - 1});
  }
  void skip_statement() {
    int depth = 0;
    while (!done()) {
      const std::string &x = next().text;
      if (x == "{") ++depth;
      if (x == "}") --depth;
      if (x == ";" && depth <= 0) return;
    }
  }

  std::string hash() const {
    std::string text;
    for (std::size_t k = 0; k < t_.size(); ++k) {
      if (t_[k].text == ".loc" || t_[k].text == ".file") {
        int line = t_[k].line;
        while (k + 1 < t_.size() && t_[k + 1].line == line) ++k;
        continue;
      }
      text += t_[k].text;
      text += ' ';
    }
    return util::fnv1a64_hex(text);
  }

  void module_statement() {
    const PtxToken &tok = peek();
    if (tok.text == ".version" || tok.text == ".target" || tok.text == ".address_size") {
      header_directive();
    } else if (tok.text == ".file" || tok.text == ".loc") {
      line_directive();
    } else if (tok.text == ".section") {
      // DWARF sections: .section .debug_x { ... }
      const std::size_t first = i_++;
      while (!done() && !is("{")) ++i_;
      skip_block();
      module_.sections.push_back({first, i_ - 1});
    } else if (tok.text == ".visible" || tok.text == ".extern" || tok.text == ".weak" ||
               tok.text == ".common") {
      ++i_;
    } else if (tok.text == ".entry" || tok.text == ".func") {
      seen_code_ = true;
      bool extern_decl = i_ > 0 && t_[i_ - 1].text == ".extern";
      function(extern_decl);
    } else if (tok.kind == PtxTokenKind::directive && is_state_space(tok.text)) {
      seen_code_ = true;
      module_variable();
    } else {
      if (tok.kind == PtxTokenKind::directive) seen_code_ = true;
      skip_statement();
    }
  }

  void header_directive() {
    const std::string &directive = next().text;
    if (directive == ".version") {
      module_.version = next().text;
    } else if (directive == ".target") {
      module_.target = next().text;
      while (is(",")) {
        const std::size_t comma = i_++;
        const std::string &option = next().text;
        // `debug` makes ptxas demand DWARF sections (a rewrite that drops them drops it too).
        if (option == "debug") module_.target_debug.push_back({comma, comma + 1});
        module_.target_options.push_back(option);
      }
    } else {
      module_.address_size = static_cast<int>(parse_integer(next().text).value_or(0));
    }
    if (!seen_code_) module_.header_last_token = i_ - 1;
  }

  void skip_block() {
    expect("{", "to open the block");
    int depth = 1;
    while (!done() && depth > 0) {
      const std::string &x = next().text;
      if (x == "{") ++depth;
      if (x == "}") --depth;
    }
    if (depth > 0) fail("a '{' block is never closed");
  }

  void module_variable() {
    PtxVariable v;
    v.declaration.first = i_;
    v.state_space = next().text;
    v.line = t_[i_ - 1].line;
    while (!done() && peek().kind == PtxTokenKind::directive) {
      const std::string &d = next().text;
      if (type_names().contains(d)) v.type = d;
      if (d == ".align" || d == ".v2" || d == ".v4" || d == ".v8") {
        if (d == ".align") ++i_;
      }
    }
    if (!done() && peek().kind == PtxTokenKind::identifier) {
      v.name = next().text;
      if (is("[")) {
        ++i_;
        if (is("]")) {
          v.array_size = -1;
        } else {
          v.array_size = parse_integer(next().text).value_or(0);
        }
      }
    }
    skip_statement();
    v.declaration.last = i_ - 1;
    if (!v.name.empty()) module_.module_variables.push_back(std::move(v));
  }

  std::vector<PtxParam> param_list() {
    std::vector<PtxParam> params;
    expect("(", "to open the parameter list");
    if (is(")")) {
      ++i_;
      return params;
    }
    for (;;) {
      PtxParam p;
      p.line = peek().line;
      while (!done() && peek().kind == PtxTokenKind::directive) {
        std::string d = next().text;
        if (d == ".align") {
          auto n = parse_integer(next().text);
          if (!n) fail("expected a number after .align");
          p.align = static_cast<int>(*n);
        } else if (d == ".ptr") {
          p.ptr = true;
        } else if (type_names().contains(d)) {
          p.type = d;
        } else if (p.ptr && is_state_space(d)) {
          p.state_space = d;
        }
      }
      if (done() || peek().kind != PtxTokenKind::identifier)
        fail(fmt::format("expected a parameter name{}", done() ? "" : " but found '" + peek().text + "'"));
      p.name = next().text;
      if (is("[")) {
        ++i_;
        auto n = parse_integer(next().text);
        if (!n) fail("expected an array size in '" + p.name + "[...]'");
        p.array_size = *n;
        expect("]", "after the array size");
      }
      params.push_back(std::move(p));
      if (is(",")) {
        ++i_;
        continue;
      }
      expect(")", "to close the parameter list");
      return params;
    }
  }

  std::vector<std::int64_t> number_list() {
    std::vector<std::int64_t> values;
    while (!done() && peek().kind == PtxTokenKind::number) {
      values.push_back(parse_integer(next().text).value_or(0));
      if (!is(",")) break;
      ++i_;
    }
    return values;
  }

  void function(bool extern_decl) {
    PtxFunction f;
    f.is_entry = next().text == ".entry";
    if (!f.is_entry && is("(")) param_list();  // return value of a .func
    if (done() || peek().kind != PtxTokenKind::identifier)
      fail(fmt::format("expected a name after {}", f.is_entry ? ".entry" : ".func"));
    f.name = peek().text;
    f.line = peek().line;
    ++i_;
    if (is("(")) f.params = param_list();
    // Performance-tuning directives until the body or ';'.
    while (!done() && !is("{") && !is(";")) {
      const PtxToken &d = next();
      if (d.text == ".reqntid")
        f.reqntid = number_list();
      else if (d.text == ".maxntid")
        f.maxntid = number_list();
      else if (d.text == ".reqnctapercluster" || d.text == ".cluster_dim")
        f.reqnctapercluster = number_list();
    }
    if (is(";") || extern_decl) {
      if (is(";")) ++i_;
      module_.functions.push_back(std::move(f));
      return;
    }
    f.is_definition = true;
    std::string name = f.name;
    module_.functions.push_back(std::move(f));
    body(name);
  }

  void body(const std::string &function_name) {
    int open_line = peek().line;
    expect("{", "to open the function body");
    int depth = 1;
    while (depth > 0) {
      if (done())
        throw PtxSyntaxError{
            open_line, std::nullopt,
            fmt::format("the body of '{}' is never closed (no matching '}}')", function_name)};
      const PtxToken &tok = peek();
      if (tok.text == "{") {
        ++depth;
        ++i_;
      } else if (tok.text == "}") {
        --depth;
        ++i_;
      } else if (tok.text == ";") {
        ++i_;
      } else if (tok.text == ".loc" || tok.text == ".file") {
        line_directive();
      } else if (tok.kind == PtxTokenKind::directive) {
        skip_statement();
      } else if (tok.kind == PtxTokenKind::identifier && is(":", 1)) {
        i_ += 2;  // label
      } else if (tok.text == "@" || tok.kind == PtxTokenKind::identifier) {
        instruction(function_name);
      } else {
        fail(fmt::format("unexpected '{}' in the body of '{}'", tok.text, function_name));
      }
    }
  }

  void instruction(const std::string &function_name) {
    PtxInstruction inst;
    inst.function = function_name;
    inst.line = peek().line;
    inst.first_token = i_;
    if (is("@")) {
      ++i_;
      inst.predicate = "@";
      if (is("!")) {
        ++i_;
        inst.predicate += "!";
      }
      if (done() || peek().kind != PtxTokenKind::identifier) fail("expected a predicate register after '@'");
      inst.predicate += next().text;
    }
    if (done() || peek().kind != PtxTokenKind::identifier)
      fail(fmt::format("expected an instruction{}", done() ? "" : " but found '" + peek().text + "'"));
    inst.mnemonic = next().text;
    // Operands up to ';'. Braces there are vector operands ({%f1, %f2}); a '}' that
    // closes nothing opened by this instruction means its ';' is missing.
    int braces = 0;
    while (!done() && !is(";")) {
      if (is("{")) ++braces;
      if (is("}") && --braces < 0)
        throw PtxSyntaxError{inst.line, std::nullopt, fmt::format("missing ';' after '{}'", inst.mnemonic)};
      ++i_;
    }
    inst.last_token = i_;
    expect(";", "after the instruction '" + inst.mnemonic + "'");
    module_.instructions.push_back(std::move(inst));
  }
};

}  // namespace

util::Expected<PtxModule, PtxSyntaxError> parse_ptx(std::string_view source) {
  auto tokens = lex_ptx(source);
  if (!tokens) return util::unexpected(tokens.error());
  return parse_ptx_tokens(*tokens);
}

util::Expected<PtxModule, PtxSyntaxError> parse_ptx_tokens(const std::vector<PtxToken> &tokens) {
  auto module = Parser(tokens).run();
  if (module) detail::mark_written_variables(*module, tokens);
  return module;
}

const PtxFunction *PtxModule::find_function(std::string_view name) const {
  for (const auto &f : functions)
    if (f.name == name) return &f;
  return nullptr;
}

std::vector<std::string> PtxModule::entry_names() const {
  std::vector<std::string> names;
  for (const auto &f : functions)
    if (f.is_entry) names.push_back(f.name);
  return names;
}

std::vector<const PtxInstruction *> PtxModule::instructions_with_prefix(std::string_view prefix) const {
  std::vector<const PtxInstruction *> found;
  for (const auto &inst : instructions) {
    std::string_view m = inst.mnemonic;
    if (m == prefix || (m.starts_with(prefix) && m.size() > prefix.size() && m[prefix.size()] == '.'))
      found.push_back(&inst);
  }
  return found;
}

std::vector<int> PtxModule::instruction_lines(std::string_view function) const {
  std::vector<int> lines;
  for (const auto &inst : instructions)
    if (inst.function == function) lines.push_back(inst.line);
  return lines;
}

}  // namespace ptxbench::evaluator
