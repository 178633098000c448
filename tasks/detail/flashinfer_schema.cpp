// FlashInfer-Trace definitions: reading their fields, dtype names, and the mapping onto our families.
#include "tasks/detail/flashinfer_schema.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <map>
#include <numeric>
#include <regex>
#include <set>

#include <fmt/core.h>

#include "tasks/detail/schema.hpp"
#include "tasks/flashinfer.hpp"
#include "tasks/task.hpp"
#include "util/files.hpp"
#include "util/strings.hpp"

namespace ptxbench::tasks::flashinfer::detail {

using nlohmann::json;
using util::unexpected;

// Reading a Definition (the fields the schema documents; what it requires is required here too).

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

/// A GEMM definition's tensors: A, B, C and the names of its scale scalars.
struct GemmTensors {
  const TensorDef *a = nullptr, *b = nullptr, *c = nullptr;
  std::set<std::string> scalars;
};

util::Expected<GemmTensors> gemm_tensors(const Definition &d) {
  GemmTensors g;
  for (const auto &t : d.inputs) {
    if (t.name == "A")
      g.a = &t;
    else if (t.name == "B")
      g.b = &t;
    else if (t.is_scalar() && (t.name == "scale_a" || t.name == "scale_b"))
      g.scalars.insert(t.name);
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
    g.c = &t;
  }
  if (!g.a || !g.b || !g.c)
    return unexpected(
        std::string("inputs/outputs: a gemm definition maps when it has inputs "
                    "A[M,K], B[N,K] and output C[M,N]"));
  return g;
}

/// A[M,K], B[N,K] (the 'TN' layout), C[M,N], with M, N and K three different axes.
util::Expected<void> check_gemm_shapes(const GemmTensors &g) {
  for (const TensorDef *t : {g.a, g.b, g.c})
    if (t->is_scalar() || t->shape->size() != 2)
      return unexpected(fmt::format("{}.{}.shape: must be 2-D", t == g.c ? "outputs" : "inputs", t->name));
  const auto &sa = *g.a->shape, &sb = *g.b->shape, &sc = *g.c->shape;
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
  return {};
}

/// The input dtype (bf16, f16 or e4m3), checked against C's dtype and the scales fp8 needs.
util::Expected<DType> gemm_input_dtype(const Definition &d, const GemmTensors &g) {
  if (g.a->dtype != g.b->dtype)
    return unexpected(
        fmt::format("inputs.B.dtype '{}' differs from inputs.A.dtype '{}': A and B must share "
                    "one dtype",
                    g.b->dtype, g.a->dtype));
  const auto in = dtype_of(g.a->dtype), out = dtype_of(g.c->dtype);
  if (!in || (*in != DType::bf16 && *in != DType::f16 && *in != DType::e4m3))
    return unexpected(
        fmt::format("inputs.A.dtype '{}': PTXBench GEMM tasks take bfloat16, float16 or "
                    "float8_e4m3fn inputs",
                    g.a->dtype));
  if (*in == DType::e4m3) {
    if (!out || *out != DType::bf16)
      return unexpected(
          fmt::format("outputs.C.dtype '{}': the PTXBench fp8 GEMM writes a bfloat16 C", g.c->dtype));
    if (g.scalars.size() != 2)
      return unexpected(
          std::string("inputs: the PTXBench fp8 GEMM takes per-tensor scales as the scalar inputs "
                      "scale_a and scale_b (shape null); this definition lacks them"));
  } else {
    if (!g.scalars.empty())
      return unexpected(fmt::format("inputs.{}: scales apply to fp8 inputs only", *g.scalars.begin()));
    if (!out || *out != *in)
      return unexpected(
          fmt::format("outputs.C.dtype '{}': PTXBench 16-bit GEMM tasks write C in the inputs' "
                      "dtype ('{}')",
                      g.c->dtype, g.a->dtype));
  }
  for (const auto &s : d.inputs)
    if (s.is_scalar() && s.dtype != "float32")
      return unexpected(fmt::format("inputs.{}.dtype '{}': scales are float32", s.name, s.dtype));
  return *in;
}

util::Expected<Mapping> classify_gemm(const Definition &d) {
  auto g = gemm_tensors(d);
  if (!g) return unexpected(g.error());
  if (auto shapes = check_gemm_shapes(*g); !shapes) return unexpected(shapes.error());
  auto in = gemm_input_dtype(d, *g);
  if (!in) return unexpected(in.error());
  Mapping m;
  m.family = Family::gemm;
  m.input_dtype = *in;
  return m;
}

struct AttentionNames {
  const TensorDef *q = nullptr, *k = nullptr, *v = nullptr, *o = nullptr, *d_o = nullptr, *lse = nullptr;
  const TensorDef *dq = nullptr, *dk = nullptr, *dv = nullptr, *scale = nullptr;
  bool backward() const { return dq || dk || dv; }
};

const TensorDef *find_any(const std::vector<TensorDef> &list, const std::string_view *names, std::size_t n) {
  for (const auto &t : list)
    for (std::size_t i = 0; i < n; ++i)
      if (lower(t.name) == names[i]) return &t;
  return nullptr;
}

/// The tensors an attention forward (q, k, v -> output, lse) or backward (q, k, v, o, do, lse -> dq, dk,
/// dv) maps from, every one present, no other output and no other input.
util::Expected<AttentionNames> attention_names(const Definition &d) {
  AttentionNames a;
  a.q = find(d.inputs, {"q"});
  a.k = find(d.inputs, {"k"});
  a.v = find(d.inputs, {"v"});
  a.dq = find(d.outputs, {"dq"});
  a.dk = find(d.outputs, {"dk"});
  a.dv = find(d.outputs, {"dv"});
  a.scale = find(d.inputs, {"sm_scale", "softmax_scale", "scale"});
  const bool backward = a.backward();
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
  return a;
}

/// k or v, whose shape differs from q's: why (grouped-query heads, another sequence axis, or just unequal).
std::string kv_shape_error(const Definition &d, const TensorDef &t, const std::vector<std::string> &q) {
  const auto &s = *t.shape;
  if (s.size() == 4 && s[0] == q[0] && s[2] == q[2] && s[3] == q[3] && s[1] != q[1]) {
    const Axis &hq = d.axes.at(q[1]), &hk = d.axes.at(s[1]);
    const std::string ratio = hq.is_const && hk.is_const && hk.value
                                  ? fmt::format(" ({} / {} = {})", hq.value, hk.value, hq.value / hk.value)
                                  : "";
    return fmt::format(
        "inputs.{}.shape {}: its head axis '{}' differs from q's '{}'{}: grouped-query "
        "attention; the PTXBench "
        "attention reference and cuDNN path run as many K/V heads as query heads",
        t.name, shape_text(s), s[1], q[1], ratio);
  }
  if (s.size() == 4 && s[2] != q[2])
    return fmt::format(
        "inputs.{}.shape {}: its sequence axis '{}' differs from q's '{}'; PTXBench "
        "attention tasks have one S for queries and keys",
        t.name, shape_text(s), s[2], q[2]);
  return fmt::format("inputs.{}.shape {}: must equal q's {}", t.name, shape_text(s), shape_text(q));
}

/// Every tensor [B, H, S, D] as q (head-major), lse [B, H, S]; the scale a float32 scalar.
util::Expected<void> check_attention_shapes(const Definition &d, const AttentionNames &a) {
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
  for (const TensorDef *t : {a.k, a.v})
    if (*t->shape != q) return unexpected(kv_shape_error(d, *t, q));
  for (const TensorDef *t : {a.o, a.d_o, a.dq, a.dk, a.dv})
    if (t && *t->shape != q)
      return unexpected(
          fmt::format("{}.shape {}: must equal q's {}", t->name, shape_text(*t->shape), shape_text(q)));
  const std::vector<std::string> bhs(q.begin(), q.begin() + 3);
  if (*a.lse->shape != bhs)
    return unexpected(fmt::format("lse.shape {}: must be {} (q's first three axes)",
                                  shape_text(*a.lse->shape), shape_text(bhs)));
  return {};
}

/// A float32 natural-log LSE, every other tensor bfloat16.
util::Expected<void> check_attention_dtypes(const AttentionNames &a) {
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
  return {};
}

util::Expected<Mapping> classify_attention(const Definition &d) {
  for (const auto &t : d.inputs) {
    const std::string n = lower(t.name);
    if (contains(n, "indptr") || contains(n, "indices") || contains(n, "cache"))
      return unexpected(ragged_or_paged_reasons(d));
  }
  auto a = attention_names(d);
  if (!a) return unexpected(a.error());
  if (auto shapes = check_attention_shapes(d, *a); !shapes) return unexpected(shapes.error());
  if (auto dtypes = check_attention_dtypes(*a); !dtypes) return unexpected(dtypes.error());
  Mapping m;
  m.family = a->backward() ? Family::attention_bwd : Family::attention_fwd;
  m.input_dtype = DType::bf16;
  const std::string &head_axis = (*a->q->shape)[3];
  const Axis &head_dim = d.axes.at(head_axis);
  if (head_dim.is_const) {
    if (head_dim.value != 64 && head_dim.value != 128 && head_dim.value != 256)
      return unexpected(
          fmt::format("axes.{}: head_dim {}; the PTXBench attention reference supports 64, 128 and "
                      "256",
                      head_axis, head_dim.value));
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

}  // namespace ptxbench::tasks::flashinfer::detail
