// FlashInfer-Trace interchange: the task file's field order, classification, template candidates and
// workload lines; import in flashinfer_import.cpp, export in flashinfer_export.cpp.
#include "tasks/flashinfer.hpp"

#include <string>
#include <vector>

#include <fmt/core.h>

#include "tasks/detail/flashinfer_schema.hpp"
#include "tasks/detail/schema.hpp"
#include "util/strings.hpp"

namespace ptxbench::tasks::flashinfer {

using nlohmann::json;
using nlohmann::ordered_json;
using util::unexpected;
using namespace detail;

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

}  // namespace ptxbench::tasks::flashinfer
