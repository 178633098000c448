// FlashInfer-Trace import: a definition and its workloads as one of our task documents, made from a
// template task of the family (what the schema lacks comes from the template).
#include "tasks/flashinfer.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <map>
#include <numeric>
#include <regex>
#include <set>

#include <fmt/core.h>

#include "tasks/detail/flashinfer_schema.hpp"
#include "util/files.hpp"
#include "util/strings.hpp"

namespace ptxbench::tasks::flashinfer {
namespace {

using nlohmann::json;
using nlohmann::ordered_json;
using util::unexpected;
using namespace detail;

// ---------------------------------------------------------------------------------------------------------
// Import.

/// Our symbol for each of their axes, by the tensors' positions.
std::map<std::string, std::string> symbol_names(const Definition &d, Family family) {
  std::map<std::string, std::string> out;
  if (family == Family::gemm) {
    const auto &a = *find(d.inputs, {"a"})->shape, &b = *find(d.inputs, {"b"})->shape;
    out[a[0]] = "M";
    out[a[1]] = "K";
    out[b[0]] = "N";
  } else {
    const auto &q = *find(d.inputs, {"q"})->shape;
    const char *ours[] = {"B", "H", "S", "D"};
    for (std::size_t i = 0; i < 4; ++i) out[q[i]] = ours[i];
  }
  return out;
}

struct ParsedWorkload {
  std::string uuid;
  util::SymbolTable symbols;              ///< ours, every symbol
  std::map<std::string, double> scalars;  ///< their scalar input name -> value
  std::size_t index = 0;                  ///< position among the workload lines
};

util::Expected<ParsedWorkload> read_workload(const json &line, std::size_t index, const Definition &d,
                                             const std::map<std::string, std::string> &symbols,
                                             const ImportOptions &options) {
  ParsedWorkload w;
  w.index = index;
  std::string where = fmt::format("workloads[{}]", index);
  auto fail = [&](const std::string &field, const std::string &why) {
    return unexpected(fmt::format("{}: {}: {}", where, field, why));
  };
  if (!line.is_object()) return fail("(line)", "must be a JSON object {definition, workload, ...}");
  const auto def = line.find("definition");
  if (def == line.end() || !def->is_string()) return fail("definition", "required, the definition's name");
  if (*def != d.name)
    return fail("definition",
                fmt::format("'{}' is not this definition ('{}')", def->get<std::string>(), d.name));
  const auto wl = line.find("workload");
  if (wl == line.end() || !wl->is_object())
    return fail("workload", "required, an object {uuid, axes, inputs}");
  const auto uuid = wl->find("uuid");
  if (uuid == wl->end() || !uuid->is_string() || uuid->get<std::string>().empty())
    return fail("workload.uuid", "required, a non-empty string");
  w.uuid = uuid->get<std::string>();
  where += fmt::format(" (uuid {})", w.uuid);
  const auto axes = wl->find("axes");
  if (axes == wl->end() || !axes->is_object())
    return fail("workload.axes", "required, an object {axis: value}");
  for (const auto &[name, axis] : d.axes) {
    const auto it = symbols.find(name);
    const auto given = axes->find(name);
    if (given != axes->end() && (!given->is_number_integer() || given->get<std::int64_t>() <= 0))
      return fail("workload.axes." + name, "must be a positive integer");
    if (axis.is_const) {
      if (given != axes->end() && given->get<std::int64_t>() != axis.value)
        return fail("workload.axes." + name,
                    fmt::format("{} differs from the constant {}", given->get<std::int64_t>(), axis.value));
      if (it != symbols.end()) w.symbols[it->second] = axis.value;
      continue;
    }
    if (given == axes->end())
      return fail("workload.axes", fmt::format("missing the variable axis '{}'", name));
    if (it != symbols.end()) w.symbols[it->second] = given->get<std::int64_t>();
  }
  for (const auto &[name, value] : axes->items())
    if (!d.axes.count(name)) return fail("workload.axes." + name, "not an axis of the definition");
  const auto inputs = wl->find("inputs");
  if (inputs == wl->end() || !inputs->is_object()) return fail("workload.inputs", "required, an object");
  for (const auto &[name, spec] : inputs->items()) {
    const std::string path = "workload.inputs." + name;
    const auto input =
        std::find_if(d.inputs.begin(), d.inputs.end(), [&](const TensorDef &t) { return t.name == name; });
    if (input == d.inputs.end()) return fail(path, "not an input of the definition");
    const auto type = spec.is_object() ? spec.find("type") : spec.end();
    if (!spec.is_object() || type == spec.end() || !type->is_string())
      return fail(path, "must be {\"type\": \"random\" | \"scalar\" | \"safetensors\", ...}");
    if (input->is_scalar()) {
      const auto value = spec.find("value");
      if (*type != "scalar" || value == spec.end() || !value->is_number())
        return fail(path, "a scalar input needs {\"type\": \"scalar\", \"value\": number}");
      w.scalars[name] = value->get<double>();
    } else if (*type == "safetensors") {
      if (!options.ignore_input_data)
        return fail(path,
                    "recorded tensor data ('safetensors') cannot be imported: PTXBench draws its own input "
                    "values (pass --ignore-input-data to accept that and keep the shapes)");
    } else if (*type != "random") {
      return fail(path, fmt::format("type '{}' for a tensor (the schema's types: random, safetensors)",
                                    type->get<std::string>()));
    }
  }
  return w;
}

std::string workload_name(const Task &templ, const util::SymbolTable &symbols,
                          const std::set<std::string> &var_symbols) {
  std::vector<std::string> parts;
  for (const auto &s : templ.symbols)
    if (var_symbols.count(s)) parts.push_back(fmt::format("{}={}", s, symbols.at(s)));
  return parts.empty() ? "fixed" : util::join(parts, ",");
}

/// The ranges the definition's constraints state, per our symbol: "lo <= X <= hi", "X >= lo", "X <= hi",
/// "X % m == 0". Anything else is refused: it is a promise PTXBench could not state or check.
util::Expected<std::map<std::string, SymbolRange>> constraint_ranges(
    const Definition &d, const std::map<std::string, std::string> &symbols,
    std::map<std::string, int> &given) {
  static const std::regex both(R"(^\s*(\d+)\s*<=\s*([A-Za-z_]\w*)\s*<=\s*(\d+)\s*$)");
  static const std::regex at_least(R"(^\s*([A-Za-z_]\w*)\s*>=\s*(\d+)\s*$)");
  static const std::regex at_most(R"(^\s*([A-Za-z_]\w*)\s*<=\s*(\d+)\s*$)");
  static const std::regex multiple(R"(^\s*([A-Za-z_]\w*)\s*%\s*(\d+)\s*==\s*0\s*$)");
  std::map<std::string, SymbolRange> out;
  for (std::size_t i = 0; i < d.constraints.size(); ++i) {
    const std::string &c = d.constraints[i];
    std::smatch m;
    std::string axis;
    enum { kMin = 1, kMax = 2, kMultiple = 4 };
    int what = 0;
    std::int64_t lo = 0, hi = 0, mult = 0;
    if (std::regex_match(c, m, both)) {
      axis = m[2];
      lo = std::stoll(m[1]);
      hi = std::stoll(m[3]);
      what = kMin | kMax;
    } else if (std::regex_match(c, m, at_least)) {
      axis = m[1];
      lo = std::stoll(m[2]);
      what = kMin;
    } else if (std::regex_match(c, m, at_most)) {
      axis = m[1];
      hi = std::stoll(m[2]);
      what = kMax;
    } else if (std::regex_match(c, m, multiple)) {
      axis = m[1];
      mult = std::stoll(m[2]);
      what = kMultiple;
    }
    const auto axis_it = d.axes.find(axis);
    if (!what || axis_it == d.axes.end() || axis_it->second.is_const || !symbols.count(axis))
      return unexpected(
          fmt::format("constraints[{}]: '{}' cannot be stated as a PTXBench range (understood: 'lo <= X <= "
                      "hi', 'X >= lo', "
                      "'X <= hi', 'X % m == 0' on a variable axis of the mapped tensors)",
                      i, c));
    const std::string &sym = symbols.at(axis);
    SymbolRange &r = out.try_emplace(sym, SymbolRange{0, 0, 0}).first->second;
    if (what & kMin) r.min = lo;
    if (what & kMax) r.max = hi;
    if (what & kMultiple) r.multiple_of = mult;
    given[sym] |= what;
    if ((what & kMultiple) && mult <= 0)
      return unexpected(fmt::format("constraints[{}]: '{}': the multiple must be positive", i, c));
  }
  return out;
}

std::string replace_all(std::string text, std::string_view from, std::string_view to) {
  for (std::size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size()))
    text.replace(at, from.size(), to);
  return text;
}

std::string sanitized_id(const std::string &name) {
  std::string id;
  for (char c : lower(name)) id += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  return id;
}

std::optional<std::size_t> shown_tag(const Definition &d) {
  for (const auto &t : d.tags)
    if (t.rfind("ptxbench.shown:", 0) == 0) {
      const std::string n = t.substr(15);
      if (!n.empty() && n.size() < 6 &&
          std::all_of(n.begin(), n.end(), [](unsigned char c) { return std::isdigit(c) != 0; }))
        return std::stoul(n);
    }
  return std::nullopt;
}

std::string title_for(const Definition &d, const Mapping &m, const Task &templ,
                      const std::map<std::string, std::string> &symbols) {
  std::vector<std::string> fixed;
  for (const auto &s : templ.symbols)
    for (const auto &[axis, sym] : symbols)
      if (sym == s && d.axes.at(axis).is_const)
        fixed.push_back(fmt::format("{}={}", s, d.axes.at(axis).value));
  const std::string consts = util::join(fixed, " ");
  switch (m.family) {
    case Family::gemm:
      return fmt::format("{} GEMM C[M,N] = A[M,K] * B[N,K]^T{}{} (FlashInfer-Trace {})",
                         to_string(m.input_dtype), consts.empty() ? "" : ", ", consts, d.name);
    case Family::attention_fwd:
      return fmt::format("Attention forward{}{}{}, bf16, O and LSE (FlashInfer-Trace {})",
                         m.causal ? " (causal)" : "", consts.empty() ? "" : ", ", consts, d.name);
    case Family::attention_bwd:
      return fmt::format("Attention backward{}{}{}: dQ, dK, dV (FlashInfer-Trace {})",
                         m.causal ? " (causal)" : "", consts.empty() ? "" : ", ", consts, d.name);
  }
  return d.name;
}

// ---------------------------------------------------------------------------------------------------------
// import_definition's steps, in the order it takes them; every refusal starts with `named`.

/// What every step of one import reads.
struct ImportContext {
  const Definition &d;
  const Mapping &m;
  const Task &templ;
  const ImportOptions &options;
  std::string named;                           ///< "definition '<name>'"
  std::map<std::string, std::string> symbols;  ///< their axis -> our symbol
  std::set<std::string> var_symbols;           ///< ours, of the definition's variable axes
};

/// The workload lines, read and checked; lines with the same symbol values kept once.
struct WorkloadSet {
  std::vector<ParsedWorkload> lines;
  std::vector<std::size_t> unique;   ///< indices into lines, the first of each set of values
  std::vector<std::size_t> same_as;  ///< per line, the index in lines of the unique line it repeats
};

/// Which unique lines are shown: `order` starts with the first shown one; its first `shown_count` are shown.
struct ShownOrder {
  std::size_t first = 0, shown_count = 1;
  std::vector<std::size_t> order;
};

util::Expected<void> check_template(const Mapping &m, const Task &templ, const std::string &named) {
  if (templ.family != m.family || templ.causal != m.causal)
    return unexpected(fmt::format("{} maps onto {}{}, but the template task {} is {}{}", named,
                                  to_string(m.family), m.causal ? " (causal)" : "", templ.id,
                                  to_string(templ.family), templ.causal ? " (causal)" : ""));
  if (m.family == Family::gemm) {
    const Tensor *a = templ.find_tensor("A");
    const bool fp8_template = a && (a->dtype == DType::e4m3 || a->dtype == DType::e5m2);
    if (!a || fp8_template != (m.input_dtype == DType::e4m3))
      return unexpected(
          fmt::format("{}: the template task {} has {} inputs; take a template of the definition's "
                      "kind (fp8 or 16-bit)",
                      named, templ.id, a ? to_string(a->dtype) : "no A"));
  }
  return {};
}

/// Our symbols of the definition's variable axes; a const axis of no mapped dimension is noted and ignored.
util::Expected<std::set<std::string>> variable_symbols(const ImportContext &c,
                                                       std::vector<std::string> &notes) {
  std::set<std::string> out;
  for (const auto &[axis, value] : c.d.axes) {
    const auto it = c.symbols.find(axis);
    if (it == c.symbols.end()) {
      if (!value.is_const)
        return unexpected(
            fmt::format("{}: axes.{}: a variable axis of no mapped tensor dimension", c.named, axis));
      notes.push_back(fmt::format("axes.{} (const {}) is not a dimension of the mapped tensors: ignored",
                                  axis, value.value));
      continue;
    }
    if (!value.is_const) out.insert(it->second);
  }
  return out;
}

/// Every workload line read and checked; without lines, one workload of the constants (when all are).
util::Expected<std::vector<ParsedWorkload>> read_workload_lines(const ImportContext &c,
                                                                const std::vector<json> &workload_lines) {
  std::vector<ParsedWorkload> lines;
  for (std::size_t i = 0; i < workload_lines.size(); ++i) {
    auto w = read_workload(workload_lines[i], i, c.d, c.symbols, c.options);
    if (!w) return unexpected(fmt::format("{}: {}", c.named, w.error()));
    lines.push_back(std::move(*w));
  }
  if (!lines.empty()) return lines;
  if (!c.var_symbols.empty()) {
    std::vector<std::string> vars;
    for (const auto &[axis, a] : c.d.axes)
      if (!a.is_const) vars.push_back(axis);
    return unexpected(
        fmt::format("{}: axes {} are variable: give the workloads (a .jsonl of Workload lines) for "
                    "their values",
                    c.named, util::join(vars, ", ")));
  }
  ParsedWorkload only;
  only.uuid = "(constants)";
  for (const auto &[axis, sym] : c.symbols) only.symbols[sym] = c.d.axes.at(axis).value;
  lines.push_back(std::move(only));
  return lines;
}

/// Marks the lines that repeat an earlier one's symbol values (noted: their input data is not used).
WorkloadSet deduplicated(std::vector<ParsedWorkload> lines, std::vector<std::string> &notes) {
  WorkloadSet set;
  set.lines = std::move(lines);
  set.same_as.resize(set.lines.size());
  for (std::size_t i = 0; i < set.lines.size(); ++i) {
    auto it = std::find_if(set.unique.begin(), set.unique.end(),
                           [&](std::size_t u) { return set.lines[u].symbols == set.lines[i].symbols; });
    if (it == set.unique.end()) {
      set.same_as[i] = i;
      set.unique.push_back(i);
    } else {
      set.same_as[i] = *it;
    }
  }
  if (set.unique.size() < set.lines.size())
    notes.push_back(
        fmt::format("{} of {} workloads repeat an earlier one's axis values (their input data "
                    "differs, which PTXBench does not use): kept once",
                    set.lines.size() - set.unique.size(), set.lines.size()));
  return set;
}

/// The shown workloads: --shown-workload (an index or a uuid), else the definition's ptxbench.shown tag,
/// else the first; --all-shown shows every one.
util::Expected<ShownOrder> shown_order(const ImportContext &c, const WorkloadSet &set) {
  ShownOrder out;
  out.first = set.unique.front();
  const std::string &shown = c.options.shown;
  if (!shown.empty()) {
    const bool is_index =
        std::all_of(shown.begin(), shown.end(), [](unsigned char ch) { return std::isdigit(ch) != 0; });
    std::optional<std::size_t> found;
    for (std::size_t i = 0; i < set.lines.size(); ++i)
      if (is_index ? (shown.size() < 10 && std::stoul(shown) == i) : set.lines[i].uuid == shown) found = i;
    if (!found)
      return unexpected(fmt::format("{}: shown workload '{}': no such {} ({} workloads)", c.named, shown,
                                    is_index ? "index (0-based)" : "uuid", set.lines.size()));
    out.first = set.same_as[*found];
  } else if (auto tag = shown_tag(c.d)) {
    out.shown_count = std::clamp<std::size_t>(*tag, 1, set.unique.size());
  }
  if (c.options.all_shown) out.shown_count = set.unique.size();
  out.order.push_back(out.first);
  for (std::size_t u : set.unique)
    if (u != out.first) out.order.push_back(u);
  return out;
}

/// Their scalar inputs' values: one value each across every workload.
util::Expected<std::map<std::string, double>> scalar_values(const ImportContext &c,
                                                            const std::vector<ParsedWorkload> &lines) {
  std::map<std::string, double> out;
  for (const auto &t : c.d.inputs) {
    if (!t.is_scalar()) continue;
    std::optional<double> value;
    for (const auto &w : lines) {
      const auto it = w.scalars.find(t.name);
      if (it == w.scalars.end()) continue;
      if (value && *value != it->second)
        return unexpected(
            fmt::format("{}: workloads give inputs.{} different values ({:.9g} and {:.9g}); a PTXBench "
                        "scalar has one value for every workload",
                        c.named, t.name, *value, it->second));
      value = it->second;
    }
    if (value) out[t.name] = *value;
  }
  return out;
}

/// One variable symbol's range: the constraints' bounds where stated, else the span of the workloads.
util::Expected<SymbolRange> symbol_range(const ImportContext &c, const WorkloadSet &set,
                                         const std::string &sym,
                                         const std::map<std::string, SymbolRange> &stated, int given) {
  std::int64_t lo = INT64_MAX, hi = 0, g = 0;
  for (std::size_t u : set.unique) {
    const std::int64_t v = set.lines[u].symbols.at(sym);
    lo = std::min(lo, v);
    hi = std::max(hi, v);
    g = std::gcd(g, v);
  }
  SymbolRange r{lo, hi, g > 1 ? g : 1};
  if (auto it = stated.find(sym); it != stated.end()) {
    if (given & 1) r.min = it->second.min;
    if (given & 2) r.max = it->second.max;
    r.multiple_of = (given & 4) ? it->second.multiple_of : 1;  // stated bounds without a multiple: any value
  }
  for (std::size_t u : set.unique) {
    const ParsedWorkload &w = set.lines[u];
    if (!r.contains(w.symbols.at(sym)))
      return unexpected(
          fmt::format("{}: workloads[{}] (uuid {}): {} = {} lies outside the constraints' range "
                      "{}..{} (multiple of {})",
                      c.named, w.index, w.uuid, sym, w.symbols.at(sym), r.min, r.max, r.multiple_of));
  }
  if (r.min < 1 || r.min > r.max)
    return unexpected(fmt::format("{}: constraints give {} the empty or non-positive range {}..{}", c.named,
                                  sym, r.min, r.max));
  return r;
}

/// Ranges: stated by constraints, else spanned by the workloads.
util::Expected<std::map<std::string, SymbolRange>> symbol_ranges(const ImportContext &c,
                                                                 const WorkloadSet &set) {
  std::map<std::string, int> given;
  auto stated = constraint_ranges(c.d, c.symbols, given);
  if (!stated) return unexpected(fmt::format("{}: {}", c.named, stated.error()));
  std::map<std::string, SymbolRange> ranges;
  for (const auto &sym : c.var_symbols) {
    auto r = symbol_range(c, set, sym, *stated, given[sym]);
    if (!r) return unexpected(r.error());
    ranges[sym] = *r;
  }
  return ranges;
}

/// Family checks that need the values: the attention reference's head dims.
util::Expected<void> check_head_dims(const ImportContext &c, const WorkloadSet &set) {
  if (c.m.family == Family::gemm) return {};
  for (std::size_t u : set.unique) {
    const std::int64_t dim = set.lines[u].symbols.at("D");
    if (dim != 64 && dim != 128 && dim != 256)
      return unexpected(
          fmt::format("{}: workloads[{}] (uuid {}): head_dim {}; the PTXBench attention reference "
                      "supports 64, 128 and 256",
                      c.named, set.lines[u].index, set.lines[u].uuid, dim));
  }
  return {};
}

/// The task document being made from the template's: its description is set last.
struct TaskDocument {
  json task;
  std::string description;
  bool retyped = false;  ///< an f16 GEMM from a bf16 template: "bf16" in the prose reads "f16"
  std::string retype(std::string text) const {
    return retyped ? replace_all(std::move(text), "bf16", "f16") : text;
  }
};

/// Their tensor for the template's tensor `name`, or nullptr.
const TensorDef *counterpart_of(const Definition &d, const std::string &name) {
  const TensorDef *theirs = nullptr;
  for (const auto *list : {&d.inputs, &d.outputs})
    for (const auto &x : *list)
      if (lower(x.name) == lower(name) ||
          (name == "O" && std::find(std::begin(kO), std::end(kO), lower(x.name)) != std::end(kO)) ||
          (name == "dO" && std::find(std::begin(kDO), std::end(kDO), lower(x.name)) != std::end(kDO)))
        theirs = &x;
  return theirs;
}

/// The tensors take the definition's dtypes; their and the targets' prose is retyped.
util::Expected<void> adopt_tensors(const ImportContext &c, TaskDocument &doc) {
  for (auto &t : doc.task["tensors"]) {
    const std::string name = t["name"];
    const TensorDef *theirs = counterpart_of(c.d, name);
    if (!theirs)
      return unexpected(
          fmt::format("{}: the template's tensor {} has no counterpart in the definition", c.named, name));
    t["dtype"] = to_string(*dtype_of(theirs->dtype));
    t["description"] = doc.retype(t["description"].get<std::string>());
  }
  for (auto &target : doc.task["targets"])
    target["description"] = doc.retype(target["description"].get<std::string>());
  return {};
}

/// The template's tolerance reasons quote its own shapes and dtype: say so where they differ.
void state_tolerance_provenance(const ImportContext &c, const util::SymbolTable &shown_symbols,
                                TaskDocument &doc) {
  std::vector<std::string> differing;
  for (const auto &s : c.templ.symbols) {
    const std::int64_t theirs = shown_symbols.at(s), template_value = c.templ.workloads.front().symbols.at(s);
    if (theirs != template_value) differing.push_back(fmt::format("{}={}", s, template_value));
  }
  if (differing.empty() && !doc.retyped) return;
  const std::string provenance =
      fmt::format("Tolerances of the PTXBench task {} ({}{}{}); its reasoning: ", c.templ.id,
                  doc.retyped ? "bf16 there; an f16 output (11 significant bits) is rounded more finely, so "
                                "a correct kernel passes them with more margin"
                              : "",
                  doc.retyped && !differing.empty() ? "; " : "",
                  differing.empty() ? "" : "figures quoted for its " + util::join(differing, " "));
  for (auto &[name, tol] : doc.task["tolerances"].items())
    if (!tol["reason"].get<std::string>().empty())
      tol["reason"] = provenance + tol["reason"].get<std::string>();
  if (doc.task.contains("tolerance_note"))
    doc.task["tolerance_note"] = provenance + doc.task["tolerance_note"].get<std::string>();
}

/// The softmax scale: the workloads' sm_scale, else 1/sqrt(head_dim) for a constant head_dim; a value other
/// than that default is stated in the prose.
util::Expected<double> softmax_scale(const ImportContext &c, const std::map<std::string, double> &scalars,
                                     json &scalar, TaskDocument &doc) {
  std::optional<double> value;
  const TensorDef *scale = find(c.d.inputs, {"sm_scale", "softmax_scale", "scale"});
  if (scale && scalars.count(scale->name)) value = scalars.at(scale->name);
  const auto dim =
      std::find_if(c.symbols.begin(), c.symbols.end(), [](const auto &p) { return p.second == "D"; });
  const Axis &head_dim = c.d.axes.at(dim->first);
  if (!value) {
    if (!head_dim.is_const)
      return unexpected(
          fmt::format("{}: the softmax scale has no value in the workloads and head_dim varies, "
                      "so 1/sqrt(head_dim) is not one value",
                      c.named));
    value = 1.0 / std::sqrt(static_cast<double>(head_dim.value));
  }
  const bool is_default =
      head_dim.is_const && std::abs(*value * std::sqrt(static_cast<double>(head_dim.value)) - 1.0) < 1e-6;
  if (!is_default) {
    const std::string equal = fmt::format("equal to {:.9g}", *value);
    doc.description = replace_all(doc.description, "equal to 1/sqrt(D)", equal);
    scalar["description"] =
        replace_all(scalar["description"].get<std::string>(), "1/sqrt(D)", fmt::format("{:.9g}", *value));
  }
  return *value;
}

/// Every template scalar takes its value from the workloads.
util::Expected<void> fill_scalars(const ImportContext &c, const std::map<std::string, double> &scalars,
                                  TaskDocument &doc) {
  for (auto &s : doc.task["scalars"]) {
    const std::string name = s["name"];
    if (name == "softmax_scale") {
      auto value = softmax_scale(c, scalars, s, doc);
      if (!value) return unexpected(value.error());
      s["value"] = *value;
    } else if (scalars.count(name)) {
      s["value"] = scalars.at(name);
    } else {
      return unexpected(
          fmt::format("{}: inputs.{}: no workload gives its value ({{\"type\": \"scalar\", \"value\": "
                      "...}})",
                      c.named, name));
    }
  }
  return {};
}

/// Workloads (shown, hidden), ranges and tags.
void set_workloads_ranges_tags(const ImportContext &c, const WorkloadSet &set, const ShownOrder &shown,
                               const std::map<std::string, SymbolRange> &ranges, json &task) {
  json shown_list = json::array(), hidden = json::array();
  for (std::size_t i = 0; i < shown.order.size(); ++i) {
    const ParsedWorkload &w = set.lines[shown.order[i]];
    json symbols_json = json::object();
    for (const auto &s : c.templ.symbols) symbols_json[s] = w.symbols.at(s);
    (i < shown.shown_count ? shown_list : hidden)
        .push_back({{"name", workload_name(c.templ, w.symbols, c.var_symbols)}, {"symbols", symbols_json}});
  }
  task["workloads"] = shown_list;
  if (!hidden.empty()) task["hidden_workloads"] = hidden;
  if (!ranges.empty()) {
    json r = json::object();
    for (const auto &[sym, range] : ranges)
      r[sym] = {{"min", range.min}, {"max", range.max}, {"multiple_of", range.multiple_of}};
    task["ranges"] = r;
  }
  json tags = {{"suite", "imported"},
               {"source", "flashinfer-trace"},
               {"flashinfer_definition", c.d.name},
               {"flashinfer_op_type", c.d.op_type},
               {"template", c.templ.id}};
  if (auto layout = c.templ.tags.find("layout"); layout != c.templ.tags.end())
    tags["layout"] = layout->second;
  if (!c.d.description.empty()) tags["flashinfer_description"] = c.d.description;
  task["tags"] = tags;
}

/// The task document: the template's, with what the definition says put in.
util::Expected<json> task_document(const ImportContext &c, const WorkloadSet &set, const ShownOrder &shown,
                                   const std::map<std::string, double> &scalars,
                                   const std::map<std::string, SymbolRange> &ranges) {
  TaskDocument doc;
  doc.task = c.templ.to_json();
  doc.task.erase("hidden_workloads");
  doc.task.erase("ranges");
  doc.task["id"] = c.options.id.empty() ? "fi_" + sanitized_id(c.d.name) : c.options.id;
  doc.task["title"] = title_for(c.d, c.m, c.templ, c.symbols);
  doc.retyped = c.m.family == Family::gemm && c.m.input_dtype == DType::f16;
  doc.description = doc.retype(doc.task["description"].get<std::string>());
  if (auto adopted = adopt_tensors(c, doc); !adopted) return unexpected(adopted.error());
  state_tolerance_provenance(c, set.lines[shown.first].symbols, doc);
  if (auto filled = fill_scalars(c, scalars, doc); !filled) return unexpected(filled.error());
  if (!c.d.description.empty() && c.d.description != c.templ.description)
    doc.description +=
        fmt::format("\n\nFrom the FlashInfer-Trace definition '{}': {}", c.d.name, c.d.description);
  doc.task["description"] = doc.description;
  set_workloads_ranges_tags(c, set, shown, ranges, doc.task);
  return doc.task;
}

/// The loader is the judge of validity: a task that does not load is an error here, not later.
util::Expected<void> check_loads(const json &task, const std::string &named) {
  const std::string id = task["id"];
  util::TempDir dir("ptxbench-import");
  const auto file = dir.path() / (id + ".json");
  if (auto w = util::write_file_atomic(file, task_file_text(task)); !w)
    return unexpected(fmt::format("cannot write the imported task for checking: {}", w.error()));
  if (auto loaded = load_task_file(file); !loaded)
    return unexpected(fmt::format("{}: the imported task does not load: {}", named,
                                  replace_all(loaded.error(), file.string(), id + ".json")));
  return {};
}

}  // namespace

