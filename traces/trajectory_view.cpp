#include "traces/trajectory_view.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>

#include <fmt/core.h>

#include "evaluator/protocol/correctness.hpp"
#include "evaluator/protocol/cpu_stages.hpp"
#include "evaluator/protocol/error.hpp"
#include "evaluator/protocol/execution.hpp"
#include "evaluator/protocol/stages.hpp"
#include "evaluator/protocol/timing.hpp"
#include "traces/detail/run_view.hpp"
#include "traces/outcome.hpp"

namespace ptxbench::traces {

using detail::Json;

double cost_usd(const Price &price, long long prompt_tokens, long long completion_tokens) {
  return (static_cast<double>(prompt_tokens) * price.prompt_per_mtok +
          static_cast<double>(completion_tokens) * price.completion_per_mtok) /
         1e6;
}

std::map<std::string, Price> prices_of_runs(const std::vector<LoadedRun> &runs) {
  std::map<std::string, Price> prices;
  for (const auto &run : runs) {
    const Json *table = detail::object_field(run.run.config, "prices");
    if (!table) continue;
    for (const auto &[name, entry] : table->items()) {
      auto in = detail::number_field(entry, "prompt_usd_per_mtok");
      auto out = detail::number_field(entry, "completion_usd_per_mtok");
      if (in && out && *in >= 0 && *out >= 0) prices[name] = Price{*in, *out};
    }
  }
  return prices;
}

namespace {

constexpr std::size_t kMaxSummaryChars = 400;  // characters of a stage summary in the view

std::string clip(std::string_view s, std::size_t n) {
  if (s.size() <= n) return std::string(s);
  std::size_t cut = n;
  while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80) --cut;  // not inside a code point
  return std::string(s.substr(0, cut)) + "…";
}

std::string num(double v) {
  return fmt::format("{:.4g}", v);
}

std::vector<std::string_view> split_lines(std::string_view s) {
  std::vector<std::string_view> lines;
  std::size_t pos = 0;
  while (pos < s.size()) {
    std::size_t nl = s.find('\n', pos);
    if (nl == std::string_view::npos) nl = s.size();
    lines.push_back(s.substr(pos, nl - pos));
    pos = nl + 1;
  }
  return lines;
}

std::string index_text(const std::vector<std::int64_t> &index) {
  std::string s = "[";
  for (std::size_t i = 0; i < index.size(); ++i) s += (i ? ", " : "") + std::to_string(index[i]);
  return s + "]";
}

// A value of the first mismatch: the number, "NaN", or "null" for an infinity (as its JSON says).
std::string value_text(double v) {
  if (std::isnan(v)) return "NaN";
  return std::isfinite(v) ? num(v) : "null";
}

/// The timing stage's rows and geomean, read through the protocol's codec (a malformed record is named).
// A stage's typed figures through its codec; none when it wrote none, and a line saying why when they do not
// decode.
template <class T>
std::optional<T> decoded(const protocol::Verdict &verdict,
                         std::optional<T> (protocol::Verdict::*figures)() const, const char *unreadable,
                         std::vector<std::string> &out) {
  try {
    return (verdict.*figures)();
  } catch (const protocol::ProtocolError &e) {
    out.push_back(unreadable + std::string(e.what()));
    return std::nullopt;
  }
}

// The workloads that failed (trials or the determinism relaunch) with their errors and first mismatch;
// then every workload's margin: each output's largest |error| / tolerance, and the borderline extra trials.
void correctness_lines(const protocol::Verdict &verdict, std::vector<std::string> &out) {
  const auto correctness =
      decoded(verdict, &protocol::Verdict::correctness_figures, "correctness figures unreadable: ", out);
  if (!correctness) return;
  for (const protocol::CorrectnessWorkload &w : correctness->workloads) {
    if (w.passed >= w.trials && w.deterministic) continue;
    std::string line = fmt::format("correctness {}: {} of {} trials passed", w.name.empty() ? "?" : w.name,
                                   num(w.passed), num(w.trials));
    line += fmt::format(", {} mismatches", num(static_cast<double>(w.mismatches)));
    line += fmt::format(", max abs error {}", num(w.max_abs_error));
    if (const auto &first = w.first_mismatch)
      line += fmt::format(", first mismatch {}{}: got {}, expected {}", first->tensor,
                          index_text(first->index), value_text(first->got), value_text(first->expected));
    if (w.unwritten_count > 0)
      line += fmt::format(", {} never written", num(static_cast<double>(w.unwritten_count)));
    if (!w.deterministic) line += ", nondeterministic";
    out.push_back(line);
  }
  for (const protocol::CorrectnessWorkload &w : correctness->workloads) {
    if (!w.margin) continue;
    const protocol::WorkloadMargin &m = *w.margin;
    std::string line = fmt::format("margin {}: largest |error| / tolerance", w.name.empty() ? "?" : w.name);
    const char *sep = " ";
    for (const auto &t : m.tensors) {
      line += fmt::format("{}{} {}", sep, t.tensor, num(t.max_error_ratio));
      sep = ", ";
    }
    if (m.borderline) {
      line += fmt::format(" — borderline: {} of {} trials failed ({} extra", num(m.trials_failed),
                          num(m.trials_run), num(m.extra_trials));
      line += (m.extra_stopped_by == "budget" ? ", stopped by the time budget)" : ")");
    }
    out.push_back(line);
  }
}

// Per target its executions, FLOP share and presence in the SASS; then the multiply-add work outside the
// targets (the execution figures' matrix_work), per SASS family.
void execution_lines(const protocol::Verdict &verdict, std::vector<std::string> &out) {
  const auto execution =
      decoded(verdict, &protocol::Verdict::execution_figures, "execution figures unreadable: ", out);
  if (!execution) return;
  for (const protocol::TargetExecution &t : execution->targets) {
    std::string line = fmt::format("target {}: ", t.name.empty() ? "?" : t.name);
    line += t.warp_executions
                ? fmt::format("executed {} times (warp-level)", num(static_cast<double>(*t.warp_executions)))
                : "execution not measured";
    if (t.work_share) line += fmt::format(", {:.1f}% of the task's FLOPs", 100 * *t.work_share);
    line += t.present_in_sass ? ", in SASS" : ", not in SASS";
    out.push_back(line);
  }
  if (const auto &work = execution->matrix_work; work && work->workload_flops > 0) {
    std::string line = fmt::format(
        "multiply-adds outside the targets: {:.1f}% of the task's FLOPs on other tensor-core instructions, "
        "{:.1f}% on the FMA pipe",
        100 * work->non_target_tensor_share, 100 * work->fma_share);
    std::string families;
    for (const auto &f : work->families)
      if (f.share >= 0.0005)
        families += fmt::format("{}{} {:.1f}%", families.empty() ? "" : ", ", f.family, 100 * f.share);
    if (!families.empty()) line += " (" + families + ")";
    out.push_back(line);
  }
}

void timing_lines(const protocol::Verdict &verdict, std::vector<std::string> &out) {
  const auto timing =
      decoded(verdict, &protocol::Verdict::timing_figures, "timing figures unreadable: ", out);
  if (!timing) return;
  for (const protocol::TimingWorkload &w : timing->workloads)
    out.push_back(fmt::format("timing {}: candidate {} ms, library {} ms, speedup {:.3f}x",
                              w.name.empty() ? "?" : w.name, num(w.candidate_ms), num(w.library_ms),
                              w.speedup));
  out.push_back(fmt::format("geomean speedup {:.3f}x", timing->geomean_speedup));
}

// ptxas's resources of the entry, once it compiled.
void compile_lines(const protocol::Verdict &verdict, std::vector<std::string> &out) {
  const auto compile =
      decoded(verdict, &protocol::Verdict::compile_figures, "compile figures unreadable: ", out);
  if (!compile || !compile->registers) return;
  const auto bytes = [](const std::optional<std::int64_t> &b) {
    return num(static_cast<double>(b.value_or(0)));
  };
  out.push_back(fmt::format("resources: {} registers/thread, spills {}/{} B, {} B static shared",
                            bytes(compile->registers), bytes(compile->spill_store_bytes),
                            bytes(compile->spill_load_bytes), bytes(compile->shared_bytes)));
}

/// The figures a reader looks for first.
std::vector<std::string> key_figures(const protocol::Verdict &verdict) {
  std::vector<std::string> out;
  compile_lines(verdict, out);
  correctness_lines(verdict, out);
  execution_lines(verdict, out);
  timing_lines(verdict, out);
  return out;
}

std::vector<std::string> stage_lines(const protocol::Verdict &verdict) {
  std::vector<std::string> out;
  for (const auto &row : protocol::kStageTable) {
    if (!verdict.written(row.stage)) continue;
    const protocol::StageResult &s = verdict.stage(row.stage);
    std::string line = fmt::format("{}: {}", row.name, protocol::to_string(s.status));
    if (!s.summary.empty()) line += " — " + clip(s.summary, kMaxSummaryChars);
    out.push_back(line);
  }
  return out;
}

std::string safe_name(std::string_view s) {
  std::string out;
  for (char c : s) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
                    c == '.' || c == '_';
    out += ok ? c : '-';
  }
  if (out.empty() || out[0] == '.') out.insert(out.begin(), '_');
  return out.substr(0, 80);
}

}  // namespace

