// Verdict facts as feedback text: diagnostics (with quoted source lines), resources, sanitizer findings,
// correctness rows, timing and execution tables, and the parts of a feedback message per outcome.
#include "agent/detail/feedback_sections.hpp"

#include "agent/detail/feedback_profile.hpp"

#include <algorithm>
#include <cmath>
#include <set>

#include <fmt/core.h>

#include "agent/detail/feedback_mismatch.hpp"
#include "agent/detail/template.hpp"
#include "agent/prompt_builder.hpp"
#include "evaluator/protocol/correctness.hpp"
#include "evaluator/protocol/error.hpp"
#include "evaluator/protocol/execution.hpp"
#include "evaluator/protocol/margin.hpp"
#include "evaluator/protocol/matrix_work.hpp"
#include "evaluator/protocol/timing.hpp"
#include "evaluator/target_work.hpp"
#include "util/strings.hpp"

namespace ptxbench::agent::detail {

using evaluator::Diagnostic;
using evaluator::StageResult;
using evaluator::Status;
using evaluator::Verdict;
using nlohmann::json;

// Bounds on what feedback repeats back to the model (it is read every turn).
constexpr std::size_t kMaxDiagnostics = 12;       // diagnostics listed per stage
constexpr std::size_t kMaxDiagnosticChars = 600;  // characters of one diagnostic
constexpr std::size_t kMaxListedWorkloads = 8;    // workload rows in a table
constexpr std::size_t kMaxTopOpcodes = 8;         // executed-opcode families listed

std::string join(const std::vector<std::string> &items, std::string_view separator) {
  return util::join(items, separator);
}

std::string number(double v) {
  return fmt::format("{:.4g}", v);
}

// ---- tolerant readers for verdict figures (other stages may omit keys) ----

std::optional<double> num(const json &j, const char *key) {
  if (!j.is_object()) return std::nullopt;
  auto it = j.find(key);
  if (it == j.end() || !it->is_number()) return std::nullopt;
  return it->get<double>();
}

std::optional<bool> boolean(const json &j, const char *key) {
  if (!j.is_object()) return std::nullopt;
  auto it = j.find(key);
  if (it == j.end() || !it->is_boolean()) return std::nullopt;
  return it->get<bool>();
}

std::string str(const json &j, const char *key, std::string fallback) {
  if (!j.is_object()) return fallback;
  auto it = j.find(key);
  if (it == j.end() || !it->is_string()) return fallback;
  return it->get<std::string>();
}

const json &array_at(const json &j, const char *key) {
  static const json empty = json::array();
  if (!j.is_object()) return empty;
  auto it = j.find(key);
  return it != j.end() && it->is_array() ? *it : empty;
}

/// What a stage said about a target (in the PTX, in the SASS): a plain enum, since GCC 12 reports an
/// optional<bool> chosen in a conditional as maybe-uninitialized (a false positive).
enum class Seen { unknown, yes, no };

Seen seen(std::optional<bool> b) {
  return !b ? Seen::unknown : *b ? Seen::yes : Seen::no;
}

std::string yes_no(Seen s) {
  return s == Seen::unknown ? "unknown" : s == Seen::yes ? "yes" : "no";
}

// ---- sections ----

std::string diagnostic_line(const Diagnostic &d) {
  std::string prefix = d.line ? fmt::format("line {}: ", *d.line) : "";
  std::string severity = d.severity == "error" ? "" : d.severity + ": ";
  return prefix + severity + d.text;
}

std::string diagnostics_section(const StageResult &s) {
  std::vector<std::string> lines;
  for (const auto &d : s.diagnostics) lines.push_back(diagnostic_line(d));
  return bullet_list(lines, kMaxDiagnostics, kMaxDiagnosticChars);
}

constexpr std::size_t kMaxQuotedChars = 200;  // characters of a quoted source line

/// Line `line` (1-based) of `text`, trimmed and bounded; "" when out of range or blank.
std::string source_line(std::string_view text, int line) {
  if (line < 1) return "";
  std::size_t pos = 0;
  for (int i = 1; i < line; ++i) {
    pos = text.find('\n', pos);
    if (pos == std::string_view::npos) return "";
    ++pos;
  }
  if (pos >= text.size()) return "";
  std::size_t end = text.find('\n', pos);
  std::string_view l = text.substr(pos, end == std::string_view::npos ? text.size() - pos : end - pos);
  while (!l.empty() && (l.front() == ' ' || l.front() == '\t')) l.remove_prefix(1);
  while (!l.empty() && (l.back() == ' ' || l.back() == '\t' || l.back() == '\r')) l.remove_suffix(1);
  if (l.size() > kMaxQuotedChars) return std::string(l.substr(0, kMaxQuotedChars)) + "...";
  return std::string(l);
}

/// `text` with every NVRTC log line "kernel.cu(N): ..." followed by the quoted CUDA line N.
std::string quote_nvrtc_log(std::string_view text, std::string_view cuda) {
  std::string out;
  std::size_t pos = 0;
  while (pos <= text.size()) {
    std::size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view l = text.substr(pos, end - pos);
    out += l;
    if (auto at = l.find(".cu("); at != std::string_view::npos) {
      const int n = std::atoi(std::string(l.substr(at + 4, 12)).c_str());
      if (std::string q = source_line(cuda, n); !q.empty()) out += "\n    > " + q;
    }
    if (end == text.size()) break;
    out += '\n';
    pos = end + 1;
  }
  return out;
}

/// A diagnostic with its line number stated once and, when the source is known, that line quoted.
std::string quoted_diagnostic_line(const Diagnostic &d, std::string_view source, std::string_view cuda) {
  std::string text = d.text;
  if (!cuda.empty() && text.find(".cu(") != std::string::npos) text = quote_nvrtc_log(text, cuda);
  // The evaluator's text often already names the line ("ptxas, line 45 of the PTX block ..."): no prefix
  // then.
  const bool names_line = d.line && text.find(fmt::format("line {}", *d.line)) != std::string::npos;
  std::string out = (d.line && !names_line ? fmt::format("line {}: ", *d.line) : "") +
                    (d.severity == "error" ? "" : d.severity + ": ") + text;
  if (d.line && !source.empty())
    if (std::string q = source_line(source, *d.line); !q.empty()) out += "\n    > " + q;
  return out;
}

/// Diagnostics whose line numbers point into `source` (a CUDA source for NVRTC logs), each quoted.
std::string quoted_diagnostics_section(const StageResult &s, std::string_view source, std::string_view cuda) {
  std::vector<std::string> lines;
  for (std::size_t i = 0; i < s.diagnostics.size(); ++i) {
    // Several errors on one line: the line is quoted once, after the last of them.
    const bool same_line_next = i + 1 < s.diagnostics.size() && s.diagnostics[i].line &&
                                s.diagnostics[i + 1].line == s.diagnostics[i].line;
    lines.push_back(quoted_diagnostic_line(s.diagnostics[i], same_line_next ? "" : source, cuda));
  }
  return bullet_list(lines, kMaxDiagnostics, kMaxDiagnosticChars + kMaxQuotedChars);
}

/// True when `summary` repeats the text of diagnostic `d` (the evaluator makes the first error the summary).
bool repeats(const std::string &summary, const Diagnostic &d) {
  return !d.text.empty() && summary.starts_with(d.text);
}

/// The stage's diagnostics without those the summary already states.
StageResult without_summary_repeats(const StageResult &s) {
  StageResult out = s;
  out.diagnostics.clear();
  for (const auto &d : s.diagnostics)
    if (!repeats(s.summary, d)) out.diagnostics.push_back(d);
  return out;
}

std::string sanitizer_section(const Verdict &v) {
  if (v.sanitizer.status == Status::skipped && v.sanitizer.diagnostics.empty()) return "";
  std::string summary = v.sanitizer.summary;
  // "compute-sanitizer memcheck: <first report>": the report is listed below, so the summary keeps the tool.
  if (!v.sanitizer.diagnostics.empty()) {
    const std::string &first = v.sanitizer.diagnostics.front().text;
    if (summary.size() > first.size() + 2 && summary.ends_with(": " + first))
      summary = summary.substr(0, summary.size() - first.size() - 2);
  }
  std::string out = summary.starts_with("compute-sanitizer") ? summary : "compute-sanitizer";
  if (!summary.empty() && !summary.starts_with("compute-sanitizer")) out += ": " + summary;
  out += "\n";
  return out + diagnostics_section(v.sanitizer);
}

std::string resources_section(const Verdict &v) {
  const auto f = figures_of(v, &Verdict::compile_figures).value_or(protocol::CompileFigures{});
  std::vector<std::string> parts;
  if (f.registers) parts.push_back(fmt::format("{} registers/thread", *f.registers));
  if (f.spill_store_bytes || f.spill_load_bytes)
    parts.push_back(fmt::format("spills {} B stored / {} B loaded", f.spill_store_bytes.value_or(0),
                                f.spill_load_bytes.value_or(0)));
  if (f.shared_bytes) parts.push_back(fmt::format("{} B static shared", *f.shared_bytes));
  if (f.stack_bytes) parts.push_back(fmt::format("{} B stack", *f.stack_bytes));
  std::string out = parts.empty() ? "not reported" : join(parts, ", ");
  if (f.warnings && !f.warnings->empty())
    out += "\nptxas warnings (each one a place to start):\n" + bullet_list(*f.warnings, 6, 300);
  else if (f.warnings)
    out += "; no ptxas warnings";
  return out;
}

std::string index_text(const std::vector<std::int64_t> &index) {
  std::vector<std::string> parts;
  for (const auto i : index) parts.push_back(number(static_cast<double>(i)));
  return "[" + join(parts, ", ") + "]";
}

/// A value of the first mismatch: the number, "NaN", or "null" for an infinity (as its JSON says).
std::string value_text(double v) {
  if (std::isnan(v)) return "NaN";
  return std::isfinite(v) ? number(v) : "null";
}

std::vector<protocol::CorrectnessWorkload> correctness_rows(const Verdict &v) {
  if (auto figures = figures_of(v, &Verdict::correctness_figures)) return std::move(figures->workloads);
  return {};
}

/// "the largest error is 1.04x the tolerance (1 = the limit); 3 of 11 trials on fresh inputs failed"
std::string margin_words(const protocol::WorkloadMargin &m) {
  return fmt::format(
      "the largest error is {}x the tolerance (1 = the limit); {} of {} trials on fresh inputs failed",
      number(m.max_error_ratio), m.trials_failed, m.trials_run);
}

std::string correctness_workloads_section(const tasks::Task &task, const Verdict &v, bool only_failed) {
  std::vector<std::string> rows;
  for (const protocol::CorrectnessWorkload &w : correctness_rows(v)) {
    if (only_failed && !w.failed()) continue;
    std::string row = (w.name.empty() ? "?" : w.name) + ": ";
    row += fmt::format("{} of {} trials passed", w.passed, w.trials);
    row += fmt::format("; max abs error {}", number(w.max_abs_error));
    row += fmt::format(", max rel error {}", number(w.max_rel_error));
    row += fmt::format("; {} mismatching elements", w.mismatches);
    if (const auto &first = w.first_mismatch) {
      row += fmt::format("; first mismatch {}{}: got {}, expected {}", first->tensor,
                         index_text(first->index), value_text(first->got), value_text(first->expected));
      if (auto tol = task.tolerances.find(first->tensor); tol != task.tolerances.end())
        row += fmt::format(" (tolerance {:g} + {:g}·|expected|)", tol->second.atol, tol->second.rtol);
    }
    if (w.nan_count > 0) row += fmt::format("; {} NaN outputs", w.nan_count);
    if (w.unwritten_count > 0)
      row += fmt::format("; {} output elements never written (still NaN poison)", w.unwritten_count);
    if (w.guard_damage > 0)
      row += fmt::format("; wrote outside a tensor ({} guard bytes damaged)", w.guard_damage);
    if (w.inputs_mutated) row += "; modified an input tensor";
    if (!w.deterministic) row += "; a second identical launch gave different bits";
    if (w.margin && w.margin->borderline) row += "; near the tolerance: " + margin_words(*w.margin);
    rows.push_back(row);
  }
  return bullet_list(rows, kMaxListedWorkloads, kMaxDiagnosticChars);
}

std::string timing_section(const Verdict &v, const std::string &library) {
  const StageResult &t = v.timing;
  if (t.status == Status::skipped)
    return "Timing not measured" + (t.summary.empty() ? "." : ": " + t.summary + ".");
  // Malformed figures read as none: the evaluator warned in the stage's diagnostics.
  const std::optional<protocol::TimingFigures> figures = figures_of(v, &Verdict::timing_figures);
  if (!figures) return "Timing (median, cold L2):\n";
  std::vector<std::string> rows;
  for (const protocol::TimingWorkload &w : figures->workloads) {
    std::string row =
        (w.name.empty() ? "?" : w.name) + ": " + fmt::format("yours {} ms", number(w.candidate_ms));
    row += fmt::format(" ({} TFLOP/s", number(w.candidate_tflops));
    if (w.peak_tflops > 0)
      row += fmt::format(", {:.0f}% of the {} TFLOP/s dense tensor-core peak",
                         100 * w.candidate_tflops / w.peak_tflops, number(w.peak_tflops));
    row += ")";
    row += fmt::format(", {} {} ms", library, number(w.library_ms));
    row += fmt::format(" ({} TFLOP/s)", number(w.library_tflops));
    row += fmt::format(", speedup {:.3f}x", w.speedup);
    if (w.sol_floor_ms) row += fmt::format("; physical floor {} ms", number(*w.sol_floor_ms));
    // A kernel far below the library is timed only until that is certain: say how precise the figure is.
    if (w.stopped_by == protocol::TimingStop::far_from_library && std::isfinite(w.speedup_ci95.hi))
      row += fmt::format(
          "; timed only until clearly far below {} (speedup between {:.3g}x and {:.3g}x at 95% "
          "confidence, {} timed launches)",
          library, w.speedup_ci95.lo, w.speedup_ci95.hi, number(static_cast<double>(w.samples)));
    rows.push_back(row);
  }
  // The card the times and the peak belong to (the environment's gpu_name), so a model knows the machine.
  const std::string gpu =
      v.environment.is_object() && v.environment.contains("gpu_name") && v.environment["gpu_name"].is_string()
          ? v.environment["gpu_name"].get<std::string>()
          : "";
  std::string out = "Timing" + (gpu.empty() ? std::string() : " on " + gpu) + " (median, cold L2):\n" +
                    bullet_list(rows, kMaxListedWorkloads, 400);
  out +=
      fmt::format("Geomean speedup {:.3f}x, min {:.3f}x.\n", figures->geomean_speedup, figures->min_speedup);
  if (figures->sm_clock_mhz && *figures->sm_clock_mhz > 0)
    out += fmt::format("SM clock right after the timed launches: {} MHz.\n", number(*figures->sm_clock_mhz));
  return out;
}

std::string ranges_text(const tasks::Task &task) {
  std::vector<std::string> parts;
  for (const auto &symbol : task.symbols) {  // in the task's order (M, N, K; B, H, S, D)
    const auto it = task.ranges.find(symbol);
    if (it == task.ranges.end()) continue;
    const tasks::SymbolRange &r = it->second;
    if (r.min == r.max)
      parts.push_back(fmt::format("{} = {}", symbol, r.min));
    else if (r.multiple_of > 1)
      parts.push_back(
          fmt::format("{} is any multiple of {} from {} to {}", symbol, r.multiple_of, r.min, r.max));
    else
      parts.push_back(fmt::format("{} is any value from {} to {}", symbol, r.min, r.max));
  }
  return join(parts, "; ");
}

namespace {

// "under 1% of the output elements": how much was wrong, coarse enough not to give the hidden shape's size
// away (an exact count over an exact total would).
std::string coarse_share(double share) {
  for (const auto &[bound, text] : {std::pair{0.001, "under 0.1%"}, std::pair{0.01, "under 1%"},
                                    std::pair{0.1, "under 10%"}, std::pair{0.5, "under half"}})
    if (share < bound) return std::string(text) + " of the output elements";
  return "most of the output elements";
}

// A worker's fault text without the launch context it ends with ("(workload M=..., trial 1, grid ...)"),
// which names the hidden shape.
std::string without_launch_context(const std::string &summary) {
  const auto at = summary.find(" (workload ");
  return at == std::string::npos ? summary : summary.substr(0, at);
}

}  // namespace

std::string generalization_section(const tasks::Task &task, const Verdict &v) {
  if (!v.generalizes || !v.generalizes->value) return "";
  const evaluator::Generalization &g = *v.generalizes;
  if (*g.value)
    return fmt::format("It is also correct on {} other shape{} within the task's stated ranges.\n", g.total,
                       g.total == 1 ? "" : "s");
  const json &hidden = v.settings.is_object() && v.settings.contains("hidden_workloads")
                           ? v.settings["hidden_workloads"]
                           : json::object();
  const bool reveal = boolean(hidden, "reveal") == true;
  std::vector<std::string> rows;
  int ordinal = 0;
  for (const auto &f : g.failed) {
    ++ordinal;
    const std::string where = reveal ? "shape " + f.workload : fmt::format("unseen shape {}", ordinal);
    std::string what;
    if (f.kind == "incorrect")
      what = reveal || !f.wrong_share ? "wrong results: " + f.summary
                                      : "wrong results in " + coarse_share(*f.wrong_share);
    else if (f.kind == "nondeterministic")
      what = f.summary;
    else if (f.kind == "bad_manifest")
      what = "your launch manifest does not resolve there" + (reveal ? ": " + f.summary : std::string());
    else if (f.kind == "timeout")
      what = "the kernel did not finish (a hang or an endless loop)";
    else if (f.kind == "runtime_error")
      what = "the kernel faulted (" + (reveal ? f.summary : without_launch_context(f.summary)) + ")";
    else
      what = "the launch was refused (" + (reveal ? f.summary : without_launch_context(f.summary)) + ")";
    rows.push_back(where + ": " + what);
  }
  std::string out = fmt::format(
      "But it is not correct on {} of {} other shapes the task promises ({}); those shapes are checked "
      "without being shown{}:\n",
      g.failed.size(), g.total, ranges_text(task), reveal ? "" : ", and their values are not given");
  out += bullet_list(rows, kMaxListedWorkloads, 300);
  out += hidden_mismatch_pattern_section(task, v);
  out +=
      "Make the kernel right for every shape in those ranges: guard partial tiles at the edges, derive the "
      "grid and loop bounds from the symbols, and assume no multiple beyond what the ranges state.\n";
  return out;
}

/// The multiply-add work outside the target instructions (the execution figures' matrix_work), when it is
/// at least 1% of the task's FLOPs, and the evaluator's reason when the targets do not count because of it
/// (evaluator/target_work.hpp, with the thresholds the verdict recorded).
std::string non_target_work_lines(const Verdict &v,
                                  const std::optional<protocol::ExecutionFigures> &figures) {
  protocol::RedundantWorkPolicy policy;
  try {
    if (v.settings.is_object() && v.settings.contains("redundant_work"))
      policy = v.settings["redundant_work"].get<protocol::RedundantWorkPolicy>();
  } catch (const protocol::ProtocolError &) {
    return "";
  }
  if (!figures || !figures->matrix_work) return "";
  const protocol::MatrixWork &work = *figures->matrix_work;
  if (work.workload_flops <= 0 || policy.non_target_share(work) < 0.01) return "";
  const double min_share = num(v.settings, "min_target_work_share").value_or(0.75);
  if (v.axes.targets_executed == false)
    if (auto why = evaluator::redundant_work_shortfall(*figures, min_share, policy))
      return "The targets do not count: " + *why + ".\n";  // names the families itself
  return "Multiply-add work outside the target instructions: " +
         evaluator::non_target_work_text(work, policy) + " of the task's FLOPs.\n";
}

/// Per-target lines joining what the static, compile and execution stages saw.
std::string execution_section(const tasks::Task &task, const Verdict &v) {
  const auto in_ptx = figures_of(v, &Verdict::static_figures);
  const auto in_sass = figures_of(v, &Verdict::compile_figures);
  // Malformed execution figures read as none (the evaluator warned about that in the stage's diagnostics).
  const std::optional<protocol::ExecutionFigures> figures = figures_of(v, &Verdict::execution_figures);
  std::string out;
  std::vector<std::string> rows;
  for (const auto &target : task.targets) {
    const protocol::TargetExecution *row = figures ? figures->target(target.name) : nullptr;
    const Seen ptx = in_ptx ? seen(in_ptx->target_in_ptx(target.name)) : Seen::unknown;
    const Seen sass = row       ? seen(row->present_in_sass)
                      : in_sass ? seen(in_sass->target_in_sass(target.name))
                                : Seen::unknown;
    // Executions with some thread's predicate on (a predicated-off issue does no work); plain value + flag:
    // GCC 12 reports optional<double> here as maybe-uninitialized (a false positive).
    std::optional<double> measured;
    if (row && row->warp_executions) measured = static_cast<double>(*row->warp_executions);
    if (row && row->threads_on == std::uint64_t{0}) measured = 0.0;
    const bool has_runs = measured.has_value();
    const double run_count = measured.value_or(0.0);
    std::string line = fmt::format("{} ({}): in PTX {}, in SASS ({}) {}", target.ptx_mnemonic, target.name,
                                   yes_no(ptx), join(target.sass_families, "/"), yes_no(sass));
    if (has_runs)
      line += fmt::format(", executed {} times (warp-level)", number(run_count));
    else if (v.execution.status == Status::skipped)
      line += ", execution not measured";
    // Share of the task's FLOPs the target's instructions did (tensor-core targets): running once
    // beside the real loop does not count (EvaluatorSettings::min_target_work_share).
    // (plain value + flag, as above: GCC 12's maybe-uninitialized false positive on optional<double>)
    const auto share_figure = row ? row->work_share : std::nullopt;
    const bool has_share = share_figure.has_value();
    const double work_share = share_figure.value_or(0.0);
    const double min_share = num(v.settings, "min_target_work_share").value_or(0.5);
    if (has_runs && run_count > 0 && has_share) {
      line += fmt::format(", doing {} of the task's FLOPs", util::percent_text(work_share));
      if (work_share < min_share)
        line += fmt::format(
            ". That is too little: targets count as executed only when they do at least {} of "
            "the work (the rest ran on other units, see the top opcodes)",
            util::percent_text(min_share));
    }
    if (has_runs && run_count == 0 && ptx == Seen::yes && sass == Seen::yes)
      line += fmt::format(". {} is in your PTX and in the SASS but executed 0 times", target.ptx_mnemonic);
    else if (has_runs && run_count == 0 && sass == Seen::no && ptx == Seen::no)
      line += fmt::format(". Your PTX has no {} instruction", target.ptx_mnemonic);
    else if (has_runs && run_count == 0 && sass == Seen::no)
      line += fmt::format(". {} is not in the SASS: ptxas removed or never emitted it", target.ptx_mnemonic);
    rows.push_back(line);
  }
  out += "Target instructions:\n" + bullet_list(rows, kMaxListedWorkloads, 400);
  out += non_target_work_lines(v, figures);
  if (!figures) return out;
  std::vector<std::string> top;
  for (const auto &op : figures->top_opcodes) {
    if (top.size() >= kMaxTopOpcodes) break;
    top.push_back(fmt::format("{} {}", op.family, number(static_cast<double>(op.warp_executions))));
  }
  if (!top.empty()) out += "Top executed opcodes (warp-level counts): " + join(top, ", ") + "\n";
  if (figures->instrumented)
    out += fmt::format("Tensor-core instructions are {:.1f}% of executed instructions.\n",
                       figures->tensor_core_share * 100);
  return out;
}

std::string static_details(const tasks::Task &task, const Verdict &v) {
  std::vector<std::string> lines;
  if (const auto f = figures_of(v, &Verdict::static_figures)) {
    for (const auto &t : task.targets)
      if (f->target_in_ptx(t.name) == false)
        lines.push_back(fmt::format("target {} ({}) is not in your PTX", t.name, t.ptx_mnemonic));
    // The written ones (older verdicts list every .global variable only).
    for (const auto &g : f->stateful_globals())
      lines.push_back(fmt::format("module-scope .global variable '{}'", g));
  }
  if (lines.empty()) return "";
  return bullet_list(lines, kMaxDiagnostics, kMaxDiagnosticChars);
}

/// What did pass when the GPU stages could not run (no GPU, or disabled).
std::string verified_section(const tasks::Task &task, const Verdict &v) {
  std::vector<std::string> lines;
  if (v.parse.status == Status::ok) lines.push_back("kernel block and manifest parsed");
  if (v.static_checks.status == Status::ok) lines.push_back("static PTX checks passed");
  if (v.compile.status == Status::ok) lines.push_back("compiled with ptxas for " + task.arch);
  std::string out = lines.empty() ? "" : "Passed: " + join(lines, "; ") + ".\n";
  return out + execution_section(task, v);
}

/// Workload names of the failed rows correctness_workloads_section lists.
std::vector<std::string> failed_workloads(const Verdict &v) {
  std::vector<std::string> names;
  for (const protocol::CorrectnessWorkload &w : correctness_rows(v))
    if (w.failed()) names.push_back(w.name.empty() ? "?" : w.name);
  return names;
}

/// The correctness stage without the worker's per-workload diagnostics that a listed workload row
/// already states; `summary_repeated` is set when the summary was one of them.
StageResult without_workload_repeats(const StageResult &s, const std::vector<std::string> &listed,
                                     bool &summary_repeated) {
  StageResult out = s;
  out.diagnostics.clear();
  summary_repeated = false;
  for (const auto &d : s.diagnostics) {
    bool covered = false;
    for (const auto &name : listed) covered = covered || d.text.starts_with("workload " + name + ":");
    if (!covered) {
      out.diagnostics.push_back(d);
    } else if (repeats(s.summary, d)) {
      summary_repeated = true;
    }
  }
  return out;
}

/// Compile and static errors: the whole list, each error with its source line quoted, and a count as
/// summary when the summary would repeat one of them.
void add_listed_errors(Values &values, const StageResult &stage, const FeedbackSources *sources) {
  // Lines of compile and static diagnostics point into the PTX (the kernel block, or NVRTC's output for
  // CUDA); NVRTC's own log lines point into the CUDA source.
  std::string_view ptx = sources ? sources->ptx : std::string_view();
  std::string_view cuda = sources && sources->cuda ? sources->kernel_source : std::string_view();
  if (sources && !sources->cuda && ptx.empty()) ptx = sources->kernel_source;
  values["diagnostics"] = quoted_diagnostics_section(stage, ptx, cuda);
  int errors = 0;
  for (const auto &d : stage.diagnostics) errors += d.severity == "error";
  const bool summary_repeated = std::any_of(stage.diagnostics.begin(), stage.diagnostics.end(),
                                            [&](const Diagnostic &d) { return repeats(stage.summary, d); });
  if (summary_repeated || stage.summary.empty())
    values["summary"] = errors == 1 ? "1 error" : fmt::format("{} errors", errors);
}

/// Incorrect or nondeterministic: the failed workloads as rows, the other diagnostics once each.
std::string correctness_feedback(const tasks::Task &task, const Verdict &verdict,
                                 const StageResult &full_stage, Values &values) {
  const auto listed = failed_workloads(verdict);
  bool summary_repeated = false;
  const StageResult rest = without_workload_repeats(full_stage, listed, summary_repeated);
  const StageResult shown = without_summary_repeats(rest);
  const std::string rows = correctness_workloads_section(task, verdict, /*only_failed=*/true);
  const int total = static_cast<int>(correctness_rows(verdict).size());
  if (summary_repeated)
    values["summary"] =
        fmt::format("{} of {} workload{} failed", listed.size(), total, total == 1 ? "" : "s");
  if (verdict.status == Status::incorrect) {
    values["workloads"] = rows + mismatch_pattern_section(task, verdict) + near_tolerance_section(verdict);
    values["diagnostics"] = diagnostics_section(shown);
    return "incorrect";
  }
  values["diagnostics"] = rows + diagnostics_section(shown);
  return "nondeterministic";
}

std::string near_tolerance_section(const Verdict &v) {
  std::vector<std::string> notes;
  for (const protocol::CorrectnessWorkload &w : correctness_rows(v))
    if (w.margin && w.margin->borderline)
      notes.push_back((w.name.empty() ? "?" : w.name) + ": " + margin_words(*w.margin));
  if (notes.empty()) return "";
  if (v.status == Status::ok)
    return "Near the tolerance on " + join(notes, "; on ") +
           ".\nA kernel this close to the limit can fail on other inputs; rounding to nearest and keeping "
           "intermediates in fp32 give it margin.\n";
  return "The errors are just past the tolerance: they come from precision (rounding, low-precision "
         "intermediates or accumulation) rather than from wrong indexing.\n";
}

/// Status ok (or skipped GPU stages): what ran, how fast, and which of the ok templates applies.
std::string ok_feedback(const tasks::Task &task, const Verdict &verdict, const std::string &library,
                        Values &values) {
  values["execution"] = execution_section(task, verdict);
  values["timing"] = timing_section(verdict, library);
  values["profile"] = profile_section(verdict, library);
  if (verdict.axes.targets_executed == true)
    values["targets_state"] = " and every target instruction executed";
  if (!verdict.axes.correct.has_value()) {
    const StageResult &why = verdict.correctness;
    values["summary"] = why.summary.empty() ? "the GPU stages were skipped" : why.summary;
    values["verified"] = verified_section(task, verdict);
    return "ok_unverified";
  }
  if (verdict.axes.targets_executed == false) return "ok_not_executed";
  if (verdict.axes.speedup && *verdict.axes.speedup >= 1.0) return "ok_fast";
  return "ok_slow";
}

}  // namespace ptxbench::agent::detail