util::Expected<Imported> import_definition(const json &definition, const std::vector<json> &workload_lines,
                                           const Task &templ, const ImportOptions &options) {
  auto read = read_definition(definition);
  if (!read) return unexpected("definition: " + read.error());
  const Definition &d = *read;
  auto mapping = classify_definition(d);
  if (!mapping) return unexpected(mapping.error());
  const std::string named = fmt::format("definition '{}'", d.name);
  if (auto fits = check_template(*mapping, templ, named); !fits) return unexpected(fits.error());
  ImportContext c{d, *mapping, templ, options, named, symbol_names(d, mapping->family), {}};
  Imported result;
  auto vars = variable_symbols(c, result.notes);
  if (!vars) return unexpected(vars.error());
  c.var_symbols = std::move(*vars);
  auto lines = read_workload_lines(c, workload_lines);
  if (!lines) return unexpected(lines.error());
  const WorkloadSet set = deduplicated(std::move(*lines), result.notes);
  auto shown = shown_order(c, set);
  if (!shown) return unexpected(shown.error());
  auto scalars = scalar_values(c, set.lines);
  if (!scalars) return unexpected(scalars.error());
  auto ranges = symbol_ranges(c, set);
  if (!ranges) return unexpected(ranges.error());
  if (auto dims = check_head_dims(c, set); !dims) return unexpected(dims.error());
  auto task = task_document(c, set, *shown, *scalars, *ranges);
  if (!task) return unexpected(task.error());
  if (auto loads = check_loads(*task, named); !loads) return unexpected(loads.error());
  result.task = std::move(*task);
  return result;
}

}  // namespace ptxbench::tasks::flashinfer
