#include "util/int_expr.hpp"

#include <cctype>
#include <limits>
#include <vector>

#include <fmt/core.h>

namespace ptxbench::util {
namespace {

constexpr std::size_t kMaxExpressionLength = 4096;  // characters
constexpr int kMaxDepth = 64;                       // nested parentheses / calls / unary signs

struct Failure {
  std::string message;
};

// Recursive descent over: expr := term (('+'|'-') term)* ; term := unary (('*'|'/'|'%') unary)* ;
// unary := ('-'|'+') unary | primary ; primary := integer | name | name '(' expr (',' expr)* ')' | '(' expr
// ')'
class Parser {
 public:
  Parser(std::string_view text, const SymbolTable &symbols) : text_(text), symbols_(symbols) {}

  std::int64_t parse_all() {
    skip_space();
    if (at_end()) fail_at(pos_, "empty expression");
    std::int64_t v = expr();
    skip_space();
    if (!at_end()) fail_at(pos_, fmt::format("unexpected '{}'", text_[pos_]));
    return v;
  }

 private:
  std::string_view text_;
  const SymbolTable &symbols_;
  std::size_t pos_ = 0;
  int depth_ = 0;

  // "<what> at column N<detail>", e.g. "unknown symbol 'Q' at column 5 (known: B, D)".
  [[noreturn]] void fail_at(std::size_t pos, const std::string &what, const std::string &detail = "") {
    throw Failure{fmt::format("{} at column {}{}", what, pos + 1, detail)};
  }
  bool at_end() const { return pos_ >= text_.size(); }
  void skip_space() {
    while (!at_end() && std::isspace(static_cast<unsigned char>(text_[pos_]))) ++pos_;
  }
  bool accept(char c) {
    skip_space();
    if (!at_end() && text_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  void expect(char c) {
    skip_space();
    if (at_end()) fail_at(pos_, fmt::format("expected '{}' but the expression ended", c));
    if (text_[pos_] != c) fail_at(pos_, fmt::format("expected '{}' but found '{}'", c, text_[pos_]));
    ++pos_;
  }
  void enter(std::size_t pos) {
    if (++depth_ > kMaxDepth) fail_at(pos, fmt::format("expression nested deeper than {} levels", kMaxDepth));
  }

  std::int64_t arith(char op, std::int64_t a, std::int64_t b, std::size_t pos) {
    std::int64_t r = 0;
    bool overflow = false;
    switch (op) {
      case '+':
        overflow = __builtin_add_overflow(a, b, &r);
        break;
      case '-':
        overflow = __builtin_sub_overflow(a, b, &r);
        break;
      case '*':
        overflow = __builtin_mul_overflow(a, b, &r);
        break;
      case '/':
      case '%':
        if (b == 0) fail_at(pos, op == '/' ? "division by zero" : "modulo by zero");
        if (a == std::numeric_limits<std::int64_t>::min() && b == -1)
          overflow = true;
        else
          r = op == '/' ? a / b : a % b;
        break;
    }
    if (overflow) fail_at(pos, fmt::format("64-bit integer overflow in {} {} {}", a, op, b));
    return r;
  }

  std::int64_t expr() {
    std::int64_t v = term();
    for (;;) {
      skip_space();
      if (at_end() || (text_[pos_] != '+' && text_[pos_] != '-')) return v;
      char op = text_[pos_];
      std::size_t at = pos_++;
      v = arith(op, v, term(), at);
    }
  }

  std::int64_t term() {
    std::int64_t v = unary();
    for (;;) {
      skip_space();
      if (at_end() || (text_[pos_] != '*' && text_[pos_] != '/' && text_[pos_] != '%')) return v;
      char op = text_[pos_];
      std::size_t at = pos_++;
      v = arith(op, v, unary(), at);
    }
  }

  std::int64_t unary() {
    skip_space();
    if (!at_end() && (text_[pos_] == '-' || text_[pos_] == '+')) {
      char op = text_[pos_];
      std::size_t at = pos_++;
      enter(at);
      std::int64_t v = unary();
      --depth_;
      return op == '-' ? arith('-', 0, v, at) : v;
    }
    return primary();
  }

  std::int64_t primary() {
    skip_space();
    if (at_end()) fail_at(pos_, "expected a number, a name or '(' but the expression ended");
    std::size_t start = pos_;
    char c = text_[pos_];
    if (c == '(') {
      ++pos_;
      enter(start);
      std::int64_t v = expr();
      expect(')');
      --depth_;
      return v;
    }
    if (std::isdigit(static_cast<unsigned char>(c))) {
      std::int64_t v = 0;
      while (!at_end() && std::isdigit(static_cast<unsigned char>(text_[pos_]))) {
        int digit = text_[pos_] - '0';
        if (__builtin_mul_overflow(v, 10, &v) || __builtin_add_overflow(v, digit, &v)) {
          while (!at_end() && std::isdigit(static_cast<unsigned char>(text_[pos_]))) ++pos_;
          fail_at(start, fmt::format("integer literal out of range ('{}' does not fit in 64 bits)",
                                     text_.substr(start, std::min<std::size_t>(pos_ - start, 40))));
        }
        ++pos_;
      }
      if (!at_end() &&
          (std::isalpha(static_cast<unsigned char>(text_[pos_])) || text_[pos_] == '_' || text_[pos_] == '.'))
        fail_at(pos_, fmt::format("unexpected '{}' after a number (only integers are allowed)", text_[pos_]));
      return v;
    }
    if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      while (!at_end() && (std::isalnum(static_cast<unsigned char>(text_[pos_])) || text_[pos_] == '_'))
        ++pos_;
      std::string_view name = text_.substr(start, pos_ - start);
      skip_space();
      if (!at_end() && text_[pos_] == '(') return call(name, start);
      auto it = symbols_.find(name);
      if (it == symbols_.end()) fail_at(start, fmt::format("unknown symbol '{}'", name), known_suffix());
      return it->second;
    }
    fail_at(pos_, fmt::format("unexpected '{}'", c));
  }

  std::string known_suffix() const {
    std::string known;
    for (const auto &[k, v] : symbols_) known += (known.empty() ? "" : ", ") + k;
    return known.empty() ? " (no symbols are defined)" : " (known: " + known + ")";
  }

  std::int64_t call(std::string_view name, std::size_t start) {
    if (name != "ceil_div" && name != "min" && name != "max")
      fail_at(start, fmt::format("unknown function '{}'", name), " (known: ceil_div, min, max)");
    expect('(');
    enter(start);
    std::vector<std::int64_t> args{expr()};
    while (accept(',')) args.push_back(expr());
    expect(')');
    --depth_;
    if (args.size() != 2) fail_at(start, fmt::format("{} takes 2 arguments, got {}", name, args.size()));
    std::int64_t a = args[0], b = args[1];
    if (name == "min") return std::min(a, b);
    if (name == "max") return std::max(a, b);
    if (b == 0) fail_at(start, "division by zero in ceil_div");
    std::int64_t q = arith('/', a, b, start);
    if (a % b != 0 && ((a < 0) == (b < 0))) ++q;  // round toward +infinity
    return q;
  }
};

}  // namespace

Expected<std::int64_t> evaluate_int_expression(std::string_view text, const SymbolTable &symbols) {
  if (text.size() > kMaxExpressionLength)
    return unexpected(fmt::format("expression longer than {} characters", kMaxExpressionLength));
  try {
    return Parser(text, symbols).parse_all();
  } catch (const Failure &f) {
    return unexpected(f.message);
  }
}

}  // namespace ptxbench::util
