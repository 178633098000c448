#include "evaluator/detail/module_state.hpp"

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <string_view>

#include "evaluator/ptx.hpp"

namespace ptxbench::evaluator::detail {
namespace {

/// Tokens [first, last] of one operand; `bracketed` when it is a memory operand `[...]`.
struct Operand {
  std::size_t first = 0, last = 0;
  bool bracketed = false;
};

/// One instruction as the analysis sees it.
struct Step {
  const PtxInstruction *inst = nullptr;
  bool writes_memory = false;  ///< its first bracketed operand is written
  bool param_store = false;    ///< st.param: an argument (or return value) of a call
  bool call = false;
  std::vector<Operand> ops;
};

bool writes_memory(std::string_view mnemonic) {
  const std::string_view base = mnemonic.substr(0, mnemonic.find('.'));
  static const std::set<std::string_view> kWriters = {
      "st", "atom", "red", "cp", "multimem", "tensormap", "mbarrier", "sust", "sured", "discard", "stmatrix"};
  if (!kWriters.count(base)) return false;
  // Forms of those families that only read memory.
  return mnemonic.find(".prefetch") == std::string_view::npos && !mnemonic.starts_with("multimem.ld_reduce");
}

Step step_of(const PtxInstruction &inst, const std::vector<PtxToken> &t) {
  Step s;
  s.inst = &inst;
  s.writes_memory = writes_memory(inst.mnemonic);
  s.param_store = inst.mnemonic.starts_with("st.param");
  s.call = inst.mnemonic == "call" || inst.mnemonic.starts_with("call.");
  std::size_t k = inst.first_token;
  if (k < t.size() && t[k].text == "@") {  // the predicate: '@', maybe '!', the register
    ++k;
    if (k < t.size() && t[k].text == "!") ++k;
    ++k;
  }
  ++k;  // the mnemonic
  int depth = 0;
  Operand op{k, k, false};
  bool open = false;
  for (; k < inst.last_token && k < t.size(); ++k) {
    const std::string &x = t[k].text;
    if (x == "," && depth == 0) {
      if (open) s.ops.push_back(op);
      open = false;
      continue;
    }
    if (!open) {
      op = {k, k, x == "["};
      open = true;
    }
    op.last = k;
    if (x == "[" || x == "{" || x == "(") ++depth;
    if (x == "]" || x == "}" || x == ")") --depth;
  }
  if (open) s.ops.push_back(op);
  return s;
}

/// Calls that only read what their pointer arguments point to.
bool reading_callee(const Step &s, const std::vector<PtxToken> &t) {
  for (const auto &op : s.ops)
    if (t[op.first].kind == PtxTokenKind::identifier)
      return t[op.first].text == "vprintf" || t[op.first].text == "__assertfail";
  return false;
}

class Tracker {
 public:
  Tracker(const std::vector<Step> &steps, const std::vector<PtxToken> &t) : steps_(steps), t_(t) {}

  /// Whether the variable `name` may be written (see the header).
  bool may_be_written(const std::string &name) {
    name_ = &name;
    held_.clear();
    for (bool changed = true; changed;) {
      changed = false;
      const std::string *function = nullptr;
      bool argument_pending = false;  // its address was stored into a call argument or a return value
      for (const Step &s : steps_) {
        if (!function || *function != s.inst->function) {
          if (argument_pending) return true;  // returned from a .func
          function = &s.inst->function;
        }
        std::set<std::string> &regs = held_[s.inst->function];
        if (s.call) {
          if (argument_pending && !reading_callee(s, t_)) return true;
          argument_pending = false;
          continue;
        }
        if (s.ops.empty()) continue;
        if (s.writes_memory) {
          const auto dest =
              std::find_if(s.ops.begin(), s.ops.end(), [](const Operand &o) { return o.bracketed; });
          if (dest != s.ops.end() && holds(*dest, regs)) return true;
          // The value stored (not an address read from, which is bracketed) holding the address.
          for (auto o = s.ops.begin(); o != s.ops.end(); ++o)
            if (o != dest && !o->bracketed && holds(*o, regs)) {
              if (!s.param_store) return true;
              argument_pending = true;
            }
          continue;
        }
        // Anything else computes its first operand from the rest; what a load reads (bracketed) is data.
        if (s.ops.front().bracketed) continue;
        const bool from_address = std::any_of(
            s.ops.begin() + 1, s.ops.end(), [&](const Operand &o) { return !o.bracketed && holds(o, regs); });
        if (!from_address) continue;
        for (std::size_t k = s.ops.front().first; k <= s.ops.front().last; ++k)
          if (t_[k].kind == PtxTokenKind::identifier && t_[k].text.starts_with("%"))
            changed |= regs.insert(t_[k].text).second;
      }
      if (argument_pending) return true;
    }
    return false;
  }

 private:
  const std::vector<Step> &steps_;
  const std::vector<PtxToken> &t_;
  const std::string *name_ = nullptr;
  std::map<std::string, std::set<std::string>> held_;  ///< function -> registers that may hold the address

  bool holds(const Operand &o, const std::set<std::string> &regs) const {
    for (std::size_t k = o.first; k <= o.last; ++k)
      if (t_[k].kind == PtxTokenKind::identifier && (t_[k].text == *name_ || regs.count(t_[k].text)))
        return true;
    return false;
  }
};

}  // namespace

void mark_written_variables(PtxModule &module, const std::vector<PtxToken> &tokens) {
  if (module.module_variables.empty()) return;
  std::set<std::string> named;  // identifiers the instructions use
  std::vector<Step> steps;
  steps.reserve(module.instructions.size());
  for (const auto &inst : module.instructions) {
    steps.push_back(step_of(inst, tokens));
    for (std::size_t k = inst.first_token; k <= inst.last_token && k < tokens.size(); ++k)
      if (tokens[k].kind == PtxTokenKind::identifier) named.insert(tokens[k].text);
  }
  // Names in another variable's initializer (after '='): an address kept in memory, not followed.
  std::set<std::string> escaped;
  for (const auto &v : module.module_variables) {
    bool initializer = false;
    for (std::size_t k = v.declaration.first; k <= v.declaration.last && k < tokens.size(); ++k) {
      initializer = initializer || tokens[k].text == "=";
      if (initializer && tokens[k].kind == PtxTokenKind::identifier) escaped.insert(tokens[k].text);
    }
  }
  Tracker tracker(steps, tokens);
  for (auto &v : module.module_variables)
    v.may_be_written = escaped.count(v.name) || (named.count(v.name) && tracker.may_be_written(v.name));
}

}  // namespace ptxbench::evaluator::detail