std::string line_diff(std::string_view before, std::string_view after, int context, std::size_t max_cells) {
  const auto a = split_lines(before), b = split_lines(after);
  std::size_t pre = 0;
  while (pre < a.size() && pre < b.size() && a[pre] == b[pre]) ++pre;
  std::size_t suf = 0;
  while (suf < a.size() - pre && suf < b.size() - pre && a[a.size() - 1 - suf] == b[b.size() - 1 - suf])
    ++suf;
  const std::size_t n = a.size() - pre - suf, m = b.size() - pre - suf;
  // ops: ' ' keep, '-' remove, '+' add, with the line.
  std::vector<std::pair<char, std::string_view>> ops;
  for (std::size_t i = 0; i < pre; ++i) ops.emplace_back(' ', a[i]);
  if (n * m > max_cells) {
    for (std::size_t i = 0; i < n; ++i) ops.emplace_back('-', a[pre + i]);
    for (std::size_t j = 0; j < m; ++j) ops.emplace_back('+', b[pre + j]);
  } else {
    // Longest common subsequence of the changed middle, lengths from the end.
    std::vector<std::uint32_t> L((n + 1) * (m + 1), 0);
    auto at = [&](std::size_t i, std::size_t j) -> std::uint32_t & { return L[i * (m + 1) + j]; };
    for (std::size_t i = n; i-- > 0;)
      for (std::size_t j = m; j-- > 0;)
        at(i, j) = a[pre + i] == b[pre + j] ? at(i + 1, j + 1) + 1 : std::max(at(i + 1, j), at(i, j + 1));
    std::size_t i = 0, j = 0;
    while (i < n || j < m) {
      if (i < n && j < m && a[pre + i] == b[pre + j]) {
        ops.emplace_back(' ', a[pre + i]);
        ++i, ++j;
      } else if (i < n && (j == m || at(i + 1, j) >= at(i, j + 1))) {
        ops.emplace_back('-', a[pre + i++]);  // removals before additions, as unified diffs show them
      } else {
        ops.emplace_back('+', b[pre + j++]);
      }
    }
  }
  for (std::size_t i = a.size() - suf; i < a.size(); ++i) ops.emplace_back(' ', a[i]);
  // Fold long unchanged runs, keeping `context` lines next to each change.
  std::string out;
  std::size_t k = 0;
  const auto ctx = static_cast<std::size_t>(std::max(0, context));
  while (k < ops.size()) {
    if (ops[k].first != ' ') {
      out += fmt::format("{} {}\n", ops[k].first, ops[k].second);
      ++k;
      continue;
    }
    std::size_t end = k;
    while (end < ops.size() && ops[end].first == ' ') ++end;
    const std::size_t run = end - k;
    const std::size_t keep_head = k == 0 ? 0 : ctx, keep_tail = end == ops.size() ? 0 : ctx;
    if (run > keep_head + keep_tail + 1) {
      for (std::size_t x = k; x < k + keep_head; ++x) out += fmt::format("  {}\n", ops[x].second);
      out += fmt::format("@@ {} unchanged lines @@\n", run - keep_head - keep_tail);
      for (std::size_t x = end - keep_tail; x < end; ++x) out += fmt::format("  {}\n", ops[x].second);
    } else {
      for (std::size_t x = k; x < end; ++x) out += fmt::format("  {}\n", ops[x].second);
    }
    k = end;
  }
  return out;
}

