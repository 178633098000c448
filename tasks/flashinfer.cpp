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
#include "tasks/detail/schema.hpp"
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

}  // namespace

std::string task_file_text(const json &task) {
  // The order of the committed task files (and of Task::to_json's fields), for people reading the file.
  static const char *const kTop[] = {"id",          "family",
                                     "arch",        "title",
                                     "description", "tensors",
                                     "scalars",     "symbols",
                                     "workloads",   "hidden_workloads",
                                     "ranges",      "targets",
                                     "reference",   "causal",
                                     "tolerances",  "tolerance_note",
                                     "flops",       "bytes",
                                     "tags"};
  static const char *const kTensor[] = {"name", "dtype", "shape", "role", "distribution", "description"};
  static const char *const kOther[] = {
      "name", "type", "value",  "ptx_mnemonic", "sass_families", "description", "symbols",
      "atol", "rtol", "reason", "min",          "max",           "multiple_of"};
  const auto ordered = [](const json &object, const auto &keys) {
    ordered_json out = ordered_json::object();
    for (const char *k : keys)
      if (object.contains(k)) out[k] = ordered_json::parse(object.at(k).dump());
    for (const auto &[k, v] : object.items())
      if (!out.contains(k)) out[k] = ordered_json::parse(v.dump());
    return out;
  };
  ordered_json out = ordered(task, kTop);
  if (task.contains("tensors")) {
    out["tensors"] = ordered_json::array();
    for (const auto &t : task["tensors"]) out["tensors"].push_back(ordered(t, kTensor));
  }
  for (const char *list : {"scalars", "workloads", "hidden_workloads", "targets"})
    if (task.contains(list) && task[list].is_array()) {
      out[list] = ordered_json::array();
      for (const auto &item : task[list]) {
        ordered_json o = ordered(item, kOther);
        if (item.contains("symbols") && task.contains("symbols")) {
          ordered_json syms = ordered_json::object();
          for (const auto &s : task["symbols"])
            if (item["symbols"].contains(s.get<std::string>()))
              syms[s.get<std::string>()] = item["symbols"][s.get<std::string>()];
          o["symbols"] = syms;
        }
        out[list].push_back(o);
      }
    }
  for (const char *map : {"tolerances", "ranges"})
    if (task.contains(map) && task[map].is_object())
      for (const auto &[k, v] : task[map].items()) out[map][k] = ordered(v, kOther);
  return out.dump(2) + "\n";
}

util::Expected<Mapping> classify(const json &definition) {
  auto d = read_definition(definition);
  if (!d) return unexpected("definition: " + d.error());
  return classify_definition(*d);
}

std::vector<std::string> template_candidates(const Mapping &m) {
  if (m.family == Family::gemm)
    return {m.input_dtype == DType::e4m3 ? "gemm_fp8_n7168_k5120" : "gemm_n7168_k5120"};
  const std::string base = m.family == Family::attention_fwd ? "mha_fwd" : "mha_bwd";
  const std::string causal = m.causal ? "_causal" : "";
  std::vector<std::string> out;
  if (m.head_dim && m.head_dim != 128) out.push_back(fmt::format("{}_d{}{}", base, m.head_dim, causal));
  out.push_back(fmt::format("{}_d128{}", base, causal));
  return out;
}

util::Expected<std::vector<json>> parse_workloads_jsonl(std::string_view text, std::string_view source) {
  std::vector<json> out;
  std::size_t line_no = 0;
  while (!text.empty()) {
    ++line_no;
    const std::size_t end = text.find('\n');
    const std::string_view line = util::trim(text.substr(0, end));
    text = end == std::string_view::npos ? std::string_view() : text.substr(end + 1);
    if (line.empty()) continue;
    auto parsed = tasks::detail::parse_json_strict(std::string(line));
    if (!parsed.error.empty()) return unexpected(fmt::format("{}:{}: {}", source, line_no, parsed.error));
    out.push_back(std::move(parsed.value));
  }
  return out;
}

