// FlashInfer-Trace export: one of our tasks as a definition and its workloads.
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

using detail::lower;
using detail::their_dtype;
using nlohmann::json;
using nlohmann::ordered_json;
using util::unexpected;

// ---------------------------------------------------------------------------------------------------------
// Export.

namespace {

std::string their_axis(const Task &t, const std::string &symbol) {
  if (t.family == Family::gemm) return symbol;
  static const std::map<std::string, std::string> names = {
      {"B", "batch_size"}, {"H", "num_heads"}, {"S", "seq_len"}, {"D", "head_dim"}};
  const auto it = names.find(symbol);
  return it == names.end() ? symbol : it->second;
}

std::string their_tensor(const Task &t, const std::string &name) {
  if (t.family == Family::gemm) return name;
  static const std::map<std::string, std::string> fwd = {{"O", "output"}}, bwd = {{"O", "o"}, {"dO", "do"}};
  const auto &table = t.family == Family::attention_fwd ? fwd : bwd;
  const auto it = table.find(name);
  return it == table.end() ? lower(name) : it->second;
}

std::string their_scalar(const std::string &name) {
  return name == "softmax_scale" ? "sm_scale" : name;
}

std::string reference_source(const Task &t, const std::vector<std::string> &args) {
  const std::string signature = util::join(args, ", ");
  if (t.family == Family::gemm) {
    const Tensor *c = t.find_tensor("C");
    const std::string out = c && c->dtype == DType::f16 ? "torch.float16" : "torch.bfloat16";
    const bool scaled = t.find_scalar("scale_a") && t.find_scalar("scale_b");
    return fmt::format(
        "import torch\n\n\n@torch.no_grad()\ndef run({}):\n"
        "    # C[m, n] = sum over k of A[m, k] * B[n, k], accumulated in fp32, rounded once.\n"
        "    acc = torch.matmul(A.to(torch.float32), B.to(torch.float32).T)\n"
        "{}"
        "    return acc.to({})\n",
        signature, scaled ? "    acc = acc * (scale_a * scale_b)\n" : "", out);
  }
  const std::string mask =
      t.causal ? "    n = scores.shape[-1]\n"
                 "    keep = torch.ones(n, n, dtype=torch.bool, device=scores.device).tril()\n"
                 "    scores = scores.masked_fill(~keep, float(\"-inf\"))\n"
               : "";
  if (t.family == Family::attention_fwd)
    return fmt::format(
        "import torch\n\n\n@torch.no_grad()\ndef run({}):\n"
        "    # q, k, v: [batch_size, num_heads, seq_len, head_dim]; lse is the natural-log log-sum-exp.\n"
        "    scores = torch.matmul(q.float(), k.float().transpose(-1, -2)) * sm_scale\n"
        "{}"
        "    lse = torch.logsumexp(scores, dim=-1)\n"
        "    probs = torch.exp(scores - lse.unsqueeze(-1))\n"
        "    output = torch.matmul(probs, v.float()).to(torch.bfloat16)\n"
        "    return output, lse\n",
        signature, mask);
  return fmt::format(
      "import torch\n\n\n@torch.no_grad()\ndef run({}):\n"
      "    # All tensors [batch_size, num_heads, seq_len, head_dim] except lse [batch_size, num_heads, "
      "seq_len]\n"
      "    # (natural log, from the forward pass that produced o).\n"
      "    qf, kf, vf, of, dof = q.float(), k.float(), v.float(), o.float(), do.float()\n"
      "    scores = torch.matmul(qf, kf.transpose(-1, -2)) * sm_scale\n"
      "{}"
      "    probs = torch.exp(scores - lse.unsqueeze(-1))\n"
      "    dv = torch.matmul(probs.transpose(-1, -2), dof)\n"
      "    dprobs = torch.matmul(dof, vf.transpose(-1, -2))\n"
      "    delta = (dof * of).sum(dim=-1, keepdim=True)\n"
      "    dscores = probs * (dprobs - delta)\n"
      "    dq = torch.matmul(dscores, kf) * sm_scale\n"
      "    dk = torch.matmul(dscores.transpose(-1, -2), qf) * sm_scale\n"
      "    return dq.to(torch.bfloat16), dk.to(torch.bfloat16), dv.to(torch.bfloat16)\n",
      signature, mask);
}

/// A stable UUID-shaped identifier for a workload (the schema asks for a unique string).
std::string workload_uuid(const std::string &task_id, const std::string &workload) {
  const std::string a = util::fnv1a64_hex("ptxbench/" + task_id + "/" + workload);
  const std::string b = util::fnv1a64_hex(workload + "/" + task_id + "/ptxbench");
  const std::string h = a + b;  // 32 hex digits
  return fmt::format("{}-{}-{}-{}-{}", h.substr(0, 8), h.substr(8, 4), h.substr(12, 4), h.substr(16, 4),
                     h.substr(20, 12));
}

/// Every workload, shown then hidden.
std::vector<const Workload *> all_workloads(const Task &t) {
  std::vector<const Workload *> all;
  for (const auto &w : t.workloads) all.push_back(&w);
  for (const auto &w : t.hidden_workloads) all.push_back(&w);
  return all;
}

/// The symbols that are var axes: those with a range, or whose value differs between workloads.
std::set<std::string> variable_symbols(const Task &t, const std::vector<const Workload *> &all) {
  std::set<std::string> variable;
  for (const auto &s : t.symbols) {
    if (t.ranges.count(s)) variable.insert(s);
    for (const auto *w : all)
      if (w->symbols.at(s) != all.front()->symbols.at(s)) variable.insert(s);
  }
  return variable;
}

/// The definition's inputs and outputs, and the reference's argument names (inputs, then scalars).
struct TensorSpecs {
  ordered_json inputs = ordered_json::object(), outputs = ordered_json::object();
  std::vector<std::string> args;
};

util::Expected<TensorSpecs> tensor_specs(const Task &t, const std::string &named) {
  TensorSpecs out;
  for (std::size_t i = 0; i < t.tensors.size(); ++i) {
    const Tensor &x = t.tensors[i];
    ordered_json shape = ordered_json::array();
    for (std::size_t dim = 0; dim < x.shape.size(); ++dim) {
      if (std::find(t.symbols.begin(), t.symbols.end(), x.shape[dim]) == t.symbols.end())
        return unexpected(
            fmt::format("{}: tensors[{}].shape[{}] '{}' is an expression; a FlashInfer-Trace shape "
                        "lists axis names",
                        named, i, dim, x.shape[dim]));
      shape.push_back(their_axis(t, x.shape[dim]));
    }
    ordered_json spec = {{"shape", shape}, {"dtype", their_dtype(x.dtype)}};
    if (!x.description.empty()) spec["description"] = x.description;
    const std::string name = their_tensor(t, x.name);
    if (x.role == TensorRole::input) {
      out.inputs[name] = spec;
      out.args.push_back(name);
    } else {
      out.outputs[name] = spec;
    }
  }
  for (std::size_t i = 0; i < t.scalars.size(); ++i) {
    const Scalar &s = t.scalars[i];
    static const std::map<std::string, std::string> types = {
        {"f32", "float32"}, {"s32", "int32"}, {"s64", "int64"}};
    const auto type = types.find(s.type);
    if (type == types.end())
      return unexpected(
          fmt::format("{}: scalars[{}] '{}' of type {}: the schema has no such dtype (float32, "
                      "int32, int64)",
                      named, i, s.name, s.type));
    ordered_json spec = {{"shape", nullptr}, {"dtype", type->second}};
    if (!s.description.empty()) spec["description"] = s.description;
    out.inputs[their_scalar(s.name)] = spec;
    out.args.push_back(their_scalar(s.name));
  }
  return out;
}

/// The ranges as constraints: "lo <= X <= hi" and "X % m == 0".
ordered_json constraints_of(const Task &t) {
  ordered_json constraints = ordered_json::array();
  for (const auto &[sym, r] : t.ranges) {
    const std::string axis = their_axis(t, sym);
    constraints.push_back(fmt::format("{} <= {} <= {}", r.min, axis, r.max));
    if (r.multiple_of > 1) constraints.push_back(fmt::format("{} % {} == 0", axis, r.multiple_of));
  }
  return constraints;
}

/// The stage tag, and how many workloads are shown when that is not one.
ordered_json definition_tags(const Task &t) {
  ordered_json tags = ordered_json::array();
  if (t.family == Family::attention_fwd) tags.push_back("stage:prefill");
  if (t.family == Family::attention_bwd) tags.push_back("stage:backward");
  if (t.workloads.size() != 1) tags.push_back(fmt::format("ptxbench.shown:{}", t.workloads.size()));
  return tags;
}

/// One workload line: the var axes' values, random tensors and the scalars' values.
ordered_json workload_line(const Task &t, const Workload &w, const std::set<std::string> &variable,
                           const std::string &definition) {
  ordered_json axes_values = ordered_json::object();
  for (const auto &s : t.symbols)
    if (variable.count(s)) axes_values[their_axis(t, s)] = w.symbols.at(s);
  ordered_json input_specs = ordered_json::object();
  for (const auto &x : t.tensors)
    if (x.role == TensorRole::input) input_specs[their_tensor(t, x.name)] = {{"type", "random"}};
  for (const auto &s : t.scalars)
    input_specs[their_scalar(s.name)] = {{"type", "scalar"}, {"value", s.value}};
  return {
      {"definition", definition},
      {"workload", {{"uuid", workload_uuid(t.id, w.name)}, {"axes", axes_values}, {"inputs", input_specs}}},
      {"solution", nullptr},
      {"evaluation", nullptr}};
}

}  // namespace