namespace {

/// One turn as the page shows it (the kernel diff against the previous turn is the caller's).
TurnView turn_view(const TurnRecord &r, const Price *price) {
  TurnView v;
  v.turn = r.turn;
  v.status = status_of(r);
  v.correct = correct_of(r);
  v.targets_executed = targets_executed_of(r);
  v.generalizes = generalizes_of(r);
  v.speedup = speedup_of(r);
  if (r.messages) {
    for (const auto &m : *r.messages)
      if (m.role == "user") v.feedback_received = m.content;
  }
  if (const auto &resp = r.response) {
    v.reasoning = resp->reasoning;
    v.answer = resp->content;
    v.prompt_tokens = resp->usage.prompt_tokens.value_or(0);
    v.completion_tokens = resp->usage.completion_tokens.value_or(0);
    if (price) v.cost_usd = cost_usd(*price, v.prompt_tokens, v.completion_tokens);
  }
  if (const auto &e = r.request_error)
    v.request_error = fmt::format("{}: {}", e->kind.empty() ? "?" : e->kind, e->message);
  if (const auto &c = r.candidate) {
    v.language = c->language;
    v.kernel = c->kernel_source;
  }
  if (const auto verdict = r.decoded_verdict()) {
    v.stages = stage_lines(*verdict);
    v.figures = key_figures(*verdict);
  } else if (r.verdict_object()) {
    v.stages = {"verdict unreadable by this build"};
  }
  if (const auto &tm = r.timings) {
    v.request_seconds = tm->request_s;
    v.ttft_seconds = tm->ttft_s;
    v.cpu_stages_seconds = tm->cpu_stages_s;
    v.gpu_stage_seconds = tm->gpu_stage_s;
  }
  v.feedback_given = r.feedback;
  v.stop_reason = r.stop_reason;
  return v;
}

}  // namespace

