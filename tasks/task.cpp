#include "tasks/task.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>
#include <stdexcept>

#include <fmt/core.h>

#include "tasks/arch.hpp"
#include "tasks/detail/schema.hpp"
#include "util/enum_names.hpp"
#include "util/files.hpp"

namespace ptxbench::tasks {
namespace {

using detail::index_path;
using detail::join_path;
using detail::SchemaReader;
using nlohmann::json;

constexpr std::size_t kMaxTaskFileBytes = 1u << 20;  // a task file is prose + a few shapes
constexpr std::size_t kMaxRank = 5;                  // TMA's limit, and the largest the harness handles

constexpr std::string_view kScalarTypes[] = {"f32", "f64", "u32", "s32", "u64", "s64"};

// The names task files and traces use; never rename one.
constexpr util::EnumName<DType> kDTypeNames[] = {{DType::bf16, "bf16"}, {DType::f16, "f16"},
                                                 {DType::f32, "f32"},   {DType::e4m3, "e4m3"},
                                                 {DType::e5m2, "e5m2"}, {DType::i32, "i32"}};
constexpr util::EnumName<Family> kFamilyNames[] = {{Family::gemm, "gemm"},
                                                   {Family::attention_fwd, "attention_fwd"},
                                                   {Family::attention_bwd, "attention_bwd"}};
constexpr util::EnumName<Distribution> kDistributionNames[] = {{Distribution::normal, "normal"},
                                                               {Distribution::uniform, "uniform"},
                                                               {Distribution::spiky, "spiky"},
                                                               {Distribution::derived, "derived"}};

std::string reference_for(Family f) {
  switch (f) {
    case Family::gemm:
      return "cublaslt";
    case Family::attention_fwd:
      return "cudnn_sdpa_fwd";
    case Family::attention_bwd:
      return "cudnn_sdpa_bwd";
  }
  return "";
}

std::string joined(const std::vector<std::string> &names) {
  std::string out;
  for (const auto &n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

/// Reads one task document; every problem goes to `r`.
class TaskReader {
 public:
  TaskReader(SchemaReader &r, Task &t) : r_(r), t_(t) {}

  void read(const json &root, const std::string &stem) {
    if (!r_.expect_object(root, "")) return;
    r_.reject_unknown_fields(root, "",
                             {"id", "family", "arch", "title", "description", "tensors", "scalars", "symbols",
                              "workloads", "targets", "reference", "causal", "tolerances", "tolerance_note",
                              "flops", "bytes", "tags", "hidden_workloads", "ranges"});
    read_header(root, stem);
    read_symbols(root);
    read_tensors(root);
    read_scalars(root);
    read_workloads(root, "workloads", true, t_.workloads);
    read_workloads(root, "hidden_workloads", false, t_.hidden_workloads);
    read_ranges(root);
    read_targets(root);
    read_tolerances(root);
    t_.flops = read_work_expression(root, "flops");
    t_.bytes = read_work_expression(root, "bytes");
    read_tags(root);
    check_shapes_per_workload();
  }

 private:
  void read_header(const json &root, const std::string &stem) {
    if (auto id = r_.string_member(root, "", "id", true)) {
      t_.id = *id;
      if (*id != stem) r_.error("id", fmt::format("'{}' differs from the file name '{}.json'", *id, stem));
    }
    if (auto fam = r_.string_member(root, "", "family", true)) {
      if (auto f = util::enum_from_string(kFamilyNames, *fam))
        t_.family = *f;
      else
        r_.error("family",
                 fmt::format("unknown family '{}' (known: {})", *fam, util::enum_names(kFamilyNames)));
    }
    if (auto arch = r_.string_member(root, "", "arch", true)) {
      t_.arch = *arch;
      if (!arch_facts(*arch)) {
        std::vector<std::string> known;
        for (const auto &a : known_archs()) known.emplace_back(a.arch);
        r_.error("arch", fmt::format("unknown architecture '{}' (known: {})", *arch, joined(known)));
      }
    }
    for (const char *key : {"title", "description"}) {
      auto text = r_.string_member(root, "", key, true);
      if (!text) continue;
      if (text->empty()) r_.error(key, "must not be empty");
      (std::string_view(key) == "title" ? t_.title : t_.description) = *text;
    }
    if (auto ref = r_.string_member(root, "", "reference", true)) {
      t_.reference = *ref;
      if (*ref != "cublaslt" && *ref != "cudnn_sdpa_fwd" && *ref != "cudnn_sdpa_bwd")
        r_.error(
            "reference",
            fmt::format("unknown reference '{}' (known: cublaslt, cudnn_sdpa_fwd, cudnn_sdpa_bwd)", *ref));
      else if (*ref != reference_for(t_.family))
        r_.error("reference", fmt::format("'{}' does not compute family '{}' (expected '{}')", *ref,
                                          to_string(t_.family), reference_for(t_.family)));
    }
    if (auto causal = r_.bool_member(root, "", "causal", false)) {
      t_.causal = *causal;
      if (*causal && t_.family == Family::gemm)
        r_.error("causal", "a causal mask applies to attention tasks only");
    }
  }

  /// Records a name, reporting clashes between symbols, tensors and scalars (the manifest names them all).
  void claim_name(const std::string &name, const std::string &path, const char *what) {
    auto [it, fresh] = names_.emplace(name, what);
    if (!fresh) r_.error(path, fmt::format("duplicate name '{}' (already used by a {})", name, it->second));
  }

  void read_symbols(const json &root) {
    const json *symbols = r_.array_member(root, "", "symbols", true);
    if (!symbols) return;
    if (symbols->empty()) r_.error("symbols", "must name at least one symbol");
    for (std::size_t i = 0; i < symbols->size(); ++i) {
      std::string path = index_path("symbols", i);
      if (!r_.expect_string((*symbols)[i], path)) continue;
      auto name = (*symbols)[i].get<std::string>();
      if (!detail::is_identifier(name)) {
        r_.error(path, fmt::format("'{}' is not an identifier (letters, digits, _)", name));
        continue;
      }
      claim_name(name, path, "symbol");
      t_.symbols.push_back(name);
      unit_symbols_[name] = 1;
    }
  }

  /// Checks an expression's syntax and names with every symbol set to 1.
  bool check_expression(const std::string &text, const std::string &path) {
    auto v = util::evaluate_int_expression(text, unit_symbols_);
    if (v) return true;
    r_.error(path, fmt::format("bad expression '{}': {}", text, v.error()));
    return false;
  }

  void read_tensors(const json &root) {
    const json *tensors = r_.array_member(root, "", "tensors", true);
    if (!tensors) return;
    if (tensors->empty()) r_.error("tensors", "must list at least one tensor");
    for (std::size_t i = 0; i < tensors->size(); ++i) {
      std::string path = index_path("tensors", i);
      const json &j = (*tensors)[i];
      if (!r_.expect_object(j, path)) continue;
      r_.reject_unknown_fields(j, path, {"name", "dtype", "shape", "role", "distribution", "description"});
      Tensor t;
      bool good = true;
      if (auto name = r_.string_member(j, path, "name", true)) {
        t.name = *name;
        if (!detail::is_identifier(*name)) {
          r_.error(join_path(path, "name"),
                   fmt::format("'{}' is not an identifier (letters, digits, _)", *name));
          good = false;
        } else {
          claim_name(*name, join_path(path, "name"), "tensor");
        }
      } else {
        good = false;
      }
      if (auto dt = r_.string_member(j, path, "dtype", true)) {
        if (auto d = dtype_from_string(*dt))
          t.dtype = *d;
        else
          r_.error(join_path(path, "dtype"),
                   fmt::format("unknown dtype '{}' (known: {})", *dt, util::enum_names(kDTypeNames)));
      }
      bool shape_ok = true;
      if (const json *shape = r_.array_member(j, path, "shape", true)) {
        std::string shape_path = join_path(path, "shape");
        if (shape->empty() || shape->size() > kMaxRank)
          r_.error(shape_path, fmt::format("rank {} (must be 1 to {})", shape->size(), kMaxRank));
        for (std::size_t d = 0; d < shape->size(); ++d) {
          std::string dim_path = index_path(shape_path, d);
          auto expr = r_.expression_value((*shape)[d], dim_path);
          if (!expr) continue;
          if (!check_expression(*expr, dim_path)) shape_ok = false;
          t.shape.push_back(*expr);
        }
      }
      if (auto role = r_.string_member(j, path, "role", true)) {
        if (*role == "input")
          t.role = TensorRole::input;
        else if (*role == "output")
          t.role = TensorRole::output;
        else
          r_.error(join_path(path, "role"), fmt::format("unknown role '{}' (known: input, output)", *role));
      }
      if (auto dist = r_.string_member(j, path, "distribution", false)) {
        if (auto d = util::enum_from_string(kDistributionNames, *dist))
          t.distribution = *d;
        else
          r_.error(join_path(path, "distribution"), fmt::format("unknown distribution '{}' (known: {})",
                                                                *dist, util::enum_names(kDistributionNames)));
        if (t.role == TensorRole::output)
          r_.error(join_path(path, "distribution"),
                   "applies to inputs only (outputs are written by the kernel)");
      }
      if (auto desc = r_.string_member(j, path, "description", false)) t.description = *desc;
      if (good) {
        if (shape_ok) tensor_paths_[t.name] = path;
        t_.tensors.push_back(std::move(t));
      }
    }
  }

  void read_scalars(const json &root) {
    const json *scalars = r_.array_member(root, "", "scalars", false);
    if (!scalars) return;
    for (std::size_t i = 0; i < scalars->size(); ++i) {
      std::string path = index_path("scalars", i);
      const json &j = (*scalars)[i];
      if (!r_.expect_object(j, path)) continue;
      r_.reject_unknown_fields(j, path, {"name", "type", "value", "description"});
      Scalar s;
      if (auto name = r_.string_member(j, path, "name", true)) {
        s.name = *name;
        if (!detail::is_identifier(*name))
          r_.error(join_path(path, "name"),
                   fmt::format("'{}' is not an identifier (letters, digits, _)", *name));
        else
          claim_name(*name, join_path(path, "name"), "scalar");
      }
      if (auto type = r_.string_member(j, path, "type", true)) {
        s.type = *type;
        if (std::find(std::begin(kScalarTypes), std::end(kScalarTypes), *type) == std::end(kScalarTypes))
          r_.error(join_path(path, "type"),
                   fmt::format("unknown scalar type '{}' (known: f32, f64, u32, s32, u64, s64)", *type));
      }
      if (auto value = r_.number_member(j, path, "value", true)) {
        s.value = *value;
        bool integral_type = s.type != "f32" && s.type != "f64";
        if (integral_type && std::trunc(*value) != *value)
          r_.error(join_path(path, "value"),
                   fmt::format("{} is not an integer, but the type is {}", *value, s.type));
        if (integral_type && s.type[0] == 'u' && *value < 0)
          r_.error(join_path(path, "value"),
                   fmt::format("{} is negative, but the type is {}", *value, s.type));
      }
      if (auto desc = r_.string_member(j, path, "description", false)) s.description = *desc;
      t_.scalars.push_back(std::move(s));
    }
  }

  /// `workloads` (required, the first is the headline) or `hidden_workloads` (optional); names are unique
  /// across both lists.
  void read_workloads(const json &root, const char *list_key, bool required, std::vector<Workload> &out) {
    const json *workloads = r_.array_member(root, "", list_key, required);
    if (!workloads) return;
    if (required && workloads->empty())
      r_.error(list_key, "must list at least one workload (the first is the headline)");
    std::set<std::string> &seen = workload_names_;
    for (std::size_t i = 0; i < workloads->size(); ++i) {
      std::string path = index_path(list_key, i);
      const json &j = (*workloads)[i];
      if (!r_.expect_object(j, path)) continue;
      r_.reject_unknown_fields(j, path, {"name", "symbols"});
      Workload w;
      bool good = true;
      if (auto name = r_.string_member(j, path, "name", true)) {
        w.name = *name;
        if (name->empty()) r_.error(join_path(path, "name"), "must not be empty");
        if (!seen.insert(*name).second)
          r_.error(join_path(path, "name"), fmt::format("duplicate workload name '{}'", *name));
      }
      if (const json *symbols = r_.object_member(j, path, "symbols", true)) {
        std::string sym_path = join_path(path, "symbols");
        for (const auto &[key, value] : symbols->items()) {
          if (!unit_symbols_.count(key)) {
            r_.error(join_path(sym_path, key),
                     fmt::format("unknown symbol '{}' (declared symbols: {})", key, joined(t_.symbols)));
            good = false;
            continue;
          }
          auto v = r_.integer_value(value, join_path(sym_path, key));
          if (!v) {
            good = false;
          } else if (*v <= 0) {
            r_.error(join_path(sym_path, key), fmt::format("{} is not positive", *v));
            good = false;
          } else {
            w.symbols[key] = *v;
          }
        }
        for (const auto &s : t_.symbols)
          if (!symbols->contains(s)) {
            r_.error(sym_path,
                     fmt::format("missing symbol '{}' (every workload sets: {})", s, joined(t_.symbols)));
            good = false;
          }
      } else {
        good = false;
      }
      if (good) out.push_back(std::move(w));
    }
  }

  /// `ranges`: {symbol: {min, max, multiple_of}}; every workload, shown or hidden, must lie inside.
  void read_ranges(const json &root) {
    const json *ranges = r_.object_member(root, "", "ranges", false);
    if (!ranges) {
      if (!t_.hidden_workloads.empty())
        r_.error("hidden_workloads", "needs 'ranges': the prompt states them in place of the hidden values");
      return;
    }
    for (const auto &item : ranges->items()) {
      // Named, not a structured binding: the lambda below captures them (clang 14 cannot capture bindings).
      const std::string symbol = item.key();
      const json &value = item.value();
      const std::string path = join_path("ranges", symbol);
      if (!unit_symbols_.count(symbol)) {
        r_.error(path, fmt::format("unknown symbol '{}' (declared symbols: {})", symbol, joined(t_.symbols)));
        continue;
      }
      if (!r_.expect_object(value, path)) continue;
      r_.reject_unknown_fields(value, path, {"min", "max", "multiple_of"});
      SymbolRange range;
      bool good = true;
      const auto read_positive = [&](const char *field, bool required, std::int64_t &into) {
        const json *v = r_.member(value, path, field, required);
        if (!v) {
          good = good && !required;
          return;
        }
        const auto n = r_.integer_value(*v, join_path(path, field));
        if (n && *n <= 0) r_.error(join_path(path, field), fmt::format("{} is not positive", *n));
        if (!n || *n <= 0)
          good = false;
        else
          into = *n;
      };
      read_positive("min", true, range.min);
      read_positive("max", true, range.max);
      read_positive("multiple_of", false, range.multiple_of);
      if (!good) continue;
      if (range.min > range.max) {
        r_.error(path, fmt::format("min {} is above max {}", range.min, range.max));
        continue;
      }
      t_.ranges[symbol] = range;
    }
    for (const auto *list : {&t_.workloads, &t_.hidden_workloads})
      for (const auto &w : *list)
        for (const auto &[symbol, range] : t_.ranges) {
          const auto it = w.symbols.find(symbol);
          if (it != w.symbols.end() && !range.contains(it->second))
            r_.error(join_path("ranges", symbol),
                     fmt::format("workload '{}' sets {} = {}, outside the stated range", w.name, symbol,
                                 it->second));
        }
  }

  void read_targets(const json &root) {
    const json *targets = r_.array_member(root, "", "targets", true);
    if (!targets) return;
    if (targets->empty()) r_.error("targets", "must list at least one target instruction");
    std::set<std::string> seen;
    for (std::size_t i = 0; i < targets->size(); ++i) {
      std::string path = index_path("targets", i);
      const json &j = (*targets)[i];
      if (!r_.expect_object(j, path)) continue;
      r_.reject_unknown_fields(j, path, {"name", "ptx_mnemonic", "sass_families", "description"});
      TargetInstruction t;
      if (auto name = r_.string_member(j, path, "name", true)) {
        t.name = *name;
        if (!detail::is_identifier(*name))
          r_.error(join_path(path, "name"),
                   fmt::format("'{}' is not an identifier (letters, digits, _)", *name));
        if (!seen.insert(*name).second)
          r_.error(join_path(path, "name"), fmt::format("duplicate target name '{}'", *name));
      }
      if (auto mnemonic = r_.string_member(j, path, "ptx_mnemonic", true)) {
        t.ptx_mnemonic = *mnemonic;
        bool valid = !mnemonic->empty() && std::all_of(mnemonic->begin(), mnemonic->end(), [](char c) {
          return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == ':';
        });
        if (!valid)
          r_.error(join_path(path, "ptx_mnemonic"),
                   fmt::format("'{}' is not a PTX mnemonic prefix (lower-case, digits, '.', '_', ':')",
                               *mnemonic));
      }
      if (const json *families = r_.array_member(j, path, "sass_families", true)) {
        std::string fam_path = join_path(path, "sass_families");
        if (families->empty()) r_.error(fam_path, "must name at least one SASS opcode family");
        for (std::size_t f = 0; f < families->size(); ++f) {
          if (!r_.expect_string((*families)[f], index_path(fam_path, f))) continue;
          auto fam = (*families)[f].get<std::string>();
          bool valid = !fam.empty() && std::all_of(fam.begin(), fam.end(), [](char c) {
            return (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
          });
          if (!valid)
            r_.error(index_path(fam_path, f),
                     fmt::format("'{}' is not a SASS opcode family (upper-case, e.g. HGMMA)", fam));
          t.sass_families.push_back(fam);
        }
      }
      if (auto desc = r_.string_member(j, path, "description", false)) t.description = *desc;
      t_.targets.push_back(std::move(t));
    }
  }

  void read_tolerances(const json &root) {
    if (auto note = r_.string_member(root, "", "tolerance_note", false)) {
      if (note->empty()) r_.error("tolerance_note", "must not be empty (leave the field out instead)");
      t_.tolerance_note = *note;
    }
    const json *tols = r_.object_member(root, "", "tolerances", true);
    if (!tols) return;
    for (const auto &[name, value] : tols->items()) {
      std::string path = join_path("tolerances", name);
      const Tensor *tensor = t_.find_tensor(name);
      if (!tensor) {
        r_.error(path, fmt::format("'{}' is not a tensor of this task", name));
        continue;
      }
      if (tensor->role != TensorRole::output) {
        r_.error(path, fmt::format("'{}' is an input; tolerances apply to outputs only", name));
        continue;
      }
      if (!r_.expect_object(value, path)) continue;
      r_.reject_unknown_fields(value, path, {"atol", "rtol", "reason"});
      Tolerance tol;
      for (const char *key : {"atol", "rtol"}) {
        auto v = r_.number_member(value, path, key, true);
        if (!v) continue;
        if (*v < 0) r_.error(join_path(path, key), fmt::format("{} is negative", *v));
        (std::string_view(key) == "atol" ? tol.atol : tol.rtol) = *v;
      }
      if (auto reason = r_.string_member(value, path, "reason", false)) tol.reason = *reason;
      t_.tolerances[name] = tol;
    }
    for (const auto &t : t_.tensors)
      if (t.role == TensorRole::output && !tols->contains(t.name))
        r_.error("tolerances", fmt::format("missing tolerance for output '{}'", t.name));
  }

  std::string read_work_expression(const json &root, const char *key) {
    const json *v = r_.member(root, "", key, true);
    if (!v) return "";
    auto expr = r_.expression_value(*v, key);
    if (!expr) return "";
    if (!check_expression(*expr, key)) return *expr;
    for (const auto &w : all_workloads()) {
      auto value = util::evaluate_int_expression(*expr, w.symbols);
      if (!value)
        r_.error(key, fmt::format("at workload '{}': {}", w.name, value.error()));
      else if (*value <= 0)
        r_.error(key, fmt::format("evaluates to {} at workload '{}' (must be positive)", *value, w.name));
    }
    return *expr;
  }

  void read_tags(const json &root) {
    const json *tags = r_.object_member(root, "", "tags", false);
    if (!tags) return;
    for (const auto &[key, value] : tags->items())
      if (r_.expect_string(value, join_path("tags", key))) t_.tags[key] = value.get<std::string>();
  }

  /// Every tensor dimension must be positive at every workload, and the byte size must fit in 64 bits.
  void check_shapes_per_workload() {
    for (const auto &t : t_.tensors) {
      auto known = tensor_paths_.find(t.name);
      if (known == tensor_paths_.end()) continue;  // its shape already has a reported error
      const std::string &path = known->second;
      for (const auto &w : all_workloads()) {
        std::int64_t bytes = static_cast<std::int64_t>(size_of(t.dtype));
        for (std::size_t d = 0; d < t.shape.size(); ++d) {
          auto v = util::evaluate_int_expression(t.shape[d], w.symbols);
          std::string dim_path = index_path(join_path(path, "shape"), d);
          if (!v) {
            r_.error(dim_path, fmt::format("at workload '{}': {}", w.name, v.error()));
            break;
          }
          if (*v <= 0) {
            r_.error(dim_path, fmt::format("'{}' evaluates to {} at workload '{}' (must be positive)",
                                           t.shape[d], *v, w.name));
            break;
          }
          if (__builtin_mul_overflow(bytes, *v, &bytes)) {
            r_.error(join_path(path, "shape"),
                     fmt::format("size overflows 64 bits at workload '{}'", w.name));
            break;
          }
        }
      }
    }
  }

  SchemaReader &r_;
  Task &t_;
  std::map<std::string, std::string> names_;  // name -> what uses it (symbol, tensor, scalar)
  std::map<std::string, std::string> tensor_paths_;
  util::SymbolTable unit_symbols_;        // every declared symbol = 1, for syntax/name checks
  std::set<std::string> workload_names_;  // shown and hidden: one name space

  std::vector<Workload> all_workloads() const {
    std::vector<Workload> all = t_.workloads;
    all.insert(all.end(), t_.hidden_workloads.begin(), t_.hidden_workloads.end());
    return all;
  }
};

std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      std::size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

}  // namespace

std::string to_string(DType d) {
  return std::string(util::enum_to_string(kDTypeNames, d));
}

std::optional<DType> dtype_from_string(std::string_view text) {
  return util::enum_from_string(kDTypeNames, text);
}

std::size_t size_of(DType d) {
  switch (d) {
    case DType::bf16:
    case DType::f16:
      return 2;
    case DType::f32:
    case DType::i32:
      return 4;
    case DType::e4m3:
    case DType::e5m2:
      return 1;
  }
  throw std::logic_error("unknown DType");
}

std::string to_string(Family f) {
  return std::string(util::enum_to_string(kFamilyNames, f));
}

std::string to_string(Distribution d) {
  return std::string(util::enum_to_string(kDistributionNames, d));
}

util::Expected<Task> load_task_file(const std::filesystem::path &path) {
  const std::string file = path.string();
  std::error_code ec;
  auto size = std::filesystem::file_size(path, ec);
  if (ec) return util::unexpected(fmt::format("{}: cannot read: {}", file, ec.message()));
  if (size > kMaxTaskFileBytes)
    return util::unexpected(
        fmt::format("{}: {} bytes, more than the {} a task file may have", file, size, kMaxTaskFileBytes));
  std::ifstream in(path, std::ios::binary);
  if (!in) return util::unexpected(fmt::format("{}: cannot open for reading", file));
  std::ostringstream text;
  text << in.rdbuf();
  auto parsed = detail::parse_json_strict(text.str());
  if (!parsed.error.empty()) return util::unexpected(fmt::format("{}: {}", file, parsed.error));

  SchemaReader reader;
  Task task;
  TaskReader(reader, task).read(parsed.value, path.stem().string());
  if (!reader.ok()) {
    std::string message;
    for (const auto &e : reader.errors()) message += (message.empty() ? "" : "\n") + file + ": " + e;
    return util::unexpected(message);
  }
  task.source = path;
  return task;
}

util::Expected<std::vector<Task>> load_task_dir(const std::filesystem::path &dir) {
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec))
    return util::unexpected(fmt::format(
        "{}: not a directory (point --tasks-dir or PTXBENCH_TASKS at the tasks folder)", dir.string()));
  std::vector<std::filesystem::path> files;
  for (const auto &entry : std::filesystem::directory_iterator(dir, ec)) {
    std::error_code entry_ec;  // an unreadable entry is skipped, not a listing failure
    if (entry.path().extension() == ".json" && entry.is_regular_file(entry_ec)) files.push_back(entry.path());
  }
  if (ec) return util::unexpected(fmt::format("{}: cannot list: {}", dir.string(), ec.message()));
  if (files.empty()) return util::unexpected(fmt::format("{}: no task files (*.json)", dir.string()));
  std::sort(files.begin(), files.end());
  std::vector<Task> tasks;
  std::string errors;
  for (const auto &f : files) {
    auto task = load_task_file(f);
    if (task)
      tasks.push_back(std::move(task).value());
    else
      errors += (errors.empty() ? "" : "\n") + task.error();
  }
  if (!errors.empty()) return util::unexpected(errors);
  std::sort(tasks.begin(), tasks.end(), [](const Task &a, const Task &b) { return a.id < b.id; });
  return tasks;
}

const Task *find_task(const std::vector<Task> &tasks, std::string_view id) {
  for (const auto &t : tasks)
    if (t.id == id) return &t;
  return nullptr;
}

std::vector<std::string> similar_task_ids(const std::vector<Task> &tasks, std::string_view id,
                                          std::size_t max_results) {
  std::vector<std::pair<std::size_t, std::string>> ranked;
  const std::size_t threshold = std::max<std::size_t>(3, id.size() / 3);
  for (const auto &t : tasks) {
    std::size_t d = edit_distance(id, t.id);
    bool contains = !id.empty() && (t.id.find(id) != std::string::npos || id.find(t.id) != std::string::npos);
    if (d <= threshold || contains) ranked.emplace_back(contains ? std::min(d, threshold) : d, t.id);
  }
  std::sort(ranked.begin(), ranked.end());
  std::vector<std::string> out;
  for (std::size_t i = 0; i < ranked.size() && i < max_results; ++i) out.push_back(ranked[i].second);
  return out;
}

std::filesystem::path default_task_dir() {
  return util::data_dir("PTXBENCH_TASKS", "../share/ptxbench/tasks",
                        std::filesystem::path(PTXBENCH_SOURCE_DIR) / "tasks");
}

}  // namespace ptxbench::tasks
