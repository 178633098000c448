// A real PTX lexer (comments and strings are never code) and the part of a
// parser the static checks need: .version, .target, .address_size, entries
// and functions with their parameters, instructions by full mnemonic with
// their source line, and module-scope variables; plus where .loc/.file,
// .section and `.target ..., debug` sit in the token stream, for rewrites.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "util/expected.hpp"

namespace ptxbench::evaluator {

enum class PtxTokenKind {
  identifier,  ///< names, registers (%r1, %tid.x), mnemonics with modifiers
               ///< (cp.async.bulk.tensor.2d.shared::cluster)
  directive,   ///< .entry, .param, .u64, .shared::cta, ...
  number,      ///< 42, 0x1F, 1.5, 0f3F800000, 0d3FF0000000000000
  string,      ///< "..." (e.g. .file names)
  punct,       ///< one character: { } ( ) [ ] ; , : < > @ ! + - = | ...
};

struct PtxToken {
  PtxTokenKind kind = PtxTokenKind::punct;
  std::string text;
  int line = 0;    ///< 1-based
  int column = 0;  ///< 1-based
};

/// Error: "line 12, column 3: unterminated /* comment" etc.
/// Where and why a PTX module does not lex or parse. The line travels as a number, for diagnostics that
/// point at it; text() is what a model reads.
struct PtxSyntaxError {
  int line = 0;               ///< 1-based line of the PTX
  std::optional<int> column;  ///< 1-based byte column, when the lexer knows it
  std::string message;        ///< what is wrong, e.g. "expected '(' after the .entry name"
  std::string text() const;   ///< "line 7: ..." or "line 7, column 3: ..."
};

util::Expected<std::vector<PtxToken>, PtxSyntaxError> lex_ptx(std::string_view source);

struct PtxParam {
  std::string name;
  std::string type;             ///< ".u64", ".b8", ".f32", ... ("" if none was written)
  int align = 0;                ///< .align N; 0 when absent
  bool ptr = false;             ///< .ptr attribute given
  std::string state_space;      ///< for .ptr params: ".global", ".shared", ... ("" when none)
  std::int64_t array_size = 0;  ///< elements for `name[N]`; 0 = scalar
  int line = 0;
  /// Bytes passed: element size x max(1, array_size) (0 for unknown types).
  std::int64_t size_bytes() const;
  /// As PTX would spell it, e.g. ".param .align 64 .b8 tmap[128]".
  std::string declaration() const;
};

struct PtxFunction {
  std::string name;
  bool is_entry = false;       ///< .entry (kernel) vs .func
  bool is_definition = false;  ///< has a body (not a prototype / .extern)
  std::vector<PtxParam> params;
  int line = 0;                                 ///< line of the name
  std::vector<std::int64_t> reqntid;            ///< .reqntid values (empty = none)
  std::vector<std::int64_t> maxntid;            ///< .maxntid values (empty = none)
  std::vector<std::int64_t> reqnctapercluster;  ///< .reqnctapercluster / .cluster_dim values
};

/// Tokens [first, last] of one statement, as indices into the lex_ptx token vector the module was
/// parsed from (last inclusive).
struct PtxTokenRange {
  std::size_t first = 0;  ///< token index
  std::size_t last = 0;   ///< token index, inclusive
};

struct PtxInstruction {
  std::string mnemonic;   ///< full, with modifiers: "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16"
  std::string predicate;  ///< "@%p1", "@!%p1", or ""
  std::string function;   ///< the enclosing .entry/.func
  int line = 0;           ///< 1-based line in the PTX source
  std::size_t first_token = 0;  ///< token index (lex_ptx) of its first token: the '@' or the mnemonic
  std::size_t last_token = 0;   ///< token index of its closing ';'
  /// Opcode up to the first '.', e.g. "wgmma".
  std::string base() const;
};

struct PtxVariable {
  std::string name;
  std::string state_space;      ///< ".global", ".shared", ".const"
  std::string type;             ///< ".b8", ".u32", ...
  std::int64_t array_size = 0;  ///< 0 = scalar; -1 = unsized []
  int line = 0;
  PtxTokenRange declaration;  ///< the statement, through its ';' (initializer included)
  /// Whether a kernel can write it (detail/module_state.hpp): an instruction that writes memory (st, atom,
  /// red, cp, ...) has its address as destination, or its address escapes where the check cannot follow it
  /// (stored to memory, passed to a function other than vprintf/__assertfail, named in another variable's
  /// initializer). false: only ever read, as NVRTC's constant tables and printf format strings are.
  bool may_be_written = false;
};

struct PtxModule {
  std::string version;                      ///< "9.0" ("" when missing)
  std::string target;                       ///< first .target operand, e.g. "sm_90a" ("" when missing)
  std::vector<std::string> target_options;  ///< further .target operands ("debug", "texmode_independent")
  int address_size = 0;                     ///< 32 / 64; 0 when missing
  std::vector<PtxFunction> functions;
  std::vector<PtxInstruction> instructions;   ///< in source order
  std::vector<PtxVariable> module_variables;  ///< module-scope .global/.shared/.const
  std::string
      normalized_hash;  ///< FNV-1a 64 of the token stream (comments, whitespace and .loc/.file ignored)
  // Where debug information sits in the token stream (token indices into lex_ptx(source)), in
  // source order, for rewrites such as annotate_ptx_line_info (evaluator/ptx_lines.hpp).
  std::vector<PtxTokenRange> line_directives;  ///< .loc / .file statements, module scope and bodies;
                                               ///< each runs to the end of its line (no ';')
  std::vector<PtxTokenRange> sections;         ///< .section blocks: `.section` through the closing '}'
  std::vector<PtxTokenRange> target_debug;     ///< `, debug` operands of .target: the ',' and `debug`
  /// Token index of the last token of the .version/.target/.address_size directives that come
  /// before any function, variable or other directive statement (nullopt when none does).
  std::optional<std::size_t> header_last_token;

  const PtxFunction *find_function(std::string_view name) const;
  std::vector<std::string> entry_names() const;
  /// Instructions whose mnemonic equals `prefix` or starts with `prefix` + '.'.
  std::vector<const PtxInstruction *> instructions_with_prefix(std::string_view prefix) const;
  /// Lines (1-based) of the instructions of `function`, in order (for mapping reports to source).
  std::vector<int> instruction_lines(std::string_view function) const;
};

/// Parses a whole module. Errors say what and where ("line 7: expected '(' after the .entry name").
util::Expected<PtxModule, PtxSyntaxError> parse_ptx(std::string_view source);
/// The same from lex_ptx's tokens (token indices in the module refer to `tokens`).
util::Expected<PtxModule, PtxSyntaxError> parse_ptx_tokens(const std::vector<PtxToken> &tokens);

/// Bytes of a PTX fundamental type (".u64" -> 8, ".b8" -> 1, ".pred" -> 0 unknown).
int ptx_type_bytes(std::string_view type);

}  // namespace ptxbench::evaluator