std::vector<TrajectoryPage> build_trajectory_pages(const std::vector<LoadedRun> &runs,
                                                   const std::map<std::string, Price> &prices) {
  detail::RunIndex index = detail::index_runs(runs);
  std::vector<TrajectoryPage> pages;
  std::map<std::string, int> used_names;
  for (const auto &t : index.trajectories) {
    TrajectoryPage p;
    p.run_dir = runs[t.run_index].dir.string();
    p.run_id = t.run_id;
    p.model = t.model;
    p.task_id = t.task_id;
    p.sample = t.sample;
    p.trajectory_id = t.trajectory_id;
    std::string base = safe_name(t.model) + "__" + safe_name(t.task_id) + "__" + std::to_string(t.sample);
    // Several runs may hold the same model × task × sample: number the later ones.
    const int seen = used_names[base]++;
    p.file = "trajectories/" + base + (seen ? fmt::format("__r{}", seen) : "") + ".html";
    const auto price = prices.find(t.model);
    std::string previous_kernel;
    std::optional<int> previous_turn;
    for (const TurnRecord *r : t.turns) {
      TurnView v = turn_view(*r, price == prices.end() ? nullptr : &price->second);
      if (!v.kernel.empty()) {
        if (previous_turn) {
          v.previous_kernel_turn = previous_turn;
          v.kernel_unchanged = v.kernel == previous_kernel;
          if (!v.kernel_unchanged) v.kernel_diff = line_diff(previous_kernel, v.kernel);
        }
        previous_kernel = v.kernel;
        previous_turn = v.turn;
      }
      p.reached_correct |= v.correct == true;
      p.reached_executed |= v.targets_executed == true;
      if (v.correct == true && v.speedup && v.status == "ok")
        p.best_speedup = std::max(p.best_speedup.value_or(0.0), *v.speedup);
      if (v.cost_usd) p.cost_usd = p.cost_usd.value_or(0.0) + *v.cost_usd;
      p.turns.push_back(std::move(v));
    }
    pages.push_back(std::move(p));
  }
  return pages;
}

