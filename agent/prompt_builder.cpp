#include "agent/prompt_builder.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>
#include <stdexcept>

#include <fmt/core.h>

#include "agent/detail/feedback_sections.hpp"
#include "agent/detail/template.hpp"
#include "evaluator/candidate.hpp"
#include "evaluator/evaluator.hpp"
#include "evaluator/protocol/job.hpp"
#include "tasks/arch.hpp"
#include "util/files.hpp"
#include "util/int_expr.hpp"
#include "util/strings.hpp"

namespace ptxbench::agent {
namespace {

using detail::add_listed_errors;
using detail::array_at;
using detail::boolean;
using detail::correctness_feedback;
using detail::diagnostics_section;
using detail::join;
using detail::num;
using detail::ok_feedback;
using detail::resources_section;
using detail::sanitizer_section;
using detail::static_details;
using detail::str;
using detail::timing_section;
using detail::Values;
using detail::without_summary_repeats;
using evaluator::Diagnostic;
using evaluator::StageResult;
using evaluator::Status;
using evaluator::Verdict;
using nlohmann::json;

constexpr std::size_t kMaxFeedbackChars = 12000;  // characters of one feedback message (read every turn)
constexpr std::size_t kMaxTemplateBytes = 64 << 10;

// Assumed peaks for the speed-of-light hint in the task prompt (dense, no sparsity).
struct ArchPeaks {
  double bf16_tflops;  ///< TFLOP/s, dense bf16 tensor cores
  double fp8_tflops;   ///< TFLOP/s, dense fp8 tensor cores
  double dram_tbps;    ///< TB/s of DRAM bandwidth
};

const std::set<std::string> kSystemKeys = {
    "arch",    "arch_name",       "target_list",   "reference_library", "reference_notes",
    "num_sms", "workspace_limit", "target_shares", "max_shared_bytes"};
const std::set<std::string> kTaskKeys = {
    "id",      "title",     "arch",    "arch_name",  "description",       "tensors", "scalars",
    "symbols", "workloads", "targets", "tolerances", "reference_library", "speed"};
const std::set<std::string> kFeedbackKeys = {"message",     "details",   "symbols",       "summary",
                                             "diagnostics", "resources", "sanitizer",     "workloads",
                                             "timing",      "execution", "targets_state", "reference_library",
                                             "verified",    "reason",    "profile"};
const char *const kFeedbackTemplates[] = {
    "no_kernel",       "bad_manifest", "static_error", "compile_error",    "launch_error",
    "runtime_error",   "timeout",      "incorrect",    "nondeterministic", "suspicious",
    "ok_not_executed", "ok_slow",      "ok_fast",      "ok_unverified",    "unusable_response"};
const char *const kNotes[] = {"wgmma", "tma", "setmaxnreg", "tcgen05"};

std::string arch_name(const std::string &arch) {
  const tasks::ArchFacts *facts = tasks::arch_facts(arch);
  return facts ? std::string(facts->family) : arch;
}

// The quoted peaks (tasks/arch.hpp); an architecture without a reference GPU there quotes B200's.
ArchPeaks peaks_for(const std::string &arch) {
  const tasks::ArchFacts *facts = tasks::arch_facts(arch);
  const tasks::PeakRates &p = facts && facts->peaks ? *facts->peaks : *tasks::arch_facts("sm_100a")->peaks;
  return {p.bf16_flops_per_s / 1e12, p.fp8_flops_per_s / 1e12, p.dram_bytes_per_s / 1e12};
}

// What the manifest's num_sms is for this task, from the evaluator's own source (tasks/arch.hpp via
// evaluator::device_symbols), e.g. "132 on the H200 SXM".
std::string num_sms_text(const tasks::Task &task) {
  const evaluator::DeviceSymbols device = evaluator::device_symbols(task);
  if (device.num_sms <= 0) return "not known for this architecture: do not use it";
  const tasks::ArchFacts *facts = tasks::arch_facts(task.arch);
  return fmt::format("{} on the {}", device.num_sms,
                     facts && facts->peaks ? facts->peaks->gpu : "task's GPU");
}

// The symbols a manifest expression may name: the task's, then num_sms when it is known.
std::string expression_symbols(const tasks::Task &task) {
  std::string text = join(task.symbols, ", ");
  if (evaluator::device_symbols(task).num_sms > 0)
    text += (text.empty() ? "" : ", ") + std::string(evaluator::kNumSmsSymbol);
  return text;
}

// Axis 2 beyond "executed": the share of the work each target must do, with the evaluator's own thresholds
// (EvaluatorSettings, which run configs do not change). A matrix-multiply target whose SASS opcodes carry
// their shape (wgmma, mma) is held to a share of the FLOPs; a TMA-load target to a share of the bytes read.
// Beside any matrix target (tcgen05.mma too), the multiply-add work outside the targets is bounded
// (EvaluatorSettings::redundant_work): a target whose work is done again elsewhere does not count.
std::string target_shares(const tasks::Task &task) {
  const evaluator::EvaluatorSettings settings;
  std::vector<std::string> rules;
  bool matrix_target = false;
  for (const auto &t : task.targets) {
    matrix_target = matrix_target || t.ptx_mnemonic.rfind("wgmma", 0) == 0 ||
                    t.ptx_mnemonic.rfind("mma", 0) == 0 || t.ptx_mnemonic.rfind("tcgen05.mma", 0) == 0;
    if (t.ptx_mnemonic.rfind("wgmma", 0) == 0 || t.ptx_mnemonic.rfind("mma", 0) == 0)
      rules.push_back(
          fmt::format("the {} instructions must do at least {:g}% of the workload's FLOPs (as the "
                      "task counts them: a matmul left on other instructions beside them fails)",
                      t.ptx_mnemonic, 100 * settings.min_target_work_share));
    else if (t.sass_families == std::vector<std::string>{"UTMALDG"})
      rules.push_back(fmt::format(
          "the TMA loads must deliver at least {:g}% of the bytes the kernel reads from "
          "global memory (plain ld.global and cp.async loads are the rest), counted as requested: each "
          "executed TMA load counts its whole box, edges included, and each plain load its width "
          "times the threads that ran it",
          100 * settings.min_tma_byte_share));
  }
  if (matrix_target)
    rules.push_back(fmt::format(
        "beside them, multiply-add instructions outside the targets (other tensor-core instructions such as "
        "mma.sync{}) may do at most {:g}% of the workload's FLOPs: a matmul computed on a target and again "
        "elsewhere, the target's results thrown away or multiplied by 0, does not count",
        settings.redundant_work.count_fma_pipe ? ", and fma on the CUDA cores: FFMA, HFMA2, DFMA" : "",
        100 * settings.redundant_work.max_non_target_share));
  return rules.empty() ? "" : ". Running is not enough on its own: " + join(rules, ", and ");
}

std::string max_shared_text(const std::string &arch) {
  const tasks::ArchFacts *facts = tasks::arch_facts(arch);
  return facts ? fmt::format("{} bytes", facts->max_shared_bytes_per_block) : "the device's limit";
}

std::string reference_library(const tasks::Task &t) {
  if (t.reference == "cublaslt") return "cuBLASLt";
  if (t.reference == "cudnn_sdpa_fwd") return "cuDNN fused attention (SDPA forward)";
  if (t.reference == "cudnn_sdpa_bwd") return "cuDNN fused attention (SDPA backward)";
  return t.reference;
}

/// Every feedback key, empty: each template is rendered with all of them set.
Values empty_feedback_values() {
  Values values;
  for (const auto &k : kFeedbackKeys) values[k] = "";
  return values;
}

const StageResult &failing_stage(const Verdict &v) {
  for (const auto &row : protocol::kStageTable)
    if (row.decides_status && v.stage(row.stage).status == v.status) return v.stage(row.stage);
  return v.parse;
}

std::string read_file(const std::filesystem::path &path, std::string &error) {
  std::error_code ec;
  auto size = std::filesystem::file_size(path, ec);
  if (ec) {
    error = fmt::format("{}: cannot read: {}", path.string(), ec.message());
    return "";
  }
  if (size > kMaxTemplateBytes) {
    error = fmt::format("{}: {} bytes, more than a template may have ({})", path.string(), size,
                        kMaxTemplateBytes);
    return "";
  }
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

std::string distribution_text(tasks::Distribution d) {
  switch (d) {
    case tasks::Distribution::normal:
      return "values N(0,1)";
    case tasks::Distribution::uniform:
      return "values U(-1,1)";
    case tasks::Distribution::spiky:
      return "values N(0,1) with rare N(0,100) outliers";
    case tasks::Distribution::derived:
      return "computed by the reference from the other inputs";
  }
  return "";
}

}  // namespace

util::Expected<PromptBuilder> PromptBuilder::load(const std::filesystem::path &dir) {
  PromptBuilder builder;
  std::vector<std::pair<std::string, const std::set<std::string> *>> wanted = {{"system", &kSystemKeys},
                                                                               {"task", &kTaskKeys}};
  static const std::set<std::string> kNoKeys;
  for (const char *n : kNotes) wanted.emplace_back(std::string("notes/") + n, &kNoKeys);
  for (const char *f : kFeedbackTemplates) wanted.emplace_back(std::string("feedback/") + f, &kFeedbackKeys);
  std::vector<std::string> errors;
  for (const auto &[name, keys] : wanted) {
    std::filesystem::path file = dir / (name + ".txt");
    std::string error;
    std::string text = read_file(file, error);
    if (!error.empty()) {
      errors.push_back(error);
      continue;
    }
    for (const auto &p : detail::template_placeholders(text))
      if (!keys->count(p)) {
        std::vector<std::string> known(keys->begin(), keys->end());
        errors.push_back(fmt::format("{}: unknown placeholder {{{{{}}}}} (this template may use: {})",
                                     file.string(), p, known.empty() ? "none" : join(known, ", ")));
      }
    builder.templates_[name] = std::move(text);
  }
  std::filesystem::path packs_dir = dir / "packs";
  std::error_code ec;
  if (!std::filesystem::is_directory(packs_dir, ec)) packs_dir = default_dir() / "packs";
  auto packs = load_knowledge_packs(packs_dir);
  if (!packs) {
    errors.push_back(packs.error());
  } else {
    builder.packs_ = std::move(*packs);
  }
  if (!errors.empty()) return util::unexpected(join(errors, "\n"));
  return builder;
}

util::Expected<void> PromptBuilder::check_packs(const std::vector<std::string> &names) const {
  std::vector<std::string> unknown;
  for (const auto &n : names)
    if (!packs_.count(n)) unknown.push_back(n);
  if (unknown.empty()) return {};
  std::vector<std::string> known;
  for (const auto &[n, p] : packs_) known.push_back(n);
  return util::unexpected(fmt::format("unknown knowledge pack{} {} (known: {})",
                                      unknown.size() > 1 ? "s" : "", join(unknown, ", "),
                                      known.empty() ? "none" : join(known, ", ")));
}

std::filesystem::path PromptBuilder::default_dir() {
  return util::data_dir("PTXBENCH_PROMPTS", "../share/ptxbench/prompts",
                        std::filesystem::path(PTXBENCH_SOURCE_DIR) / "prompts");
}

std::string PromptBuilder::system_prompt(const tasks::Task &task, const ReferenceSelection &reference) const {
  std::vector<std::string> targets;
  std::set<std::string> notes;
  for (const auto &t : task.targets) {
    targets.push_back(fmt::format("{} (SASS {})", t.ptx_mnemonic, join(t.sass_families, "/")));
    if (t.ptx_mnemonic.rfind("wgmma", 0) == 0) notes.insert("wgmma");
    if (t.ptx_mnemonic.rfind("cp.async.bulk", 0) == 0) notes.insert("tma");
    if (t.ptx_mnemonic.rfind("tcgen05", 0) == 0) notes.insert("tcgen05");
  }
  if (notes.count("wgmma")) notes.insert("setmaxnreg");  // warp-specialized wgmma kernels rely on it
  std::string reference_notes;
  if (reference.target_notes) {
    for (const char *n : kNotes)  // fixed order: wgmma, tma, setmaxnreg, tcgen05
      if (notes.count(n)) reference_notes += templates_.at(std::string("notes/") + n) + "\n";
  }
  for (const auto &name : reference.packs) {
    const KnowledgePack &pack = packs_.at(name);  // validated by check_packs before any prompt is built
    reference_notes += fmt::format("# Knowledge pack {} (version {}): {}\n\n{}\n", pack.name, pack.version,
                                   pack.covers, pack.text);
  }
  Values values{{"arch", task.arch},
                {"arch_name", arch_name(task.arch)},
                {"target_list", join(targets, ", ")},
                {"target_shares", target_shares(task)},
                {"max_shared_bytes", max_shared_text(task.arch)},
                {"reference_library", reference_library(task)},
                {"reference_notes", reference_notes},
                {"num_sms", num_sms_text(task)},
                {"workspace_limit", fmt::format("{} GiB", protocol::kMaxWorkspaceBytes >> 30)}};
  return detail::render_template(templates_.at("system"), values, "system");
}

std::string PromptBuilder::task_prompt(const tasks::Task &task) const {
  const tasks::Workload *headline = task.workloads.empty() ? nullptr : &task.workloads.front();
  std::string tensors;
  for (const auto &t : task.tensors) {
    std::string dims = "[" + join(t.shape, ", ") + "]";
    if (headline) {
      std::vector<std::string> values;
      for (auto d : task.shape_of(t, *headline)) values.push_back(std::to_string(d));
      dims += " = [" + join(values, ", ") + "] in the first workload";
    }
    bool input = t.role == tasks::TensorRole::input;
    tensors +=
        fmt::format("  - {}: {} {} {}", t.name, input ? "input" : "output", tasks::to_string(t.dtype), dims);
    if (!t.description.empty()) tensors += "; " + t.description;
    if (input) tensors += "; " + distribution_text(t.distribution);
    tensors += "\n";
  }
  std::string scalars;
  if (!task.scalars.empty()) {
    scalars = "\n## Scalars (pass them with {\"scalar\": name})\n";
    for (const auto &s : task.scalars)
      scalars += fmt::format("  - {}: {} = {:.9g}{}\n", s.name, s.type, s.value,
                             s.description.empty() ? "" : "; " + s.description);
  }
  const ArchPeaks peaks = peaks_for(task.arch);
  bool fp8 = std::any_of(task.tensors.begin(), task.tensors.end(), [](const tasks::Tensor &t) {
    return t.dtype == tasks::DType::e4m3 || t.dtype == tasks::DType::e5m2;
  });
  double peak_tflops = fp8 ? peaks.fp8_tflops : peaks.bf16_tflops;
  std::string workloads;
  std::string speed;
  for (const auto &w : task.workloads) {
    std::vector<std::string> symbols;
    for (const auto &name : task.symbols) symbols.push_back(fmt::format("{}={}", name, w.symbols.at(name)));
    auto flops = util::evaluate_int_expression(task.flops, w.symbols);
    auto bytes = util::evaluate_int_expression(task.bytes, w.symbols);
    workloads += fmt::format("  - {}: {}", w.name, join(symbols, " "));
    if (flops && bytes) {
      double floor_ms = std::max(*flops / (peak_tflops * 1e12), *bytes / (peaks.dram_tbps * 1e12)) * 1e3;
      workloads +=
          fmt::format("; {:.4g} FLOPs, at least {:.4g} bytes of DRAM traffic; physical floor ~{:.3f} ms",
                      static_cast<double>(*flops), static_cast<double>(*bytes), floor_ms);
    }
    workloads += "\n";
  }
  // The promise behind the hidden workloads: the ranges, never the hidden values.
  if (!task.ranges.empty())
    workloads += fmt::format(
        "The kernel must be correct for every shape in these ranges, not only the ones above: {}. Other "
        "shapes in them are checked too (their values are not given); whether the kernel is correct on them "
        "is reported beside the three axes, which are judged on the shapes above.\n",
        detail::ranges_text(task));
  speed = fmt::format(
      "The floors above assume about {:.0f} TFLOP/s of dense {} tensor-core throughput and {:g} TB/s "
      "of DRAM bandwidth.",
      peak_tflops, fp8 ? "fp8" : "bf16", peaks.dram_tbps);
  std::string targets;
  for (const auto &t : task.targets)
    targets += fmt::format("  - {}: PTX {} (SASS {}){}\n", t.name, t.ptx_mnemonic, join(t.sass_families, "/"),
                           t.description.empty() ? "" : ". " + t.description);
  std::string tolerances;
  for (const auto &[name, tol] : task.tolerances)
    tolerances += fmt::format("  - {}: atol {:g}, rtol {:g}{}\n", name, tol.atol, tol.rtol,
                              tol.reason.empty() ? "" : ". " + tol.reason);
  if (!task.tolerance_note.empty()) tolerances += task.tolerance_note + "\n";  // once, after every output
  Values values{{"id", task.id},
                {"title", task.title},
                {"arch", task.arch},
                {"arch_name", arch_name(task.arch)},
                {"description", task.description},
                {"tensors", tensors},
                {"scalars", scalars},
                {"symbols", expression_symbols(task)},
                {"workloads", workloads},
                {"targets", targets},
                {"tolerances", tolerances},
                {"reference_library", reference_library(task)},
                {"speed", speed}};
  return detail::render_template(templates_.at("task"), values, "task");
}

std::string PromptBuilder::feedback(const tasks::Task &task, const Verdict &verdict,
                                    const FeedbackSources *sources) const {
  const std::string library = reference_library(task);
  const StageResult &full_stage = failing_stage(verdict);
  // Each fact once: the evaluator makes the first diagnostic the stage's summary, so the list below
  // the summary leaves it out (compile and static errors instead get a count as summary and the whole
  // list, each error with its source line quoted).
  const bool listed_errors =
      verdict.status == Status::compile_error || verdict.status == Status::static_error;
  const StageResult stage = listed_errors ? full_stage : without_summary_repeats(full_stage);
  Values values = empty_feedback_values();
  values["message"] = stage.summary.empty() ? "(no details were recorded)" : stage.summary;
  values["symbols"] = expression_symbols(task);
  values["summary"] =
      stage.summary.empty() ? std::string(evaluator::to_string(verdict.status)) : stage.summary;
  values["diagnostics"] = diagnostics_section(stage);
  values["resources"] = resources_section(verdict);
  values["sanitizer"] = sanitizer_section(verdict);
  values["reference_library"] = library;
  if (listed_errors) add_listed_errors(values, stage, sources);
  std::string name;
  switch (verdict.status) {
    case Status::no_kernel:
      name = "no_kernel";
      if (!stage.diagnostics.empty()) values["message"] += "\n" + values["diagnostics"];
      break;
    case Status::bad_manifest:
      name = "bad_manifest";
      values["details"] = values["diagnostics"];
      break;
    case Status::static_error:
      name = "static_error";
      values["details"] = static_details(task, verdict);
      break;
    case Status::compile_error:
    case Status::launch_error:
    case Status::runtime_error:
    case Status::timeout:
      name = std::string(evaluator::to_string(verdict.status));
      break;
    case Status::incorrect:
    case Status::nondeterministic:
      name = correctness_feedback(task, verdict, full_stage, values);
      break;
    case Status::suspicious:
      name = "suspicious";
      values["timing"] = timing_section(verdict, library);
      break;
    case Status::ok:
    case Status::skipped:
      name = ok_feedback(task, verdict, library, values);
      break;
  }
  std::string text = detail::render_template(templates_.at("feedback/" + name), values, "feedback/" + name);
  // Unseen shapes: only for a kernel correct on the shown ones (otherwise they were not checked).
  if (verdict.status == Status::ok)
    text += detail::near_tolerance_section(verdict) + detail::generalization_section(task, verdict);
  return detail::truncate_text(text, kMaxFeedbackChars);
}

std::string PromptBuilder::feedback_unusable_response(const std::string &reason) const {
  Values values = empty_feedback_values();
  values["reason"] = detail::truncate_text(reason, 2000);
  return detail::render_template(templates_.at("feedback/unusable_response"), values,
                                 "feedback/unusable_response");
}

}  // namespace ptxbench::agent
