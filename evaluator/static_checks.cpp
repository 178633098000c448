#include "evaluator/static_checks.hpp"

#include "tasks/arch.hpp"

#include <algorithm>
#include <cstdlib>
#include <map>
#include <set>

#include <fmt/core.h>
#include <fmt/ranges.h>

namespace ptxbench::evaluator {
namespace {

// What `.target <arch>` enables over the plain target (for the missing-'a' message).
std::string_view arch_features(std::string_view arch) {
  const tasks::ArchFacts *facts = tasks::arch_facts(arch);
  return facts ? facts->arch_specific_features : std::string_view("the architecture-specific instructions");
}

int version_x10(std::string_view v) {
  std::size_t dot = v.find('.');
  if (dot == std::string_view::npos) return std::atoi(std::string(v).c_str()) * 10;
  return std::atoi(std::string(v.substr(0, dot)).c_str()) * 10 +
         std::atoi(std::string(v.substr(dot + 1, 1)).c_str());
}

bool is_pointer_type(std::string_view t) {
  return t == ".u64" || t == ".b64" || t == ".s64";
}

// Which PTX parameter types accept a task scalar of type `scalar_type` (task.hpp: f32, u32, s32, u64, s64).
std::vector<std::string> accepted_scalar_types(std::string_view scalar_type) {
  if (scalar_type == "f32") return {".f32", ".b32"};
  if (scalar_type == "u32" || scalar_type == "s32") return {".u32", ".s32", ".b32"};
  if (scalar_type == "u64" || scalar_type == "s64") return {".u64", ".s64", ".b64"};
  if (scalar_type == "f64") return {".f64", ".b64"};
  return {"." + std::string(scalar_type)};
}

void error(StageResult &s, std::string text, std::optional<int> line = std::nullopt) {
  s.diagnostics.push_back({"error", std::move(text), line});
}
void warning(StageResult &s, std::string text, std::optional<int> line = std::nullopt) {
  s.diagnostics.push_back({"warning", std::move(text), line});
}

void check_target(StageResult &s, const PtxModule &m, const tasks::Task &task) {
  if (m.version.empty())
    error(s, fmt::format("no .version directive: start the module with `.version 8.7`, `.target {}`, "
                         "`.address_size 64`",
                         task.arch));
  if (m.target.empty()) {
    error(s, fmt::format("no .target directive: this task needs `.target {}`", task.arch));
  } else if (m.target != task.arch) {
    if (task.arch.ends_with('a') && m.target == task.arch.substr(0, task.arch.size() - 1))
      error(s, fmt::format(
                   "`.target {0}` lacks the 'a' suffix: this task needs `.target {1}`, which enables the "
                   "architecture-specific instructions ({2}); ptxas rejects them for plain {0}",
                   m.target, task.arch, arch_features(task.arch)));
    else
      error(s, fmt::format("`.target {}` does not match this task's architecture {}: write `.target {}`",
                           m.target, task.arch, task.arch));
  }
  if (!m.version.empty()) {
    const tasks::ArchFacts *facts = tasks::arch_facts(task.arch);
    const int need = facts ? facts->min_ptx_version_x10 : 0;
    if (version_x10(m.version) < need)
      error(s, fmt::format("`.version {}` is too old for {}: it needs PTX ISA {}.{} or newer", m.version,
                           task.arch, need / 10, need % 10));
  }
  if (m.address_size == 32)
    error(s, "`.address_size 32`: device pointers are 64-bit here; write `.address_size 64`");
  else if (m.address_size == 0)
    warning(s, "no `.address_size 64` directive (ptxas then assumes 32-bit addresses in some contexts)");
}

// A scalar parameter: a type that can hold the task scalar (or the workload symbol's every value).
void check_scalar_param(StageResult &s, const std::string &where, const PtxParam &p, const ManifestParam &mp,
                        const tasks::Task &task, const std::vector<LaunchPlan> &plans) {
  std::vector<std::string> ok;
  const bool symbol = std::find(task.symbols.begin(), task.symbols.end(), mp.name) != task.symbols.end();
  if (symbol)
    ok = {".u32", ".s32", ".b32", ".u64", ".s64", ".b64"};
  else if (const auto *sc = task.find_scalar(mp.name))
    ok = accepted_scalar_types(sc->type);
  if (p.array_size > 0 || std::find(ok.begin(), ok.end(), p.type) == ok.end()) {
    error(s,
          fmt::format("{}: the entry declares `{}`, which cannot hold it; use one of {}", where,
                      p.declaration(), fmt::join(ok, ", ")),
          p.line);
    return;
  }
  if (!symbol || ptx_type_bytes(p.type) != 4) return;
  const bool is_signed = p.type == ".s32";
  const std::int64_t hi = is_signed ? 2147483647LL : 4294967295LL;
  const std::int64_t lo = is_signed ? -2147483648LL : 0;
  for (const auto &plan : plans) {
    auto it = plan.symbols.find(mp.name);
    if (it == plan.symbols.end() || (it->second <= hi && it->second >= lo)) continue;
    error(s,
          fmt::format("{}: {} = {} in workload {} does not fit in {}", where, mp.name, it->second,
                      plan.workload, p.type),
          p.line);
    return;
  }
}

void check_params(StageResult &s, const PtxFunction &entry, const Manifest &manifest, const tasks::Task &task,
                  const std::vector<LaunchPlan> &plans) {
  if (entry.params.size() != manifest.params.size()) {
    std::vector<std::string> decl;
    for (const auto &p : entry.params) decl.push_back(p.declaration());
    error(s,
          fmt::format("the manifest lists {} parameter(s) but .entry {} declares {}{}",
                      manifest.params.size(), entry.name, entry.params.size(),
                      decl.empty() ? "" : fmt::format(": {}", fmt::join(decl, ", "))),
          entry.line);
    return;
  }
  for (std::size_t i = 0; i < entry.params.size(); ++i) {
    const PtxParam &p = entry.params[i];
    const ManifestParam &mp = manifest.params[i];
    const std::string where =
        mp.kind == ParamKind::workspace
            ? fmt::format("parameter {} ('{}', the manifest's workspace)", i + 1, p.name)
            : fmt::format("parameter {} ('{}', the manifest's {} {})", i + 1, p.name, to_string(mp.kind),
                          mp.name);
    switch (mp.kind) {
      case ParamKind::tensor:
      case ParamKind::workspace:
        if (!is_pointer_type(p.type) || p.array_size > 0)
          error(s,
                fmt::format("{}: {} is passed as a 64-bit device pointer, but the entry declares `{}`; "
                            "declare `.param .u64 {}`",
                            where, mp.kind == ParamKind::tensor ? "a tensor" : "the workspace",
                            p.declaration(), p.name),
                p.line);
        break;
      case ParamKind::tensor_map:
        if (p.array_size != 128 || ptx_type_bytes(p.type) != 1) {
          error(
              s,
              fmt::format(
                  "{}: a tensor map is passed by value as 128 bytes (__grid_constant__ CUtensorMap), but the "
                  "entry declares `{}`; declare `.param .align 64 .b8 {}[128]` and use its address "
                  "(e.g. `mov.u64 %rd, {}` then `cp.async.bulk.tensor ... [%rd, {{...}}]`)",
                  where, p.declaration(), p.name, p.name),
              p.line);
        } else if (p.align < 64) {
          error(
              s,
              fmt::format("{}: a tensor map must be 64-byte aligned; declare `.param .align 64 .b8 {}[128]`",
                          where, p.name),
              p.line);
        }
        break;
      case ParamKind::scalar:
        check_scalar_param(s, where, p, mp, task, plans);
        break;
    }
  }
}

void check_launch_bounds(StageResult &s, const PtxFunction &entry, const std::vector<LaunchPlan> &plans) {
  for (const auto &plan : plans) {
    const std::int64_t threads = plan.block[0] * plan.block[1] * plan.block[2];
    if (!entry.reqntid.empty()) {
      std::array<std::int64_t, 3> want{1, 1, 1};
      for (std::size_t d = 0; d < std::min<std::size_t>(3, entry.reqntid.size()); ++d)
        want[d] = entry.reqntid[d];
      if (want != plan.block) {
        error(s,
              fmt::format(
                  ".entry {} requires .reqntid {} but the manifest launches block [{}, {}, {}] (workload {})",
                  entry.name, fmt::join(entry.reqntid, ", "), plan.block[0], plan.block[1], plan.block[2],
                  plan.workload),
              entry.line);
        return;
      }
    }
    if (!entry.maxntid.empty()) {
      std::int64_t most = 1;
      for (auto v : entry.maxntid) most *= v;
      if (threads > most) {
        error(s,
              fmt::format(".entry {} allows at most {} threads (.maxntid {}) but the manifest's block has {} "
                          "(workload {})",
                          entry.name, most, fmt::join(entry.maxntid, ", "), threads, plan.workload),
              entry.line);
        return;
      }
    }
    if (!entry.reqnctapercluster.empty()) {
      std::array<std::int64_t, 3> want{1, 1, 1};
      for (std::size_t d = 0; d < std::min<std::size_t>(3, entry.reqnctapercluster.size()); ++d)
        want[d] = entry.reqnctapercluster[d];
      if (want != plan.cluster) {
        error(s,
              fmt::format(".entry {} declares cluster {} but the manifest's cluster is [{}, {}, {}]",
                          entry.name, fmt::join(entry.reqnctapercluster, ", "), plan.cluster[0],
                          plan.cluster[1], plan.cluster[2]),
              entry.line);
        return;
      }
    }
  }
}

}  // namespace

nlohmann::json targets_in_ptx(const PtxModule &module, const std::vector<tasks::TargetInstruction> &targets) {
  nlohmann::json result = nlohmann::json::object();
  for (const auto &t : targets) result[t.name] = !module.instructions_with_prefix(t.ptx_mnemonic).empty();
  return result;
}

namespace {

void record_figures(StageResult &s, const PtxModule &module, const Manifest &manifest,
                    const tasks::Task &task) {
  protocol::StaticFigures f;
  f.entry = manifest.entry;
  f.ptx_version = module.version;
  f.ptx_target = module.target;
  f.instruction_count = module.instructions.size();
  f.entries = module.entry_names();
  f.targets_in_ptx = targets_in_ptx(module, task.targets).get<std::map<std::string, bool>>();
  f.module_globals_written.emplace();
  for (const auto &v : module.module_variables) {
    if (v.state_space != ".global") continue;
    f.module_globals.push_back(v.name);
    if (v.may_be_written) f.module_globals_written->push_back(v.name);
  }
  s.figures = f;
}

// The manifest's entry when the module defines it as a kernel; else an error naming the entries there are.
const PtxFunction *find_entry(StageResult &s, const PtxModule &module, const Manifest &manifest) {
  const PtxFunction *entry = module.find_function(manifest.entry);
  if (entry && entry->is_entry && entry->is_definition) return entry;
  auto entries = module.entry_names();
  std::string what = !entry ? fmt::format("the manifest's entry '{}' is not in the module", manifest.entry)
                     : !entry->is_entry
                         ? fmt::format("'{}' is a .func, not a kernel (.entry)", manifest.entry)
                         : fmt::format(".entry {} has no body", manifest.entry);
  error(s,
        what + (entries.empty() ? "; the module defines no .entry at all"
                                : fmt::format("; the module's entries: {}", fmt::join(entries, ", "))),
        entry ? std::optional(entry->line) : std::nullopt);
  return nullptr;
}

void warn_absent_targets_and_state(StageResult &s, const PtxModule &module, const tasks::Task &task,
                                   const std::vector<std::string> &present) {
  for (const auto &t : task.targets)
    if (std::find(present.begin(), present.end(), t.name) == present.end())
      warning(s,
              fmt::format(
                  "target {} absent: no `{}` instruction in the PTX; the target-executed axis will be false",
                  t.name, t.ptx_mnemonic));
  // Only what the kernel can write keeps state between launches: read-only tables and printf format
  // strings (NVRTC's namespace-scope constexpr data) are .global too.
  for (const auto &v : module.module_variables)
    if (v.state_space == ".global" && v.may_be_written)
      warning(
          s,
          fmt::format("module-scope .global variable '{}' is written by the kernel and keeps state across "
                      "launches; results cached across launches are detected at run time (inputs are "
                      "rotated and a timed launch's output is re-verified)",
                      v.name),
          v.line);
}

}  // namespace

StaticCheckResult run_static_checks(const PtxModule &module, const Manifest &manifest,
                                    const tasks::Task &task, const std::vector<LaunchPlan> &plans,
                                    std::size_t max_instructions) {
  StaticCheckResult out;
  StageResult &s = out.stage;
  record_figures(s, module, manifest, task);
  for (const auto &t : task.targets)
    if (!module.instructions_with_prefix(t.ptx_mnemonic).empty()) out.targets_in_ptx.push_back(t.name);
  check_target(s, module, task);
  const PtxFunction *entry = find_entry(s, module, manifest);
  if (entry) {
    for (const auto &p : entry->params) out.entry_param_types.push_back(p.type);
    check_params(s, *entry, manifest, task, plans);
    check_launch_bounds(s, *entry, plans);
  }
  if (module.instructions.size() > max_instructions)
    error(s, fmt::format("the module has {} instructions, more than the limit of {}",
                         module.instructions.size(), max_instructions));
  warn_absent_targets_and_state(s, module, task, out.targets_in_ptx);

  auto first_error = std::find_if(s.diagnostics.begin(), s.diagnostics.end(),
                                  [](const Diagnostic &d) { return d.severity == "error"; });
  s.status = first_error != s.diagnostics.end() ? Status::static_error : Status::ok;
  if (s.status != Status::ok) {
    s.summary = first_error->text;
  } else {
    s.summary = fmt::format(
        "{} {} ({}), {} instructions; targets in PTX: {}", module.target, manifest.entry,
        fmt::format("{} params", entry->params.size()), module.instructions.size(),
        out.targets_in_ptx.empty() ? "none" : fmt::format("{}", fmt::join(out.targets_in_ptx, ", ")));
  }
  return out;
}

std::vector<LaunchPlan> with_param_types(std::vector<LaunchPlan> plans,
                                         const std::vector<std::string> &entry_param_types) {
  for (auto &plan : plans)
    for (std::size_t i = 0; i < plan.params.size() && i < entry_param_types.size(); ++i)
      plan.params[i].ptx_type = entry_param_types[i];
  return plans;
}

}  // namespace ptxbench::evaluator