namespace {

std::string axis_text(const std::optional<bool> &b) {
  return !b ? "not measured" : *b ? "yes" : "no";
}

std::string times_text(const TurnView &v) {
  std::vector<std::string> parts;
  if (v.request_seconds) parts.push_back(fmt::format("request {:.2f} s", *v.request_seconds));
  if (v.ttft_seconds) parts.push_back(fmt::format("first token {:.2f} s", *v.ttft_seconds));
  if (v.cpu_stages_seconds) parts.push_back(fmt::format("CPU stages {:.2f} s", *v.cpu_stages_seconds));
  if (v.gpu_stage_seconds) parts.push_back(fmt::format("GPU stage {:.2f} s", *v.gpu_stage_seconds));
  std::string s;
  for (const auto &p : parts) s += (s.empty() ? "" : ", ") + p;
  return s.empty() ? "not recorded" : s;
}

std::string tokens_text(const TurnView &v) {
  std::string s = fmt::format("{} prompt + {} completion tokens", v.prompt_tokens, v.completion_tokens);
  if (v.cost_usd) s += fmt::format(", ${:.4f}", *v.cost_usd);
  return s;
}

std::string indent(std::string_view text, std::string_view prefix) {
  std::string out;
  for (auto line : split_lines(text)) out += std::string(prefix) + std::string(line) + "\n";
  return out;
}

}  // namespace

std::string render_trajectory_text(const TrajectoryPage &p, std::optional<int> only_turn) {
  std::string out =
      fmt::format("Trajectory {} (run {}, {})\nmodel {}, task {}, sample {}: {} turn(s)", p.trajectory_id,
                  p.run_id, p.run_dir, p.model, p.task_id, p.sample, p.turns.size());
  out += fmt::format("; correct {}, targets executed {}", p.reached_correct ? "reached" : "not reached",
                     p.reached_executed ? "reached" : "not reached");
  if (p.best_speedup) out += fmt::format(", best speedup {:.3f}x", *p.best_speedup);
  if (p.cost_usd) out += fmt::format(", cost ${:.4f}", *p.cost_usd);
  out += "\n";
  for (const auto &v : p.turns) {
    if (only_turn && v.turn != *only_turn) continue;
    out += fmt::format("\n=== turn {}: {} | correct {} | targets executed {} | speedup {}{} ===\n", v.turn,
                       v.status, axis_text(v.correct), axis_text(v.targets_executed),
                       v.speedup ? fmt::format("{:.3f}x", *v.speedup) : "not measured",
                       v.generalizes ? fmt::format(" | generalizes {}", axis_text(v.generalizes)) : "");
    out += fmt::format("--- feedback received{} ---\n", v.turn == 0 ? " (the task)" : "");
    out += indent(v.feedback_received, "  ");
    if (!v.reasoning.empty())
      out += fmt::format("--- reasoning ({} characters; shown in full) ---\n{}", v.reasoning.size(),
                         indent(v.reasoning, "  "));
    if (!v.request_error.empty()) out += "--- request failed ---\n  " + v.request_error + "\n";
    if (v.kernel.empty()) {
      if (v.request_error.empty())
        out += "--- no kernel parsed from the answer ---\n" + indent(clip(v.answer, 2000), "  ");
    } else if (!v.previous_kernel_turn) {
      out +=
          fmt::format("--- kernel ({}, first of the trajectory) ---\n{}", v.language, indent(v.kernel, "  "));
    } else if (v.kernel_unchanged) {
      out +=
          fmt::format("--- kernel ({}): unchanged since turn {} ---\n", v.language, *v.previous_kernel_turn);
    } else {
      out += fmt::format("--- kernel ({}), diff against turn {} ---\n{}", v.language, *v.previous_kernel_turn,
                         indent(v.kernel_diff, ""));
    }
    out += "--- verdict ---\n";
    for (const auto &s : v.stages) out += "  " + s + "\n";
    for (const auto &f : v.figures) out += "  " + f + "\n";
    out += "  times: " + times_text(v) + "\n  usage: " + tokens_text(v) + "\n";
    if (!v.stop_reason.empty()) out += "  stopped: " + v.stop_reason + "\n";
  }
  return out;
}

