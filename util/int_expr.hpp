// Integer expressions over named symbols: + - * / % ( ) and the functions
// ceil_div(a,b), min(a,b), max(a,b). 64-bit signed; overflow, division by
// zero, unknown names and syntax errors are errors with a position.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "util/expected.hpp"

namespace ptxbench::util {

using SymbolTable = std::map<std::string, std::int64_t, std::less<>>;

/// Evaluates `text`. Error text names the problem and the column, e.g.
/// "unknown symbol 'Q' at column 5 (known: B, D, H, S)".
Expected<std::int64_t> evaluate_int_expression(std::string_view text, const SymbolTable &symbols);

}  // namespace ptxbench::util