util::Expected<Imported> import_definition(const json &definition, const std::vector<json> &workload_lines,
                                           const Task &templ, const ImportOptions &options) {
  auto read = read_definition(definition);
  if (!read) return unexpected("definition: " + read.error());
  const Definition &d = *read;
  auto mapping = classify_definition(d);
  if (!mapping) return unexpected(mapping.error());
  const Mapping &m = *mapping;
  const std::string named = fmt::format("definition '{}'", d.name);
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
  Imported result;
  const auto symbols = symbol_names(d, m.family);
  std::set<std::string> var_symbols;
  for (const auto &[axis, value] : d.axes) {
    const auto it = symbols.find(axis);
    if (it == symbols.end()) {
      if (!value.is_const)
        return unexpected(
            fmt::format("{}: axes.{}: a variable axis of no mapped tensor dimension", named, axis));
      result.notes.push_back(fmt::format(
          "axes.{} (const {}) is not a dimension of the mapped tensors: ignored", axis, value.value));
      continue;
    }
    if (!value.is_const) var_symbols.insert(it->second);
  }

  // Workloads: every line read and checked, duplicates (same symbol values) dropped.
  std::vector<ParsedWorkload> lines;
  for (std::size_t i = 0; i < workload_lines.size(); ++i) {
    auto w = read_workload(workload_lines[i], i, d, symbols, options);
    if (!w) return unexpected(fmt::format("{}: {}", named, w.error()));
    lines.push_back(std::move(*w));
  }
  if (lines.empty()) {
    if (!var_symbols.empty()) {
      std::vector<std::string> vars;
      for (const auto &[axis, a] : d.axes)
        if (!a.is_const) vars.push_back(axis);
      return unexpected(
          fmt::format("{}: axes {} are variable: give the workloads (a .jsonl of Workload lines) for "
                      "their values",
                      named, util::join(vars, ", ")));
    }
    ParsedWorkload only;
    only.uuid = "(constants)";
    for (const auto &[axis, sym] : symbols) only.symbols[sym] = d.axes.at(axis).value;
    lines.push_back(std::move(only));
  }
  std::vector<std::size_t> unique;  // indices into lines
  std::vector<std::size_t> same_as(lines.size());
  for (std::size_t i = 0; i < lines.size(); ++i) {
    auto it = std::find_if(unique.begin(), unique.end(),
                           [&](std::size_t u) { return lines[u].symbols == lines[i].symbols; });
    if (it == unique.end()) {
      same_as[i] = i;
      unique.push_back(i);
    } else {
      same_as[i] = *it;
    }
  }
  if (unique.size() < lines.size())
    result.notes.push_back(
        fmt::format("{} of {} workloads repeat an earlier one's axis values (their input data "
                    "differs, which PTXBench does not use): kept once",
                    lines.size() - unique.size(), lines.size()));

  // Which are shown.
  std::size_t shown_count = 1, first = unique.front();
  if (!options.shown.empty()) {
    const bool is_index = std::all_of(options.shown.begin(), options.shown.end(),
                                      [](unsigned char c) { return std::isdigit(c) != 0; });
    std::optional<std::size_t> found;
    for (std::size_t i = 0; i < lines.size(); ++i)
      if (is_index ? (options.shown.size() < 10 && std::stoul(options.shown) == i)
                   : lines[i].uuid == options.shown)
        found = i;
    if (!found)
      return unexpected(fmt::format("{}: shown workload '{}': no such {} ({} workloads)", named,
                                    options.shown, is_index ? "index (0-based)" : "uuid", lines.size()));
    first = same_as[*found];
  } else if (auto tag = shown_tag(d)) {
    shown_count = std::clamp<std::size_t>(*tag, 1, unique.size());
  }
  if (options.all_shown) shown_count = unique.size();
  std::vector<std::size_t> order{first};
  for (std::size_t u : unique)
    if (u != first) order.push_back(u);

  // Scalars: one value each across every workload.
  std::map<std::string, double> scalar_values;
  for (const auto &t : d.inputs) {
    if (!t.is_scalar()) continue;
    std::optional<double> value;
    for (const auto &w : lines) {
      const auto it = w.scalars.find(t.name);
      if (it == w.scalars.end()) continue;
      if (value && *value != it->second)
        return unexpected(
            fmt::format("{}: workloads give inputs.{} different values ({:.9g} and {:.9g}); a PTXBench "
                        "scalar has one value for every workload",
                        named, t.name, *value, it->second));
      value = it->second;
    }
    if (value) scalar_values[t.name] = *value;
  }

  // Ranges: stated by constraints, else spanned by the workloads.
  std::map<std::string, int> given;
  auto stated = constraint_ranges(d, symbols, given);
  if (!stated) return unexpected(fmt::format("{}: {}", named, stated.error()));
  std::map<std::string, SymbolRange> ranges;
  for (const auto &sym : var_symbols) {
    std::int64_t lo = INT64_MAX, hi = 0, g = 0;
    for (std::size_t u : unique) {
      const std::int64_t v = lines[u].symbols.at(sym);
      lo = std::min(lo, v);
      hi = std::max(hi, v);
      g = std::gcd(g, v);
    }
    SymbolRange r{lo, hi, g > 1 ? g : 1};
    if (auto it = stated->find(sym); it != stated->end()) {
      const int what = given[sym];
      if (what & 1) r.min = it->second.min;
      if (what & 2) r.max = it->second.max;
      r.multiple_of = (what & 4) ? it->second.multiple_of : 1;  // stated bounds without a multiple: any value
    }
    for (std::size_t u : unique)
      if (!r.contains(lines[u].symbols.at(sym)))
        return unexpected(
            fmt::format("{}: workloads[{}] (uuid {}): {} = {} lies outside the constraints' range "
                        "{}..{} (multiple of {})",
                        named, lines[u].index, lines[u].uuid, sym, lines[u].symbols.at(sym), r.min, r.max,
                        r.multiple_of));
    if (r.min < 1 || r.min > r.max)
      return unexpected(fmt::format("{}: constraints give {} the empty or non-positive range {}..{}", named,
                                    sym, r.min, r.max));
    ranges[sym] = r;
  }

  // Family checks that need the values.
  if (m.family != Family::gemm)
    for (std::size_t u : unique) {
      const std::int64_t dim = lines[u].symbols.at("D");
      if (dim != 64 && dim != 128 && dim != 256)
        return unexpected(
            fmt::format("{}: workloads[{}] (uuid {}): head_dim {}; the PTXBench attention reference "
                        "supports 64, 128 and 256",
                        named, lines[u].index, lines[u].uuid, dim));
    }

  // The task document: the template's, with what the definition says put in.
  json task = templ.to_json();
  task.erase("hidden_workloads");
  task.erase("ranges");
  task["id"] = options.id.empty() ? "fi_" + sanitized_id(d.name) : options.id;
  task["title"] = title_for(d, m, templ, symbols);
  std::string description = task["description"].get<std::string>();
  const bool retyped = m.family == Family::gemm && m.input_dtype == DType::f16;
  auto retype = [&](std::string text) {
    return retyped ? replace_all(std::move(text), "bf16", "f16") : text;
  };
  description = retype(description);
  for (auto &t : task["tensors"]) {
    const std::string name = t["name"];
    const TensorDef *theirs = nullptr;
    for (const auto *list : {&d.inputs, &d.outputs})
      for (const auto &x : *list)
        if (lower(x.name) == lower(name) ||
            (name == "O" && std::find(std::begin(kO), std::end(kO), lower(x.name)) != std::end(kO)) ||
            (name == "dO" && std::find(std::begin(kDO), std::end(kDO), lower(x.name)) != std::end(kDO)))
          theirs = &x;
    if (!theirs)
      return unexpected(
          fmt::format("{}: the template's tensor {} has no counterpart in the definition", named, name));
    t["dtype"] = to_string(*dtype_of(theirs->dtype));
    t["description"] = retype(t["description"].get<std::string>());
  }
  for (auto &target : task["targets"])
    target["description"] = retype(target["description"].get<std::string>());
  // The template's tolerance reasons quote its own shapes and dtype: say so where they differ.
  std::vector<std::string> differing;
  for (const auto &s : templ.symbols) {
    const std::int64_t theirs = lines[first].symbols.at(s),
                       template_value = templ.workloads.front().symbols.at(s);
    if (theirs != template_value) differing.push_back(fmt::format("{}={}", s, template_value));
  }
  std::string provenance;
  if (!differing.empty() || retyped)
    provenance =
        fmt::format("Tolerances of the PTXBench task {} ({}{}{}); its reasoning: ", templ.id,
                    retyped ? "bf16 there; an f16 output (11 significant bits) is rounded more finely, so "
                              "a correct kernel passes them with more margin"
                            : "",
                    retyped && !differing.empty() ? "; " : "",
                    differing.empty() ? "" : "figures quoted for its " + util::join(differing, " "));
  if (!provenance.empty()) {
    for (auto &[name, tol] : task["tolerances"].items())
      if (!tol["reason"].get<std::string>().empty())
        tol["reason"] = provenance + tol["reason"].get<std::string>();
    if (task.contains("tolerance_note"))
      task["tolerance_note"] = provenance + task["tolerance_note"].get<std::string>();
  }
  for (auto &s : task["scalars"]) {
    const std::string name = s["name"];
    const std::string theirs = name == "softmax_scale" ? "" : name;
    std::optional<double> value;
    if (name == "softmax_scale") {
      const TensorDef *scale = find(d.inputs, {"sm_scale", "softmax_scale", "scale"});
      if (scale && scalar_values.count(scale->name)) value = scalar_values.at(scale->name);
      const auto dim =
          std::find_if(symbols.begin(), symbols.end(), [](const auto &p) { return p.second == "D"; });
      const bool d_const = d.axes.at(dim->first).is_const;
      if (!value) {
        if (!d_const)
          return unexpected(
              fmt::format("{}: the softmax scale has no value in the workloads and head_dim varies, "
                          "so 1/sqrt(head_dim) is not one value",
                          named));
        value = 1.0 / std::sqrt(static_cast<double>(d.axes.at(dim->first).value));
      }
      const bool is_default =
          d_const &&
          std::abs(*value * std::sqrt(static_cast<double>(d.axes.at(dim->first).value)) - 1.0) < 1e-6;
      if (!is_default) {
        const std::string equal = fmt::format("equal to {:.9g}", *value);
        description = replace_all(description, "equal to 1/sqrt(D)", equal);
        s["description"] =
            replace_all(s["description"].get<std::string>(), "1/sqrt(D)", fmt::format("{:.9g}", *value));
      }
    } else if (scalar_values.count(theirs)) {
      value = scalar_values.at(theirs);
    } else {
      return unexpected(
          fmt::format("{}: inputs.{}: no workload gives its value ({{\"type\": \"scalar\", \"value\": "
                      "...}})",
                      named, theirs));
    }
    s["value"] = *value;
  }
  if (!d.description.empty() && d.description != templ.description)
    description += fmt::format("\n\nFrom the FlashInfer-Trace definition '{}': {}", d.name, d.description);
  task["description"] = description;
  json shown = json::array(), hidden = json::array();
  for (std::size_t i = 0; i < order.size(); ++i) {
    const ParsedWorkload &w = lines[order[i]];
    json symbols_json = json::object();
    for (const auto &s : templ.symbols) symbols_json[s] = w.symbols.at(s);
    (i < shown_count ? shown : hidden)
        .push_back({{"name", workload_name(templ, w.symbols, var_symbols)}, {"symbols", symbols_json}});
  }
  task["workloads"] = shown;
  if (!hidden.empty()) task["hidden_workloads"] = hidden;
  if (!ranges.empty()) {
    json r = json::object();
    for (const auto &[sym, range] : ranges)
      r[sym] = {{"min", range.min}, {"max", range.max}, {"multiple_of", range.multiple_of}};
    task["ranges"] = r;
  }
  json tags = {{"suite", "imported"},
               {"source", "flashinfer-trace"},
               {"flashinfer_definition", d.name},
               {"flashinfer_op_type", d.op_type},
               {"template", templ.id}};
  if (auto layout = templ.tags.find("layout"); layout != templ.tags.end()) tags["layout"] = layout->second;
  if (!d.description.empty()) tags["flashinfer_description"] = d.description;
  task["tags"] = tags;

  // The loader is the judge of validity: a task that does not load is an error here, not later.
  const std::string id = task["id"];
  util::TempDir dir("ptxbench-import");
  const auto file = dir.path() / (id + ".json");
  if (auto w = util::write_file_atomic(file, task_file_text(task)); !w)
    return unexpected(fmt::format("cannot write the imported task for checking: {}", w.error()));
  if (auto loaded = load_task_file(file); !loaded)
    return unexpected(fmt::format("{}: the imported task does not load: {}", named,
                                  replace_all(loaded.error(), file.string(), id + ".json")));
  result.task = std::move(task);
  return result;
}

}  // namespace ptxbench::tasks::flashinfer