namespace {

using detail::html_escape;

/// The page head (title, style sheet), the back link and the trajectory's summary line and turn index.
std::string trajectory_head_html(const TrajectoryPage &p, std::string_view back_href) {
  std::string h =
      "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
      "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"><title>" +
      html_escape(p.trajectory_id) +
      "</title><style>"
      "body{font-family:sans-serif;margin:16px;color:#222;background:#fff;max-width:1200px}"
      "h1{font-size:20px}h2{font-size:16px;margin:0}section.turn{border:1px solid #ccc;margin:14px "
      "0;padding:8px 12px}"
      "pre{background:#f7f7f7;padding:6px;overflow-x:auto;font-size:12px;white-space:pre-wrap}"
      ".add{background:#e6ffec;color:#05501c;display:block}.del{background:#ffebe9;color:#82071e;display:"
      "block}"
      ".fold{color:#888;display:block}.badge{display:inline-block;padding:1px 7px;border-radius:3px;"
      "margin-right:6px;font-size:13px}.yes{background:#2ca02c;color:#fff}.no{background:#d62728;color:#fff}"
      ".na{background:#c7c7c7}.st{font-weight:bold}ul.fig{font-size:13px}h3{font-size:14px;margin:10px 0 4px}"
      "</style></head><body>\n";
  h += fmt::format("<p><a href=\"{}\" id=\"back\">&larr; report</a></p>\n", html_escape(back_href));
  h += fmt::format(
      "<h1 id=\"title\">{}</h1>\n<p>Model <b>{}</b>, task <b>{}</b>, sample {}; run <code>{}</code>. ",
      html_escape(p.trajectory_id), html_escape(p.model), html_escape(p.task_id), p.sample,
      html_escape(p.run_id));
  h += fmt::format("Correct {}, targets executed {}", p.reached_correct ? "reached" : "not reached",
                   p.reached_executed ? "reached" : "not reached");
  if (p.best_speedup) h += fmt::format(", best speedup {:.3f}x", *p.best_speedup);
  if (p.cost_usd) h += fmt::format(", cost ${:.4f}", *p.cost_usd);
  h += ".</p>\n<p>Turns:";
  for (const auto &v : p.turns)
    h += fmt::format(" <a href=\"#turn-{0}\">{0}: {1}</a>", v.turn, html_escape(v.status));
  return h + "</p>\n";
}

std::string badge(std::string_view name, const std::optional<bool> &b) {
  return fmt::format("<span class=\"badge {}\">{}: {}</span>",
                     !b   ? "na"
                     : *b ? "yes"
                          : "no",
                     name, axis_text(b));
}

/// The turn's kernel: its diff against the previous kernel (or a note that it is unchanged or the first),
/// then the full text folded.
std::string kernel_html(const TurnView &v) {
  std::string h;
  if (!v.previous_kernel_turn) {
    h += fmt::format("<h3>Kernel ({}), first of the trajectory</h3>", html_escape(v.language));
  } else if (v.kernel_unchanged) {
    h += fmt::format("<h3>Kernel ({}): unchanged since turn {}</h3>", html_escape(v.language),
                     *v.previous_kernel_turn);
  } else {
    h += fmt::format("<h3>Kernel ({}), diff against turn {}</h3><pre class=\"diff\">",
                     html_escape(v.language), *v.previous_kernel_turn);
    for (auto line : split_lines(v.kernel_diff)) {
      const char *cls = line.starts_with("+ ")   ? "add"
                        : line.starts_with("- ") ? "del"
                        : line.starts_with("@@") ? "fold"
                                                 : "";
      h += *cls ? fmt::format("<span class=\"{}\">{}</span>", cls, html_escape(line))
                : html_escape(line) + "\n";
    }
    h += "</pre>";
  }
  h += fmt::format(
      "<details class=\"kernel\"{}><summary>Full kernel ({} lines)</summary><pre>{}</pre></details>\n",
      // open only for a first kernel short enough not to bury the rest of the page
      !v.previous_kernel_turn && split_lines(v.kernel).size() <= 80 ? " open" : "",
      split_lines(v.kernel).size(), html_escape(v.kernel));
  return h;
}

/// One turn: its axes, the feedback it got, reasoning, kernel, verdict and the feedback it gave.
std::string turn_section_html(const TurnView &v) {
  std::string h = fmt::format(
      "<section class=\"turn\" id=\"turn-{0}\" data-status=\"{1}\"><h2>Turn {0}: <span "
      "class=\"st\">{1}</span></h2>\n<p class=\"axes\">",
      v.turn, html_escape(v.status));
  h += badge("correct", v.correct) + badge("targets executed", v.targets_executed);
  if (v.generalizes) h += badge("generalizes", v.generalizes);
  h += fmt::format("<span class=\"badge {}\">speedup: {}</span></p>\n", v.speedup ? "yes" : "na",
                   v.speedup ? fmt::format("{:.3f}x", *v.speedup) : "not measured");
  h += fmt::format("<h3>Feedback received{}</h3><pre class=\"feedback\">{}</pre>\n",
                   v.turn == 0 ? " (the task)" : "", html_escape(v.feedback_received));
  if (!v.reasoning.empty())
    h += fmt::format(
        "<details class=\"reasoning\"><summary>Reasoning ({} "
        "characters)</summary><pre>{}</pre></details>\n",
        v.reasoning.size(), html_escape(v.reasoning));
  if (!v.request_error.empty())
    h += "<h3>Request failed</h3><pre>" + html_escape(v.request_error) + "</pre>\n";
  if (v.kernel.empty()) {
    if (v.request_error.empty())
      h += "<h3>No kernel parsed from the answer</h3><pre>" + html_escape(clip(v.answer, 4000)) + "</pre>\n";
  } else {
    h += kernel_html(v);
  }
  h += "<h3>Verdict</h3><ul class=\"fig\">";
  for (const auto &s : v.stages) h += "<li>" + html_escape(s) + "</li>";
  h += "</ul><ul class=\"fig figures\">";
  for (const auto &f : v.figures) h += "<li>" + html_escape(f) + "</li>";
  h +=
      "<li>times: " + html_escape(times_text(v)) + "</li><li>usage: " + html_escape(tokens_text(v)) + "</li>";
  if (!v.stop_reason.empty()) h += "<li>stopped: " + html_escape(v.stop_reason) + "</li>";
  h += "</ul>\n";
  if (!v.feedback_given.empty())
    h += "<details class=\"given\"><summary>Feedback sent back for the next turn</summary><pre>" +
         html_escape(v.feedback_given) + "</pre></details>\n";
  return h + "</section>\n";
}

}  // namespace

std::string render_trajectory_html(const TrajectoryPage &p, std::string_view back_href) {
  std::string h = trajectory_head_html(p, back_href);
  for (const auto &v : p.turns) h += turn_section_html(v);
  return h + "</body></html>\n";
}

}  // namespace ptxbench::traces