std::string Exported::workloads_jsonl() const {
  std::string out;
  for (const auto &w : workloads) out += w.dump() + "\n";
  return out;
}

util::Expected<Exported> export_task(const Task &t) {
  const std::string named = fmt::format("task '{}'", t.id);
  const std::vector<const Workload *> all = all_workloads(t);
  const std::set<std::string> variable = variable_symbols(t, all);
  ordered_json axes = ordered_json::object();
  for (const auto &s : t.symbols) {
    if (variable.count(s))
      axes[their_axis(t, s)] = {{"type", "var"}};
    else
      axes[their_axis(t, s)] = {{"type", "const"}, {"value", all.front()->symbols.at(s)}};
  }
  auto specs = tensor_specs(t, named);
  if (!specs) return unexpected(specs.error());
  const ordered_json constraints = constraints_of(t);
  const auto tag = [&](const char *key) {
    const auto it = t.tags.find(key);
    return it == t.tags.end() ? std::string() : it->second;
  };
  const std::string name = tag("flashinfer_definition").empty() ? t.id : tag("flashinfer_definition");
  const std::string description =
      tag("flashinfer_description").empty() ? t.description : tag("flashinfer_description");
  const ordered_json tags = definition_tags(t);
  Exported out;
  out.definition = {{"name", name},
                    {"description", description},
                    {"op_type", t.family == Family::gemm ? "gemm" : "mha_dense"},
                    {"tags", tags},
                    {"axes", axes}};
  if (!constraints.empty()) out.definition["constraints"] = constraints;
  out.definition["inputs"] = specs->inputs;
  out.definition["outputs"] = specs->outputs;
  out.definition["reference"] = reference_source(t, specs->args);
  if (tags.empty()) out.definition.erase("tags");
  for (const auto *w : all) out.workloads.push_back(workload_line(t, *w, variable, name));
  return out;
}

}  // namespace ptxbench::tasks::flashinfer
