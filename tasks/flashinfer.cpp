#include "tasks/flashinfer.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <map>
#include <numeric>
#include <regex>
#include <set>

#include <fmt/core.h>

#include "tasks/detail/schema.hpp"
#include "util/files.hpp"
#include "util/strings.hpp"

namespace ptxbench::tasks::flashinfer {
namespace {

using nlohmann::json;
using nlohmann::ordered_json;
using util::unexpected;

// ---------------------------------------------------------------------------------------------------------
// Reading a Definition (the fields the schema documents; what it requires is required here too).

struct Axis {
  bool is_const = false;
  std::int64_t value = 0;
};

struct TensorDef {
  std::string name;
  std::optional<std::vector<std::string>> shape;  ///< nullopt: a scalar (shape null)
  std::string dtype;
  std::string description;
  bool is_scalar() const { return !shape.has_value(); }
};

struct Definition {
  std::string name, op_type, description;
  std::vector<std::string> tags, constraints;
  std::map<std::string, Axis> axes;
  std::vector<TensorDef> inputs, outputs;
};

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

bool contains(std::string_view text, std::string_view part) {
  return text.find(part) != std::string_view::npos;
}

util::Expected<std::vector<TensorDef>> read_tensors(const json &root, const char *key) {
  const auto it = root.find(key);
  if (it == root.end() || !it->is_object() || it->empty())
    return unexpected(fmt::format("{}: required, an object of named tensors (at least one)", key));
  std::vector<TensorDef> out;
  for (const auto &[name, spec] : it->items()) {
    const std::string path = fmt::format("{}.{}", key, name);
    if (!spec.is_object()) return unexpected(path + ": must be an object {shape, dtype, description}");
    TensorDef t;
    t.name = name;
    const auto shape = spec.find("shape");
    if (shape == spec.end())
      return unexpected(path + ".shape: required (a list of axis names, or null for a scalar)");
    if (!shape->is_null()) {
      if (!shape->is_array()) return unexpected(path + ".shape: must be a list of axis names or null");
      t.shape.emplace();
      for (const auto &dim : *shape) {
        if (!dim.is_string() || dim.get<std::string>().empty())
          return unexpected(path + ".shape: every entry must be an axis name (a non-empty string)");
        t.shape->push_back(dim.get<std::string>());
      }
    }
    const auto dtype = spec.find("dtype");
    if (dtype == spec.end() || !dtype->is_string()) return unexpected(path + ".dtype: required, a string");
    t.dtype = dtype->get<std::string>();
    if (const auto d = spec.find("description"); d != spec.end() && d->is_string())
      t.description = d->get<std::string>();
    out.push_back(std::move(t));
  }
  return out;
}

util::Expected<Definition> read_definition(const json &root) {
  if (!root.is_object()) return unexpected(std::string("(root): a definition is a JSON object"));
  Definition d;
  for (const char *key : {"name", "op_type"}) {
    const auto it = root.find(key);
    if (it == root.end() || !it->is_string() || it->get<std::string>().empty())
      return unexpected(fmt::format("{}: required, a non-empty string", key));
    (std::string_view(key) == "name" ? d.name : d.op_type) = it->get<std::string>();
  }
  if (const auto it = root.find("reference");
      it == root.end() || !it->is_string() || it->get<std::string>().empty())
    return unexpected(std::string(
        "reference: required, the reference implementation (Python source defining run()), by the schema"));
  if (const auto it = root.find("description"); it != root.end()) {
    if (!it->is_string() && !it->is_null()) return unexpected(std::string("description: must be a string"));
    if (it->is_string()) d.description = it->get<std::string>();
  }
  for (const char *key : {"tags", "constraints"}) {
    const auto it = root.find(key);
    if (it == root.end() || it->is_null()) continue;
    if (!it->is_array()) return unexpected(fmt::format("{}: must be a list of strings", key));
    for (const auto &v : *it) {
      if (!v.is_string()) return unexpected(fmt::format("{}: must be a list of strings", key));
      (std::string_view(key) == "tags" ? d.tags : d.constraints).push_back(v.get<std::string>());
    }
  }
  const auto axes = root.find("axes");
  if (axes == root.end() || !axes->is_object() || axes->empty())
    return unexpected(std::string("axes: required, an object of named axes (at least one)"));
  for (const auto &[name, spec] : axes->items()) {
    const std::string path = "axes." + name;
    const auto type = spec.is_object() ? spec.find("type") : spec.end();
    if (!spec.is_object() || type == spec.end() || !type->is_string())
      return unexpected(path + ": must be {\"type\": \"const\", \"value\": N} or {\"type\": \"var\"}");
    Axis a;
    if (*type == "const") {
      const auto value = spec.find("value");
      if (value == spec.end() || !value->is_number_integer())
        return unexpected(path + ".value: a const axis needs an integer value");
      a.is_const = true;
      a.value = value->get<std::int64_t>();
      if (a.value <= 0)
        return unexpected(fmt::format("{}.value: {} (a PTXBench dimension must be positive)", path, a.value));
    } else if (*type != "var") {
      return unexpected(
          fmt::format("{}.type: '{}' (the schema knows 'const' and 'var')", path, type->get<std::string>()));
    }
    d.axes[name] = a;
  }
  auto inputs = read_tensors(root, "inputs");
  if (!inputs) return unexpected(inputs.error());
  auto outputs = read_tensors(root, "outputs");
  if (!outputs) return unexpected(outputs.error());
  d.inputs = std::move(*inputs);
  d.outputs = std::move(*outputs);
  for (const auto *list : {&d.inputs, &d.outputs})
    for (const auto &t : *list)
      if (t.shape)
        for (const auto &axis : *t.shape)
          if (!d.axes.count(axis))
            return unexpected(fmt::format("{}.{}.shape: '{}' is not one of the axes",
                                          list == &d.inputs ? "inputs" : "outputs", t.name, axis));
  return d;
}

// ---------------------------------------------------------------------------------------------------------
// dtypes: theirs (the schema's names) <-> ours.

std::optional<DType> dtype_of(const std::string &theirs) {
  static const std::map<std::string, DType> table = {
      {"bfloat16", DType::bf16},      {"float16", DType::f16},      {"float32", DType::f32},
      {"float8_e4m3fn", DType::e4m3}, {"float8_e4m3", DType::e4m3},  // older schema versions
      {"float8_e5m2", DType::e5m2},   {"int32", DType::i32}};
  const auto it = table.find(theirs);
  return it == table.end() ? std::nullopt : std::optional<DType>(it->second);
}

std::string their_dtype(DType d) {
  switch (d) {
    case DType::bf16:
      return "bfloat16";
    case DType::f16:
      return "float16";
    case DType::f32:
      return "float32";
    case DType::e4m3:
      return "float8_e4m3fn";
    case DType::e5m2:
      return "float8_e5m2";
    case DType::i32:
      return "int32";
  }
  return "";
}

// ---------------------------------------------------------------------------------------------------------
// Classification: which family, or why none.

const TensorDef *find(const std::vector<TensorDef> &list, std::initializer_list<std::string_view> names) {
  for (const auto &t : list)
    for (auto n : names)
      if (lower(t.name) == n) return &t;
  return nullptr;
}

std::string shape_text(const std::vector<std::string> &shape) {
  return "[" + util::join(shape, ", ") + "]";
}

/// Why a ragged or paged attention definition (FlashInfer's public attention op types) does not map.
std::string ragged_or_paged_reasons(const Definition &d) {
  std::vector<std::string> reasons;
  const TensorDef *q = find(d.inputs, {"q", "q_nope", "q_pe"});
  for (const auto &t : d.inputs) {
    const std::string n = lower(t.name);
    if (contains(n, "cache") && t.shape) {
      reasons.push_back(
          fmt::format("inputs.{} {} is a paged KV cache (pages addressed through kv_indptr/kv_indices): "
                      "PTXBench attention "
                      "tasks take dense K and V [B, H, S, D]",
                      t.name, shape_text(*t.shape)));
      break;
    }
  }
  if (reasons.empty() && find(d.inputs, {"qo_indptr", "kv_indptr"}))
    reasons.push_back(
        "inputs.qo_indptr/kv_indptr describe a ragged batch (sequences of different lengths packed "
        "token-major "
        "in one tensor): PTXBench attention tasks are dense [B, H, S, D] with one S for every sequence");
  if (q && q->shape && q->shape->size() == 3)
    reasons.push_back(
        fmt::format("inputs.{}.shape {} is token-major [tokens, heads, head_dim], not [B, H, S, D]", q->name,
                    shape_text(*q->shape)));
  const auto qo = d.axes.find("num_qo_heads"), kv = d.axes.find("num_kv_heads");
  if (qo != d.axes.end() && kv != d.axes.end() && qo->second.is_const && kv->second.is_const &&
      qo->second.value != kv->second.value)
    reasons.push_back(fmt::format(
        "axes.num_qo_heads {} / num_kv_heads {}: grouped-query attention (ratio {}); the PTXBench attention "
        "reference and cuDNN path run as many K/V heads as query heads",
        qo->second.value, kv->second.value,
        kv->second.value ? std::to_string(qo->second.value / kv->second.value) : "?"));
  if (const TensorDef *lse = find(d.outputs, {"lse"}); lse && contains(lower(lse->description), "2-based"))
    reasons.push_back("outputs.lse is a base-2 log-sum-exp; PTXBench tasks check the natural-log LSE");
  if (d.op_type.rfind("mla", 0) == 0 || d.op_type.rfind("dsa", 0) == 0 || d.op_type.rfind("nsa", 0) == 0)
    reasons.push_back(
        "latent / sparse attention (split no-PE and RoPE head dims, selected keys) has no PTXBench "
        "family");
  return util::join(reasons, "; ");
}

util::Expected<Mapping> classify_gemm(const Definition &d) {
  Mapping m;
  m.family = Family::gemm;
  const TensorDef *a = nullptr, *b = nullptr, *c = nullptr;
  std::set<std::string> scalars;
  for (const auto &t : d.inputs) {
    if (t.name == "A")
      a = &t;
    else if (t.name == "B")
      b = &t;
    else if (t.is_scalar() && (t.name == "scale_a" || t.name == "scale_b"))
      scalars.insert(t.name);
    else if (t.is_scalar())
      return unexpected(
          fmt::format("inputs.{}: a scalar the PTXBench GEMM reference does not take (it takes "
                      "scale_a and scale_b, for fp8 inputs)",
                      t.name));
    else
      return unexpected(fmt::format(
          "inputs.{} {}: PTXBench GEMM tasks take A[M,K] and B[N,K] only (no scale tensors: block-scaled and "
          "grouped GEMMs do not map; per-tensor scales are the scalars scale_a, scale_b)",
          t.name, shape_text(*t.shape)));
  }
  for (const auto &t : d.outputs) {
    if (t.name != "C")
      return unexpected(fmt::format("outputs.{}: a PTXBench GEMM writes exactly one output, C[M,N]", t.name));
    c = &t;
  }
  if (!a || !b || !c)
    return unexpected(
        std::string("inputs/outputs: a gemm definition maps when it has inputs "
                    "A[M,K], B[N,K] and output C[M,N]"));
  for (const TensorDef *t : {a, b, c})
    if (t->is_scalar() || t->shape->size() != 2)
      return unexpected(fmt::format("{}.{}.shape: must be 2-D", t == c ? "outputs" : "inputs", t->name));
  const auto &sa = *a->shape, &sb = *b->shape, &sc = *c->shape;
  if (sb[1] != sa[1]) {
    if (sb[0] == sa[1])
      return unexpected(fmt::format(
          "inputs.B.shape {}: B is [K, N]; PTXBench GEMM tasks compute C = A·Bᵀ with B [N, K] (K contiguous, "
          "the 'TN' layout)",
          shape_text(sb)));
    return unexpected(
        fmt::format("inputs.B.shape {}: its second axis must be A's K ('{}')", shape_text(sb), sa[1]));
  }
  if (sc[0] != sa[0] || sc[1] != sb[0])
    return unexpected(fmt::format("outputs.C.shape {}: must be [{}, {}] (A's rows, B's rows)", shape_text(sc),
                                  sa[0], sb[0]));
  if (sa[0] == sa[1] || sa[0] == sb[0] || sa[1] == sb[0])
    return unexpected(
        fmt::format("inputs: A {} and B {} share an axis between M, N and K; PTXBench GEMM symbols "
                    "M, N and K are independent",
                    shape_text(sa), shape_text(sb)));
  if (a->dtype != b->dtype)
    return unexpected(
        fmt::format("inputs.B.dtype '{}' differs from inputs.A.dtype '{}': A and B must share "
                    "one dtype",
                    b->dtype, a->dtype));
  const auto in = dtype_of(a->dtype), out = dtype_of(c->dtype);
  if (!in || (*in != DType::bf16 && *in != DType::f16 && *in != DType::e4m3))
    return unexpected(
        fmt::format("inputs.A.dtype '{}': PTXBench GEMM tasks take bfloat16, float16 or "
                    "float8_e4m3fn inputs",
                    a->dtype));
  m.input_dtype = *in;
  if (*in == DType::e4m3) {
    if (!out || *out != DType::bf16)
      return unexpected(
          fmt::format("outputs.C.dtype '{}': the PTXBench fp8 GEMM writes a bfloat16 C", c->dtype));
    if (scalars.size() != 2)
      return unexpected(
          std::string("inputs: the PTXBench fp8 GEMM takes per-tensor scales as the scalar inputs "
                      "scale_a and scale_b (shape null); this definition lacks them"));
  } else {
    if (!scalars.empty())
      return unexpected(fmt::format("inputs.{}: scales apply to fp8 inputs only", *scalars.begin()));
    if (!out || *out != *in)
      return unexpected(
          fmt::format("outputs.C.dtype '{}': PTXBench 16-bit GEMM tasks write C in the inputs' "
                      "dtype ('{}')",
                      c->dtype, a->dtype));
  }
  for (const auto &s : d.inputs)
    if (s.is_scalar() && s.dtype != "float32")
      return unexpected(fmt::format("inputs.{}.dtype '{}': scales are float32", s.name, s.dtype));
  return m;
}

struct AttentionNames {
  const TensorDef *q = nullptr, *k = nullptr, *v = nullptr, *o = nullptr, *d_o = nullptr, *lse = nullptr;
  const TensorDef *dq = nullptr, *dk = nullptr, *dv = nullptr, *scale = nullptr;
};

// Their tensor names (case-insensitive) for ours; export writes the first of each.
constexpr std::string_view kO[] = {"output", "o", "out"};
constexpr std::string_view kDO[] = {"do", "d_output", "grad_output", "dout"};

const TensorDef *find_any(const std::vector<TensorDef> &list, const std::string_view *names, std::size_t n) {
  for (const auto &t : list)
    for (std::size_t i = 0; i < n; ++i)
      if (lower(t.name) == names[i]) return &t;
  return nullptr;
}

util::Expected<Mapping> classify_attention(const Definition &d) {
  for (const auto &t : d.inputs) {
    const std::string n = lower(t.name);
    if (contains(n, "indptr") || contains(n, "indices") || contains(n, "cache"))
      return unexpected(ragged_or_paged_reasons(d));
  }
  Mapping m;
  AttentionNames a;
  a.q = find(d.inputs, {"q"});
  a.k = find(d.inputs, {"k"});
  a.v = find(d.inputs, {"v"});
  a.dq = find(d.outputs, {"dq"});
  a.dk = find(d.outputs, {"dk"});
  a.dv = find(d.outputs, {"dv"});
  a.scale = find(d.inputs, {"sm_scale", "softmax_scale", "scale"});
  const bool backward = a.dq || a.dk || a.dv;
  m.family = backward ? Family::attention_bwd : Family::attention_fwd;
  std::set<const TensorDef *> known{a.q, a.k, a.v, a.scale};
  if (backward) {
    a.o = find_any(d.inputs, kO, std::size(kO));
    a.d_o = find_any(d.inputs, kDO, std::size(kDO));
    a.lse = find(d.inputs, {"lse"});
    if (!a.q || !a.k || !a.v || !a.o || !a.d_o || !a.lse || !a.dq || !a.dk || !a.dv)
      return unexpected(
          std::string("inputs/outputs: an attention backward maps when it has inputs q, k, v, o, "
                      "do, lse (and the scalar sm_scale) and outputs dq, dk, dv"));
    known.insert({a.o, a.d_o, a.lse});
    for (const auto &t : d.outputs)
      if (&t != a.dq && &t != a.dk && &t != a.dv)
        return unexpected(
            fmt::format("outputs.{}: not an output of the PTXBench attention backward", t.name));
  } else {
    a.o = find_any(d.outputs, kO, std::size(kO));
    a.lse = find(d.outputs, {"lse"});
    if (!a.q || !a.k || !a.v || !a.o || !a.lse)
      return unexpected(
          std::string("inputs/outputs: an attention forward maps when it has inputs q, k, v (and "
                      "the scalar sm_scale) and outputs output and lse"));
    for (const auto &t : d.outputs)
      if (&t != a.o && &t != a.lse)
        return unexpected(fmt::format("outputs.{}: not an output of the PTXBench attention forward", t.name));
  }
  for (const auto &t : d.inputs)
    if (!known.count(&t))
      return unexpected(
          fmt::format("inputs.{}: the PTXBench attention {} takes no such input (no mask, bias, "
                      "dropout or positional tensors)",
                      t.name, backward ? "backward" : "forward"));
  if (a.scale && (!a.scale->is_scalar() || a.scale->dtype != "float32"))
    return unexpected(
        fmt::format("inputs.{}: the softmax scale must be a float32 scalar (shape null)", a.scale->name));
  for (const TensorDef *t : {a.q, a.k, a.v, a.o, a.d_o, a.dq, a.dk, a.dv, a.lse})
    if (t && t->is_scalar()) return unexpected(fmt::format("{}: must be a tensor, not a scalar", t->name));
  const auto &q = *a.q->shape;
  if (q.size() != 4)
    return unexpected(fmt::format("inputs.{}.shape {}: PTXBench attention tensors are 4-D [B, H, S, D]",
                                  a.q->name, shape_text(q)));
  if (contains(lower(q[2]), "head") && !contains(lower(q[1]), "head"))
    return unexpected(
        fmt::format("inputs.{}.shape {}: sequence-major [B, S, H, D] (NHD); PTXBench attention "
                    "tensors are head-major [B, H, S, D]",
                    a.q->name, shape_text(q)));
  for (const TensorDef *t : {a.k, a.v}) {
    const auto &s = *t->shape;
    if (s == q) continue;
    if (s.size() == 4 && s[0] == q[0] && s[2] == q[2] && s[3] == q[3] && s[1] != q[1]) {
      const Axis &hq = d.axes.at(q[1]), &hk = d.axes.at(s[1]);
      const std::string ratio = hq.is_const && hk.is_const && hk.value
                                    ? fmt::format(" ({} / {} = {})", hq.value, hk.value, hq.value / hk.value)
                                    : "";
      return unexpected(
          fmt::format("inputs.{}.shape {}: its head axis '{}' differs from q's '{}'{}: grouped-query "
                      "attention; the PTXBench "
                      "attention reference and cuDNN path run as many K/V heads as query heads",
                      t->name, shape_text(s), s[1], q[1], ratio));
    }
    if (s.size() == 4 && s[2] != q[2])
      return unexpected(
          fmt::format("inputs.{}.shape {}: its sequence axis '{}' differs from q's '{}'; PTXBench "
                      "attention tasks have one S for queries and keys",
                      t->name, shape_text(s), s[2], q[2]));
    return unexpected(
        fmt::format("inputs.{}.shape {}: must equal q's {}", t->name, shape_text(s), shape_text(q)));
  }
  for (const TensorDef *t : {a.o, a.d_o, a.dq, a.dk, a.dv})
    if (t && *t->shape != q)
      return unexpected(
          fmt::format("{}.shape {}: must equal q's {}", t->name, shape_text(*t->shape), shape_text(q)));
  const std::vector<std::string> bhs(q.begin(), q.begin() + 3);
  if (*a.lse->shape != bhs)
    return unexpected(fmt::format("lse.shape {}: must be {} (q's first three axes)",
                                  shape_text(*a.lse->shape), shape_text(bhs)));
  if (a.lse->dtype != "float32")
    return unexpected(fmt::format("lse.dtype '{}': PTXBench attention LSE is float32", a.lse->dtype));
  const std::string lse_text = lower(a.lse->description);
  if (!contains(lse_text, "natural") && (contains(lse_text, "2-based") || contains(lse_text, "base-2") ||
                                         contains(lse_text, "base 2") || contains(lse_text, "log2")))
    return unexpected(
        fmt::format("lse: '{}' is a base-2 log-sum-exp; PTXBench attention tasks check the "
                    "natural-log LSE",
                    a.lse->description));
  for (const TensorDef *t : {a.q, a.k, a.v, a.o, a.d_o, a.dq, a.dk, a.dv})
    if (t && t->dtype != "bfloat16")
      return unexpected(fmt::format("{}.dtype '{}': the PTXBench attention reference runs bfloat16 only",
                                    t->name, t->dtype));
  m.input_dtype = DType::bf16;
  const Axis &head_dim = d.axes.at(q[3]);
  if (head_dim.is_const) {
    if (head_dim.value != 64 && head_dim.value != 128 && head_dim.value != 256)
      return unexpected(
          fmt::format("axes.{}: head_dim {}; the PTXBench attention reference supports 64, 128 and "
                      "256",
                      q[3], head_dim.value));
    m.head_dim = head_dim.value;
  }
  m.causal = contains(lower(d.name), "causal");
  return m;
}

util::Expected<Mapping> classify_definition(const Definition &d) {
  const std::string op = d.op_type;
  auto named = [&](util::Expected<Mapping> r) -> util::Expected<Mapping> {
    if (r) return r;
    return unexpected(fmt::format("definition '{}' (op_type '{}'): {}", d.name, op, r.error()));
  };
  if (op == "gemm") return named(classify_gemm(d));
  if (op == "mha_dense") return named(classify_attention(d));
  static const std::set<std::string> attention_ops = {"gqa_paged",  "gqa_ragged", "mla_paged",
                                                      "mla_ragged", "dsa_paged",  "nsa_paged"};
  if (attention_ops.count(op) || contains(op, "paged") || contains(op, "ragged")) {
    std::string why = ragged_or_paged_reasons(d);
    if (why.empty()) why = "ragged or paged attention does not map onto the dense PTXBench attention tasks";
    return named(unexpected(why));
  }
  return named(unexpected(std::string(
      "no PTXBench task family computes it (importable: 'gemm', and 'mha_dense' for dense attention forward "
      "and "
      "backward; FlashInfer's ragged and paged attention op types are refused with the reason)")));
}

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
    auto parsed = detail::parse_json_strict(std::string(line));
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

}  // namespace

std::string Exported::workloads_jsonl() const {
  std::string out;
  for (const auto &w : workloads) out += w.dump() + "\n";
  return out;
}

util::Expected<Exported> export_task(const Task &t) {
  const std::string named = fmt::format("task '{}'", t.id);
  std::vector<const Workload *> all;
  for (const auto &w : t.workloads) all.push_back(&w);
  for (const auto &w : t.hidden_workloads) all.push_back(&w);
  std::set<std::string> variable;
  for (const auto &s : t.symbols) {
    if (t.ranges.count(s)) variable.insert(s);
    for (const auto *w : all)
      if (w->symbols.at(s) != all.front()->symbols.at(s)) variable.insert(s);
  }
  ordered_json axes = ordered_json::object();
  for (const auto &s : t.symbols) {
    if (variable.count(s))
      axes[their_axis(t, s)] = {{"type", "var"}};
    else
      axes[their_axis(t, s)] = {{"type", "const"}, {"value", all.front()->symbols.at(s)}};
  }
  ordered_json inputs = ordered_json::object(), outputs = ordered_json::object();
  std::vector<std::string> args;
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
      inputs[name] = spec;
      args.push_back(name);
    } else {
      outputs[name] = spec;
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
    inputs[their_scalar(s.name)] = spec;
    args.push_back(their_scalar(s.name));
  }
  ordered_json constraints = ordered_json::array();
  for (const auto &[sym, r] : t.ranges) {
    const std::string axis = their_axis(t, sym);
    constraints.push_back(fmt::format("{} <= {} <= {}", r.min, axis, r.max));
    if (r.multiple_of > 1) constraints.push_back(fmt::format("{} % {} == 0", axis, r.multiple_of));
  }
  const auto tag = [&](const char *key) {
    const auto it = t.tags.find(key);
    return it == t.tags.end() ? std::string() : it->second;
  };
  const std::string name = tag("flashinfer_definition").empty() ? t.id : tag("flashinfer_definition");
  const std::string description =
      tag("flashinfer_description").empty() ? t.description : tag("flashinfer_description");
  ordered_json tags = ordered_json::array();
  if (t.family == Family::attention_fwd) tags.push_back("stage:prefill");
  if (t.family == Family::attention_bwd) tags.push_back("stage:backward");
  if (t.workloads.size() != 1) tags.push_back(fmt::format("ptxbench.shown:{}", t.workloads.size()));
  Exported out;
  out.definition = {{"name", name},
                    {"description", description},
                    {"op_type", t.family == Family::gemm ? "gemm" : "mha_dense"},
                    {"tags", tags},
                    {"axes", axes}};
  if (!constraints.empty()) out.definition["constraints"] = constraints;
  out.definition["inputs"] = inputs;
  out.definition["outputs"] = outputs;
  out.definition["reference"] = reference_source(t, args);
  if (tags.empty()) out.definition.erase("tags");
  for (const auto *w : all) {
    ordered_json axes_values = ordered_json::object();
    for (const auto &s : t.symbols)
      if (variable.count(s)) axes_values[their_axis(t, s)] = w->symbols.at(s);
    ordered_json input_specs = ordered_json::object();
    for (const auto &x : t.tensors)
      if (x.role == TensorRole::input) input_specs[their_tensor(t, x.name)] = {{"type", "random"}};
    for (const auto &s : t.scalars)
      input_specs[their_scalar(s.name)] = {{"type", "scalar"}, {"value", s.value}};
    out.workloads.push_back(
        {{"definition", name},
         {"workload",
          {{"uuid", workload_uuid(t.id, w->name)}, {"axes", axes_values}, {"inputs", input_specs}}},
         {"solution", nullptr},
         {"evaluation", nullptr}});
  }
  return out;
}

}  // namespace ptxbench::tasks::flashinfer
