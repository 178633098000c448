// The launch manifest: strict JSON schema (unknown fields are errors, with
// their path), expressions over the task's symbols, and per-workload
// resolution into a LaunchPlan with the limits a launch and a tensor map have.
#include <algorithm>
#include <numeric>
#include <optional>
#include <set>

#include <fmt/core.h>
#include <fmt/ranges.h>

#include "evaluator/candidate.hpp"
#include "evaluator/detail/limits.hpp"
#include "tasks/arch.hpp"

namespace ptxbench::evaluator {
namespace {

using nlohmann::json;

struct Failure {
  std::string message;
};
[[noreturn]] void fail(const std::string &path, const std::string &what) {
  throw Failure{path + ": " + what};
}

std::string json_kind(const json &j) {
  if (j.is_string()) return "a string";
  if (j.is_number_integer() || j.is_number_unsigned()) return "an integer";
  if (j.is_number()) return "a number";
  if (j.is_boolean()) return "a boolean";
  if (j.is_array()) return "an array";
  if (j.is_object()) return "an object";
  return "null";
}

void only_fields(const json &obj, const std::string &path, std::initializer_list<std::string_view> allowed) {
  for (const auto &[key, value] : obj.items()) {
    if (std::find(allowed.begin(), allowed.end(), key) != allowed.end()) continue;
    fail(path.empty() ? key : path + "." + key,
         fmt::format("unknown field (allowed here: {})", fmt::join(allowed, ", ")));
  }
}

// An integer or an expression string.
std::string expression(const json &j, const std::string &path) {
  if (j.is_string()) {
    std::string s = j.get<std::string>();
    if (s.find_first_not_of(" \t") == std::string::npos) fail(path, "empty expression");
    return s;
  }
  if (j.is_number_integer() || j.is_number_unsigned()) return j.dump();
  if (j.is_number_float()) fail(path, fmt::format("{} is not an integer", j.dump()));
  fail(path, "expected an integer or an integer expression string, got " + json_kind(j));
}

std::string text_field(const json &obj, const std::string &key, const std::string &path) {
  const json &j = obj.at(key);
  if (!j.is_string()) fail(path + "." + key, "expected a string, got " + json_kind(j));
  return j.get<std::string>();
}

std::array<std::string, 3> dim3(const json &j, const std::string &path) {
  std::array<std::string, 3> out{"1", "1", "1"};
  if (!j.is_array()) {
    out[0] = expression(j, path);  // "grid": 132 means [132, 1, 1]
    return out;
  }
  if (j.empty() || j.size() > 3)
    fail(path, fmt::format("expected 1 to 3 dimensions [x, y, z], got {}", j.size()));
  for (std::size_t i = 0; i < j.size(); ++i) out[i] = expression(j[i], fmt::format("{}[{}]", path, i));
  return out;
}

std::vector<std::string> expression_list(const json &j, const std::string &path) {
  if (!j.is_array()) fail(path, "expected an array (innermost dimension first), got " + json_kind(j));
  if (j.empty() || j.size() > 5) fail(path, fmt::format("expected 1 to 5 dimensions, got {}", j.size()));
  std::vector<std::string> out;
  for (std::size_t i = 0; i < j.size(); ++i) out.push_back(expression(j[i], fmt::format("{}[{}]", path, i)));
  return out;
}

std::string one_of(const json &obj, const std::string &key, const std::string &path,
                   std::initializer_list<std::string_view> values) {
  std::string v = text_field(obj, key, path);
  if (std::find(values.begin(), values.end(), v) == values.end())
    fail(path + "." + key, fmt::format("'{}' is not one of {}", v, fmt::join(values, ", ")));
  return v;
}

std::string names_of_tensors(const tasks::Task &task) {
  std::vector<std::string> names;
  for (const auto &t : task.tensors) names.push_back(t.name);
  return fmt::format("{}", fmt::join(names, ", "));
}

std::string names_of_scalars(const tasks::Task &task) {
  std::vector<std::string> names = task.symbols;
  for (const auto &s : task.scalars) names.push_back(s.name);
  return names.empty() ? "none" : fmt::format("{}", fmt::join(names, ", "));
}

ManifestParam parse_param(const json &p, const std::string &path, const tasks::Task &task) {
  if (!p.is_object()) fail(path, "expected an object like {\"tensor\": \"C\"}, got " + json_kind(p));
  ManifestParam param;
  int kinds = int(p.contains("tensor")) + int(p.contains("scalar")) + int(p.contains("tensor_map")) +
              int(p.contains("workspace"));
  if (kinds != 1)
    fail(path,
         "give exactly one of \"tensor\", \"scalar\", \"tensor_map\" or \"workspace\" (each parameter is "
         "one of them)");
  if (p.contains("workspace")) {
    only_fields(p, path, {"workspace"});
    if (!p["workspace"].is_boolean() || !p["workspace"].get<bool>())
      fail(path + ".workspace",
           "expected true ({\"workspace\": true} passes the workspace's device address), got " +
               p["workspace"].dump());
    param.kind = ParamKind::workspace;
    param.name = protocol::kWorkspaceName;
  } else if (p.contains("tensor")) {
    only_fields(p, path, {"tensor"});
    param.kind = ParamKind::tensor;
    param.name = text_field(p, "tensor", path);
    if (!task.find_tensor(param.name))
      fail(path + ".tensor", fmt::format("'{}' is not a tensor of this task (tensors: {})", param.name,
                                         names_of_tensors(task)));
  } else if (p.contains("scalar")) {
    only_fields(p, path, {"scalar"});
    param.kind = ParamKind::scalar;
    param.name = text_field(p, "scalar", path);
    bool symbol = std::find(task.symbols.begin(), task.symbols.end(), param.name) != task.symbols.end();
    if (!symbol && !task.find_scalar(param.name) && param.name == kNumSmsSymbol)
      fail(path + ".scalar",
           "num_sms is a manifest symbol only (use it in grid, cluster or workspace_bytes expressions); a "
           "kernel reads its grid size from %nctaid (gridDim)");
    if (!symbol && !task.find_scalar(param.name))
      fail(path + ".scalar", fmt::format("'{}' is neither a scalar nor a symbol of this task (known: {})",
                                         param.name, names_of_scalars(task)));
  } else {
    only_fields(p, path, {"tensor_map", "box", "swizzle", "l2_promotion", "oob_fill", "interleave", "dims"});
    param.kind = ParamKind::tensor_map;
    param.name = text_field(p, "tensor_map", path);
    if (!task.find_tensor(param.name))
      fail(path + ".tensor_map", fmt::format("'{}' is not a tensor of this task (tensors: {})", param.name,
                                             names_of_tensors(task)));
    if (!p.contains("box"))
      fail(path, "a tensor_map needs \"box\" (elements per dimension, innermost first)");
    param.box = expression_list(p["box"], path + ".box");
    if (p.contains("dims")) param.dims = expression_list(p["dims"], path + ".dims");
    if (p.contains("swizzle")) {
      std::string s = one_of(p, "swizzle", path, {"none", "32B", "64B", "128B"});
      param.swizzle = protocol::swizzle_from_string(s).value_or(Swizzle::none);
    }
    if (p.contains("l2_promotion"))
      param.l2_promotion = one_of(p, "l2_promotion", path, {"none", "64B", "128B", "256B"});
    if (p.contains("oob_fill")) param.oob_fill = one_of(p, "oob_fill", path, {"zero", "nan"});
    if (p.contains("interleave")) param.interleave = one_of(p, "interleave", path, {"none", "16B", "32B"});
  }
  return param;
}

std::int64_t eval(const std::string &text, const util::SymbolTable &symbols, const std::string &path) {
  auto v = util::evaluate_int_expression(text, symbols);
  if (!v) {
    std::string why = v.error();
    if (!symbols.contains(kNumSmsSymbol) && why.find(fmt::format("'{}'", kNumSmsSymbol)) != std::string::npos)
      why +=
          "; num_sms is not known for this task's architecture (no reference GPU in tasks/arch.hpp): "
          "the evaluator's num_sms setting gives it";
    fail(path, fmt::format("'{}': {}", text, why));
  }
  return *v;
}

int swizzle_bytes(Swizzle s) {
  switch (s) {
    case Swizzle::b32:
      return 32;
    case Swizzle::b64:
      return 64;
    case Swizzle::b128:
      return 128;
    case Swizzle::none:
      return 0;
  }
  return 0;
}

}  // namespace

namespace {

/// The text with each trailing comma (a ',' before '}' or ']', across whitespace and comments) turned
/// into a space, so offsets stay the same for error messages. Strings and comments are skipped whole.
/// Models write manifests the way JavaScript allows; the JSON parser here does not.
std::string without_trailing_commas(std::string_view text) {
  std::string out(text);
  std::optional<std::size_t> comma;
  for (std::size_t i = 0; i < out.size(); ++i) {
    const char c = out[i];
    if (c == '"') {
      comma.reset();  // a value follows the comma
      for (++i; i < out.size() && out[i] != '"'; ++i)
        if (out[i] == '\\') ++i;
    } else if (c == '/' && i + 1 < out.size() && out[i + 1] == '/') {
      while (i < out.size() && out[i] != '\n') ++i;
    } else if (c == '/' && i + 1 < out.size() && out[i + 1] == '*') {
      auto end = out.find("*/", i + 2);
      i = end == std::string::npos ? out.size() : end + 1;
    } else if (c == ',') {
      comma = i;
    } else if ((c == '}' || c == ']') && comma) {
      out[*comma] = ' ';
      comma.reset();
    } else if (c != ' ' && c != '\t' && c != '\r' && c != '\n') {
      comma.reset();
    }
  }
  return out;
}

}  // namespace

DeviceSymbols device_symbols(const tasks::Task &task, std::int64_t num_sms_setting) {
  if (num_sms_setting > 0) return {num_sms_setting, "the evaluator's num_sms setting"};
  const tasks::ArchFacts *facts = tasks::arch_facts(task.arch);
  if (facts && facts->peaks && facts->peaks->sm_count > 0)
    return {facts->peaks->sm_count,
            fmt::format("{}, the {} reference GPU (tasks/arch.hpp)", facts->peaks->gpu, task.arch)};
  return {0, fmt::format("unknown: no reference GPU for {} in tasks/arch.hpp", task.arch)};
}

util::Expected<Manifest, std::string> parse_manifest(std::string_view json_text, const tasks::Task &task,
                                                     const std::optional<DeviceSymbols> &device) {
  json doc;
  const std::string lenient = without_trailing_commas(json_text);
  json_text = lenient;
  try {
    doc = json::parse(json_text, nullptr, /*allow_exceptions=*/true, /*ignore_comments=*/true);
  } catch (const json::parse_error &e) {
    // Byte offset -> line and column inside the manifest block.
    std::size_t offset = std::min(e.byte == 0 ? 0 : e.byte - 1, json_text.size());
    int line = 1 + static_cast<int>(
                       std::count(json_text.begin(), json_text.begin() + static_cast<long>(offset), '\n'));
    std::size_t line_start = offset == 0 ? std::string_view::npos : json_text.rfind('\n', offset - 1);
    std::size_t col = offset - (line_start == std::string_view::npos ? 0 : line_start + 1) + 1;
    std::string what = e.what();
    if (auto p = what.find("syntax error"); p != std::string::npos) what = what.substr(p);
    return util::unexpected(fmt::format(
        "the json block is not valid JSON (line {}, column {} of the block): {}", line, col, what));
  } catch (const json::exception &e) {  // out_of_range: a number beyond double range, e.g. 1e999
    std::string what = e.what();
    return util::unexpected(fmt::format("the json block holds a number out of range: {}", what));
  }
  Manifest m;
  try {
    if (!doc.is_object()) fail("manifest", "expected a JSON object, got " + json_kind(doc));
    only_fields(doc, "", {"entry", "grid", "block", "cluster", "shared_bytes", "workspace_bytes", "params"});
    for (const char *required : {"entry", "grid", "block", "params"})
      if (!doc.contains(required)) fail(required, "missing (required: entry, grid, block, params)");
    m.entry = text_field(doc, "entry", "manifest");
    if (m.entry.empty()) fail("entry", "empty name");
    m.grid = dim3(doc["grid"], "grid");
    m.block = dim3(doc["block"], "block");
    if (doc.contains("cluster")) m.cluster = dim3(doc["cluster"], "cluster");
    if (doc.contains("shared_bytes")) m.shared_bytes = expression(doc["shared_bytes"], "shared_bytes");
    if (!doc["params"].is_array()) fail("params", "expected an array in the entry's parameter order");
    for (std::size_t i = 0; i < doc["params"].size(); ++i)
      m.params.push_back(parse_param(doc["params"][i], fmt::format("params[{}]", i), task));
    if (doc.contains("workspace_bytes"))
      m.workspace_bytes = expression(doc["workspace_bytes"], "workspace_bytes");
    const auto workspace_param = std::find_if(m.params.begin(), m.params.end(), [](const ManifestParam &p) {
      return p.kind == ParamKind::workspace;
    });
    if (workspace_param != m.params.end() && m.workspace_bytes.empty())
      fail(fmt::format("params[{}]", workspace_param - m.params.begin()),
           "a {\"workspace\": true} parameter needs \"workspace_bytes\" in the manifest (its size in bytes, "
           "an "
           "integer expression)");
    if (workspace_param == m.params.end() && !m.workspace_bytes.empty())
      fail("workspace_bytes",
           "no parameter receives the workspace: add {\"workspace\": true} to \"params\" at the position of "
           "the entry's .u64 parameter that takes its address");
    // Every expression must evaluate on every workload (unknown names, overflow, division by zero).
    for (const auto &w : task.workloads) {
      auto plan = resolve_launch(m, task, w, device);
      if (!plan) fail("workload " + w.name, plan.error());
    }
  } catch (const Failure &f) {
    return util::unexpected(f.message);
  }
  return m;
}

namespace {

/// Grid, block and cluster: each dimension at least 1, the grid a multiple of the cluster, the launch
/// limits of every architecture.
void resolve_geometry(const Manifest &m, const util::SymbolTable &symbols, LaunchPlan &plan) {
  const char *axis = "xyz";
  for (int i = 0; i < 3; ++i) {
    plan.grid[i] = eval(m.grid[i], symbols, fmt::format("grid[{}]", i));
    plan.block[i] = eval(m.block[i], symbols, fmt::format("block[{}]", i));
    plan.cluster[i] = eval(m.cluster[i], symbols, fmt::format("cluster[{}]", i));
    if (plan.grid[i] < 1) fail(fmt::format("grid[{}]", i), fmt::format("{} is less than 1", plan.grid[i]));
    if (plan.block[i] < 1) fail(fmt::format("block[{}]", i), fmt::format("{} is less than 1", plan.block[i]));
    if (plan.cluster[i] < 1)
      fail(fmt::format("cluster[{}]", i), fmt::format("{} is less than 1", plan.cluster[i]));
    if (plan.grid[i] % plan.cluster[i] != 0)
      fail(fmt::format("grid[{}]", i), fmt::format("{} is not a multiple of the cluster's {} dimension {}",
                                                   plan.grid[i], axis[i], plan.cluster[i]));
  }
  if (plan.grid[0] > detail::kMaxGridX)
    fail("grid[0]", fmt::format("{} exceeds the limit {}", plan.grid[0], detail::kMaxGridX));
  for (int i = 1; i < 3; ++i)
    if (plan.grid[i] > detail::kMaxGridYZ)
      fail(fmt::format("grid[{}]", i),
           fmt::format("{} exceeds the limit {}", plan.grid[i], detail::kMaxGridYZ));
  const std::int64_t threads = plan.block[0] * plan.block[1] * plan.block[2];
  if (plan.block[0] > 1024 || plan.block[1] > 1024 || plan.block[2] > 64 ||
      threads > detail::kMaxThreadsPerBlock)
    fail("block",
         fmt::format("[{}, {}, {}] = {} threads; the limits are x,y <= 1024, z <= 64 and {} threads in all",
                     plan.block[0], plan.block[1], plan.block[2], threads, detail::kMaxThreadsPerBlock));
  const std::int64_t cluster_size = plan.cluster[0] * plan.cluster[1] * plan.cluster[2];
  if (cluster_size > detail::kMaxClusterSize)
    fail("cluster", fmt::format("{} CTAs per cluster; the most a launch may ask for is {} (8 is portable)",
                                cluster_size, detail::kMaxClusterSize));
}

/// Dynamic shared memory within the architecture's limit; the workspace, when declared, 1 byte to
/// protocol::kMaxWorkspaceBytes.
void resolve_memory(const Manifest &m, const tasks::Task &task, const util::SymbolTable &symbols,
                    LaunchPlan &plan) {
  plan.shared_bytes = eval(m.shared_bytes, symbols, "shared_bytes");
  if (plan.shared_bytes < 0) fail("shared_bytes", fmt::format("{} is negative", plan.shared_bytes));
  const std::int64_t smem_limit = detail::max_shared_bytes_per_block(task.arch);
  if (plan.shared_bytes > smem_limit)
    fail("shared_bytes",
         fmt::format("{} bytes of dynamic shared memory exceed the {} limit of {} bytes per block",
                     plan.shared_bytes, task.arch, smem_limit));
  if (m.workspace_bytes.empty()) return;
  plan.workspace_bytes = eval(m.workspace_bytes, symbols, "workspace_bytes");
  if (plan.workspace_bytes < 0) fail("workspace_bytes", fmt::format("{} is negative", plan.workspace_bytes));
  if (plan.workspace_bytes == 0)
    fail("workspace_bytes",
         "is 0; a workspace needs at least 1 byte (leave workspace_bytes and the "
         "{\"workspace\": true} parameter out when the kernel needs none)");
  if (plan.workspace_bytes > protocol::kMaxWorkspaceBytes)
    fail("workspace_bytes",
         fmt::format("{} bytes exceed the limit of {} bytes ({} GiB)", plan.workspace_bytes,
                     protocol::kMaxWorkspaceBytes, protocol::kMaxWorkspaceBytes >> 30));
}

/// A tensor map's dims (innermost first): the tensor's shape, or the manifest's view of it, which must hold
/// as many elements; rank and extents within the tensor-map limits.
void resolve_map_dims(const ManifestParam &mp, const tasks::Tensor &t, const std::vector<std::int64_t> &shape,
                      const util::SymbolTable &symbols, const std::string &path, ResolvedParam &rp) {
  const std::int64_t elements =
      std::accumulate(shape.begin(), shape.end(), std::int64_t{1}, std::multiplies<>());
  if (mp.dims.empty()) {
    rp.dims.assign(shape.rbegin(), shape.rend());
  } else {
    for (std::size_t d = 0; d < mp.dims.size(); ++d) {
      std::int64_t v = eval(mp.dims[d], symbols, fmt::format("{}.dims[{}]", path, d));
      if (v < 1) fail(fmt::format("{}.dims[{}]", path, d), fmt::format("{} is less than 1", v));
      rp.dims.push_back(v);
    }
    std::int64_t view = 1;
    for (auto v : rp.dims)
      if (__builtin_mul_overflow(view, v, &view)) fail(path + ".dims", "the product of dims overflows");
    if (view != elements)
      fail(path + ".dims",
           fmt::format("the view [{}] holds {} elements but tensor {} has {} ({})", fmt::join(rp.dims, ", "),
                       view, t.name, elements, fmt::join(shape, " x ")));
  }
  if (rp.dims.size() > 5)
    fail(path, fmt::format("rank {} exceeds the tensor-map limit of 5", rp.dims.size()));
  for (std::size_t d = 0; d < rp.dims.size(); ++d)
    if (rp.dims[d] > (std::int64_t{1} << 32))
      fail(fmt::format("{}.dims[{}]", path, d), fmt::format("{} exceeds 2^32", rp.dims[d]));
}

/// The strides of a contiguous view: of dims[d+1] in bytes, aligned as TMA needs, below 2^40.
void resolve_map_strides(const ManifestParam &mp, std::int64_t elem, const std::string &path,
                         ResolvedParam &rp) {
  std::int64_t stride = elem;
  for (std::size_t d = 0; d + 1 < rp.dims.size(); ++d) {
    stride *= rp.dims[d];
    rp.strides_bytes.push_back(stride);
    int align = mp.interleave == "32B" ? 32 : 16;
    if (stride % align != 0)
      fail(path,
           fmt::format("the stride of dimension {} is {} bytes, not a multiple of {} (TMA needs {}-byte "
                       "aligned strides): {} elements x {} bytes",
                       d + 1, stride, align, align, stride / elem, elem));
    if (stride >= (std::int64_t{1} << 40)) fail(path, fmt::format("stride {} bytes exceeds 2^40", stride));
  }
}

/// The box (one extent per dim, 1..256) and the settings; its inner extent within 16-byte units and the
/// swizzle span, interleave's rank and swizzle, a NaN fill only for floating-point tensors.
void resolve_map_box(const ManifestParam &mp, const tasks::Tensor &t, std::int64_t elem,
                     const util::SymbolTable &symbols, const std::string &path, ResolvedParam &rp) {
  if (mp.box.size() != rp.dims.size())
    fail(path + ".box", fmt::format("has {} dimensions but the tensor (view) has {}: [{}] (innermost first)",
                                    mp.box.size(), rp.dims.size(), fmt::join(rp.dims, ", ")));
  for (std::size_t d = 0; d < mp.box.size(); ++d) {
    std::int64_t b = eval(mp.box[d], symbols, fmt::format("{}.box[{}]", path, d));
    if (b < 1 || b > 256)
      fail(fmt::format("{}.box[{}]", path, d), fmt::format("{} is outside 1..256 (TMA box limit)", b));
    rp.box.push_back(b);
  }
  rp.swizzle = mp.swizzle;
  rp.l2_promotion = mp.l2_promotion;
  rp.oob_fill = mp.oob_fill;
  rp.interleave = mp.interleave;
  const std::int64_t inner_bytes = rp.box[0] * elem;
  if (rp.interleave == "none") {
    if (inner_bytes % 16 != 0)
      fail(path + ".box[0]", fmt::format("{} elements x {} bytes = {} bytes, not a multiple of 16", rp.box[0],
                                         elem, inner_bytes));
    if (rp.swizzle != Swizzle::none && inner_bytes > swizzle_bytes(rp.swizzle))
      fail(path + ".box[0]", fmt::format("{} elements x {} bytes = {} bytes exceed the {} swizzle "
                                         "span; use box[0] <= {} or a wider "
                                         "swizzle",
                                         rp.box[0], elem, inner_bytes, to_string(rp.swizzle),
                                         swizzle_bytes(rp.swizzle) / elem));
  } else {
    if (rp.dims.size() < 3) fail(path + ".interleave", "interleaved tensor maps need rank >= 3");
    if (rp.interleave == "32B" && rp.swizzle != Swizzle::b32)
      fail(path + ".swizzle", "interleave 32B requires swizzle 32B");
  }
  bool is_float =
      t.dtype == tasks::DType::bf16 || t.dtype == tasks::DType::f16 || t.dtype == tasks::DType::f32;
  if (rp.oob_fill == "nan" && !is_float)
    fail(path + ".oob_fill",
         fmt::format("'nan' needs a floating-point tensor; {} is {}", t.name, tasks::to_string(t.dtype)));
}

/// One parameter at workload w: a scalar's value (a symbol's or the task's), a tensor map's geometry.
ResolvedParam resolve_param(const ManifestParam &mp, const std::string &path, const tasks::Task &task,
                            const tasks::Workload &w, const util::SymbolTable &symbols) {
  ResolvedParam rp;
  rp.kind = mp.kind;
  rp.name = mp.name;
  if (mp.kind == ParamKind::scalar) {
    if (auto it = w.symbols.find(mp.name); it != w.symbols.end())
      rp.scalar_value = static_cast<double>(it->second);
    else if (const auto *s = task.find_scalar(mp.name))
      rp.scalar_value = s->value;
    else
      fail(path + ".scalar", fmt::format("'{}' has no value in workload {}", mp.name, w.name));
  } else if (mp.kind == ParamKind::tensor_map) {
    const tasks::Tensor *t = task.find_tensor(mp.name);
    if (!t) fail(path + ".tensor_map", "'" + mp.name + "' is not a tensor of this task");
    const std::int64_t elem = static_cast<std::int64_t>(tasks::size_of(t->dtype));
    resolve_map_dims(mp, *t, task.shape_of(*t, w), symbols, path, rp);  // shape: outermost first
    resolve_map_strides(mp, elem, path, rp);
    resolve_map_box(mp, *t, elem, symbols, path, rp);
  }
  return rp;
}

}  // namespace

util::Expected<LaunchPlan, std::string> resolve_launch(const Manifest &m, const tasks::Task &task,
                                                       const tasks::Workload &w,
                                                       const std::optional<DeviceSymbols> &device) {
  LaunchPlan plan;
  plan.workload = w.name;
  plan.symbols = w.symbols;
  const DeviceSymbols dev = device ? *device : device_symbols(task);
  plan.num_sms = dev.num_sms;
  // The task's symbols and the device's (num_sms), for every expression below.
  util::SymbolTable symbols = w.symbols;
  if (dev.num_sms > 0) symbols.emplace(kNumSmsSymbol, dev.num_sms);
  try {
    resolve_geometry(m, symbols, plan);
    resolve_memory(m, task, symbols, plan);
    for (std::size_t i = 0; i < m.params.size(); ++i)
      plan.params.push_back(resolve_param(m.params[i], fmt::format("params[{}]", i), task, w, symbols));
  } catch (const Failure &f) {
    return util::unexpected(f.message);
  }
  return plan;
}

}  // namespace ptxbench::evaluator
