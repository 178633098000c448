#include "traces/report.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <set>
#include <stdexcept>
#include <tuple>

#include <fmt/core.h>
#include <fmt/ranges.h>

#include "traces/detail/html_report.hpp"
#include "traces/detail/run_view.hpp"
#include "util/files.hpp"

namespace ptxbench::traces {

using detail::Json;

namespace {
const GroupReport *find_group(const std::vector<GroupReport> &groups, GroupScope scope,
                              const std::string &model, const std::string &task) {
  for (const auto &g : groups) {
    if (g.scope == scope && (scope == GroupScope::task || g.model == model) &&
        (scope == GroupScope::model || g.task == task)) {
      return &g;
    }
  }
  return nullptr;
}
}  // namespace

const GroupReport *Report::find(const std::string &model, const std::string &task) const {
  return find_group(groups, GroupScope::model_task, model, task);
}
const GroupReport *Report::find_model(const std::string &model) const {
  return find_group(groups, GroupScope::model, model, "");
}
const GroupReport *Report::find_task(const std::string &task) const {
  return find_group(groups, GroupScope::task, "", task);
}
const GroupReport &Report::overall() const {
  // build_report always adds the overall group last.
  return groups.back();
}

const std::pair<const std::string, ProfileDistribution::Unit> *ProfileDistribution::top_unit() const {
  const std::pair<const std::string, Unit> *top = nullptr;
  for (const auto &entry : bound_units)
    if (!top || entry.second.attempts > top->second.attempts) top = &entry;
  return top;
}

std::optional<double> ProfileDistribution::Unit::median() const {
  if (values.empty()) return std::nullopt;
  std::vector<double> v = values;
  std::sort(v.begin(), v.end());
  return quantile_sorted(v.data(), v.size(), 0.5);
}

double pass_at_k(int n, int c, int k) {
  if (n < 1 || c < 0 || c > n || k < 1 || k > n) {
    throw std::invalid_argument(
        fmt::format("pass_at_k: need 0 <= c <= n and 1 <= k <= n (n={}, c={}, k={})", n, c, k));
  }
  if (n - c < k) return 1.0;  // every k-subset holds a success
  // C(n-c, k) / C(n, k) = prod_{i = n-c+1}^{n} (1 - k / i)
  double fail = 1.0;
  for (int i = n - c + 1; i <= n; ++i) fail *= 1.0 - static_cast<double>(k) / i;
  return 1.0 - fail;
}

namespace {

using detail::gpu_unmeasured;
std::string opt_fixed(const std::optional<double> &v, int digits, const std::string &suffix = "") {
  return v ? fmt::format("{:.{}f}{}", *v, digits, suffix) : "—";
}
std::string p_label(double p) {
  return detail::fast_label(p);
}

std::string csv_field(const std::string &s) {
  if (s.find_first_of(",\"\n\r") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}
std::string csv_num(const std::optional<double> &v) {
  return v ? fmt::format("{:.6g}", *v) : "";
}
std::string rate(int num, int den) {
  return den ? fmt::format("{:.6g}", static_cast<double>(num) / den) : "";
}
/// "45.0% [30.1–60.2]": the rate and its Wilson 95% interval.
std::string pct_ci(int num, int den) {
  auto ci = wilson_interval(num, den);
  if (!ci) return "—";
  return fmt::format("{:.1f}% [{:.1f}–{:.1f}]", 100.0 * num / den, 100 * ci->lo, 100 * ci->hi);
}
std::string pass_ci(const std::map<int, double> &values, const std::map<int, Interval> &cis, int k) {
  auto it = values.find(k);
  if (it == values.end()) return "—";
  auto c = cis.find(k);
  return c == cis.end() ? fmt::format("{:.3f}", it->second)
                        : fmt::format("{:.3f} [{:.3f}–{:.3f}]", it->second, c->second.lo, c->second.hi);
}
std::string speedup_ci(const std::optional<double> &v, const std::optional<Interval> &ci) {
  if (!v) return "—";
  return ci ? fmt::format("{:.3f}x [{:.3f}–{:.3f}]", *v, ci->lo, ci->hi) : fmt::format("{:.3f}x", *v);
}
std::string diff_ci(double d, const std::optional<Interval> &ci) {
  if (!ci) return fmt::format("{:+.3f}", d);
  const bool excludes_zero = ci->lo > 0 || ci->hi < 0;
  return fmt::format("{:+.3f} [{:+.3f}, {:+.3f}]{}", d, ci->lo, ci->hi, excludes_zero ? " *" : "");
}
/// "3/4 (75.0% [30.1–95.4])": trajectories right on the hidden workloads of those checked; "—" when none.
std::string generalization_text(int generalizing, int checked) {
  return checked ? fmt::format("{}/{} ({})", generalizing, checked, pct_ci(generalizing, checked)) : "—";
}
std::string usd(const std::optional<double> &v) {
  return v ? fmt::format("${:.4f}", *v) : "—";
}
/// CSV fields "rate,lo,hi" of a Wilson interval (empty when there are no trials).
std::string rate_lo_hi(int num, int den) {
  auto ci = wilson_interval(num, den);
  return ci ? fmt::format("{},{:.6g},{:.6g}", rate(num, den), ci->lo, ci->hi) : ",,";
}
/// CSV fields "bound_unit,bound_unit_pct,tensor_pipe_pct,library_tensor_pipe_pct" of one attempt; empty
/// when it was not profiled (or the figure was not measured).
std::string profile_fields(const AttemptProfile &p) {
  return fmt::format("{},{},{},{}", csv_field(p.bound_unit), csv_num(p.bound_value), csv_num(p.tensor_pct),
                     csv_num(p.library_tensor_pct));
}
constexpr const char *kProfileColumns = "bound_unit,bound_unit_pct,tensor_pipe_pct,library_tensor_pipe_pct";

/// summary.csv's profile columns of a group: the most frequent bound unit (its attempts and median % of
/// peak), every unit as "name=attempts;...", the tensor pipe's spread and the library's; empty when no
/// final correct attempt was profiled.
std::string profile_summary_fields(const ProfileDistribution &d) {
  std::string s = fmt::format("{},{},{}", d.attempts, d.profiled, d.not_profiled);
  const auto *top = d.top_unit();
  std::string units;
  for (const auto &[name, unit] : d.bound_units)
    units += fmt::format("{}{}={}", units.empty() ? "" : ";", name, unit.attempts);
  s += fmt::format(",{},{},{},{}", top ? csv_field(top->first) : "",
                   top ? std::to_string(top->second.attempts) : "",
                   csv_num(top ? top->second.median() : std::nullopt), csv_field(units));
  auto spread = [](const std::optional<Spread> &x) {
    return x ? fmt::format("{:.6g},{:.6g},{:.6g},{:.6g},{:.6g}", x->median, x->p25, x->p75, x->min, x->max)
             : std::string(",,,,");
  };
  return s + "," + spread(d.tensor_pipe) + "," + spread(d.library_tensor_pipe);
}
constexpr const char *kProfileSummaryColumns =
    "profile_attempts,profiled,not_profiled,bound_unit,bound_unit_attempts,bound_unit_pct,bound_units,"
    "tensor_pipe_median,tensor_pipe_p25,tensor_pipe_p75,tensor_pipe_min,tensor_pipe_max,"
    "library_tensor_pipe_median,library_tensor_pipe_p25,library_tensor_pipe_p75,library_tensor_pipe_min,"
    "library_tensor_pipe_max";

std::string ci_lo_hi(const std::optional<Interval> &ci) {
  return ci ? fmt::format("{:.6g},{:.6g}", ci->lo, ci->hi) : ",";
}

}  // namespace

namespace {

/// The runs, what the rates mean, and how the intervals are made.
void markdown_intro(const Report &r, std::string &md) {
  const auto &boot = r.options.bootstrap;
  md += "# PTXBench report\n\nRuns:\n";
  for (const auto &s : r.sources) md += "- `" + s + "`\n";
  md += fmt::format(
      "\nModels: {}. Tasks: {}. Turns: {}.\n\nRates are over trajectories: an axis counts once the "
      "trajectory "
      "reached it at any turn so far. fast_p = status ok, correct and speedup > p. Speedups are over correct "
      "attempts (library time / candidate time).\n",
      r.models.size(), r.tasks.size(), r.turns);
  md += fmt::format(
      "\nIntervals: [lo–hi] after a value is its 95% interval. Rates: Wilson score interval over "
      "trajectories. pass@k and geomean speedup: percentile bootstrap, {} resamples of whole trajectories "
      "within each model × task pair, seed {} (level {}). Model differences: paired bootstrap (pairs = "
      "same task and sample index, resampled within each task), same seed. A bootstrap interval collapses to "
      "a point when every trajectory of a group has the same outcome (e.g. 0 of 20): read the Wilson "
      "interval of the correct column then.\n",
      boot.resamples, boot.seed, boot.level);

  if (!r.groups.empty() && r.overall().request_failed_trajectories > 0) {
    const int n = r.overall().request_failed_trajectories;
    md += fmt::format(
        "\n{} {} ended in a request failure (the endpoint's, not the model's) and {} left out of every rate "
        "below; `ptxbench resume RUN_DIR` retries them.\n",
        n, n == 1 ? "trajectory" : "trajectories", n == 1 ? "is" : "are");
  }
  if (!r.groups.empty() && gpu_unmeasured(r.overall()))
    md += "\nNo attempt ran on a GPU: correct, executed, fast_p and pass@k are not measured.\n";
}

/// One row per group: the axes at the end of the trajectory.
void markdown_summary(const Report &r, std::string &md) {
  const auto &ps = r.options.fast_thresholds;
  md +=
      "\n## Summary (end of trajectory)\n\n| model | task | trajectories | compile | correct | executed | "
      "generalizes |";
  for (double p : ps) md += " " + p_label(p) + " |";
  md +=
      " pass@1 | fast_1.0 pass@1 | geomean speedup | best speedup | tokens / success | cost / success "
      "|\n|---|---|---:|---:|---:|---:|---:|";
  for (std::size_t i = 0; i < ps.size(); ++i) md += "---:|";
  md += "---:|---:|---:|---:|---:|---:|\n";
  for (const auto &g : r.groups) {
    const bool nm = gpu_unmeasured(g);
    auto gpu_pct = [&](int num) { return nm ? std::string("not measured") : pct_ci(num, g.trajectories); };
    md += fmt::format(
        "| {} | {} | {} | {} | {} | {} | {} |", g.model, g.task, g.trajectories,
        pct_ci(g.end.compiled, g.trajectories), gpu_pct(g.end.correct), gpu_pct(g.end.executed),
        nm ? std::string("not measured") : generalization_text(g.generalizing, g.generalization_checked));
    for (std::size_t i = 0; i < ps.size(); ++i) md += " " + gpu_pct(g.end.fast[i]) + " |";
    md += fmt::format(" {} | {} | {} | {} | {} | {} |\n",
                      nm ? std::string("not measured") : pass_ci(g.pass_correct, g.pass_correct_ci, 1),
                      nm ? std::string("not measured") : pass_ci(g.pass_fast1, g.pass_fast1_ci, 1),
                      speedup_ci(g.geomean_speedup, g.geomean_speedup_ci), opt_fixed(g.best_speedup, 3, "x"),
                      opt_fixed(g.tokens_per_success, 0), usd(g.cost_per_success));
  }
}

/// Paired model differences.
void markdown_comparisons(const Report &r, std::string &md) {
  if (!r.comparisons.empty()) {
    md +=
        "\n## Model comparison (A − B, paired bootstrap 95% interval; * = the interval excludes 0)\n\n| A | "
        "B | "
        "task | pairs | pass@1 A | pass@1 B | pass@1 A−B | fast_1.0 A | fast_1.0 B | fast_1.0 A−B "
        "| generalizes A | generalizes B |\n|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n";
    for (const auto &c : r.comparisons) {
      for (const auto &row : c.rows) {
        // A side whose GPU stages never ran has no pass@1 to compare (not 0).
        const bool both = row.measured_a > 0 && row.measured_b > 0;
        const auto rate = [](double v, int measured) {
          return measured > 0 ? fmt::format("{:.3f}", v) : std::string("not measured");
        };
        md += fmt::format(
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |\n", c.model_a, c.model_b, row.task,
            row.pairs, rate(row.pass1_a, row.measured_a), rate(row.pass1_b, row.measured_b),
            both ? diff_ci(row.pass1_diff, row.pass1_diff_ci) : "—", rate(row.fast1_a, row.measured_a),
            rate(row.fast1_b, row.measured_b), both ? diff_ci(row.fast1_diff, row.fast1_diff_ci) : "—",
            generalization_text(row.gen_a, row.gen_checked_a),
            generalization_text(row.gen_b, row.gen_checked_b));
      }
    }
  }
}

/// pass@k per group.
void markdown_pass_at_k(const Report &r, std::string &md) {
  md +=
      "\n## pass@k (unbiased estimator, averaged over model × task pairs; bootstrap 95% interval)\n\n| model "
      "| task | metric |";
  for (int k : r.options.pass_k) md += fmt::format(" k={} |", k);
  md += "\n|---|---|---|";
  for (std::size_t i = 0; i < r.options.pass_k.size(); ++i) md += "---:|";
  md += "\n";
  for (const auto &g : r.groups) {
    for (int which = 0; which < 2; ++which) {
      const auto &m = which == 0 ? g.pass_correct : g.pass_fast1;
      const auto &ci = which == 0 ? g.pass_correct_ci : g.pass_fast1_ci;
      md += fmt::format("| {} | {} | {} |", g.model, g.task, which == 0 ? "correct" : "fast_1.0");
      for (int k : r.options.pass_k)
        md += gpu_unmeasured(g) ? " not measured |" : " " + pass_ci(m, ci, k) + " |";
      md += "\n";
    }
  }
}

/// Cumulative rates by turn.
void markdown_by_turn(const Report &r, std::string &md) {
  const auto &ps = r.options.fast_thresholds;
  md +=
      "\n## By turn (cumulative rates over trajectories with Wilson 95% intervals; attempts = records at "
      "that turn)\n\n| model | task "
      "| turn | attempts | compile | correct | executed |";
  for (double p : ps) md += " " + p_label(p) + " |";
  md += "\n|---|---|---:|---:|---:|---:|---:|";
  for (std::size_t i = 0; i < ps.size(); ++i) md += "---:|";
  md += "\n";
  for (const auto &g : r.groups) {
    for (const auto &row : g.by_turn) {
      const bool nm = gpu_unmeasured(g);
      auto gpu_pct = [&](int num) { return nm ? std::string("not measured") : pct_ci(num, g.trajectories); };
      md += fmt::format("| {} | {} | {} | {} | {} | {} | {} |", g.model, g.task, row.turn, row.attempts,
                        pct_ci(row.cumulative.compiled, g.trajectories), gpu_pct(row.cumulative.correct),
                        gpu_pct(row.cumulative.executed));
      for (std::size_t i = 0; i < ps.size(); ++i) md += " " + gpu_pct(row.cumulative.fast[i]) + " |";
      md += "\n";
    }
  }
}

/// Verdict statuses of the attempts by turn.
void markdown_failures(const Report &r, std::string &md) {
  std::set<std::string> statuses;
  for (const auto &g : r.groups)
    for (const auto &m : g.failures_by_turn)
      for (const auto &[s, n] : m) statuses.insert(s);
  md += "\n## Failure taxonomy (verdict status of each attempt, by turn)\n\n| model | task | turn |";
  for (const auto &s : statuses) md += " " + s + " |";
  md += "\n|---|---|---:|";
  for (std::size_t i = 0; i < statuses.size(); ++i) md += "---:|";
  md += "\n";
  for (const auto &g : r.groups) {
    for (std::size_t t = 0; t < g.failures_by_turn.size(); ++t) {
      md += fmt::format("| {} | {} | {} |", g.model, g.task, t);
      for (const auto &s : statuses) {
        auto it = g.failures_by_turn[t].find(s);
        md += fmt::format(" {} |", it == g.failures_by_turn[t].end() ? 0 : it->second);
      }
      md += "\n";
    }
  }
}

/// Attempts near the tolerance per group; nothing when no attempt was.
void markdown_borderline(const Report &r, std::string &md) {
  if (r.groups.empty() || r.overall().borderline_attempts == 0) return;
  md +=
      "\n## Near the tolerance (borderline attempts)\n\nAttempts whose largest error over the tolerance lay "
      "in the borderline band, so extra trials on fresh inputs estimated how often the kernel fails "
      "(`stages.correctness.figures.workloads[].margin`); incorrect: some trial failed.\n\n| model | task | "
      "attempts | borderline | borderline and incorrect |\n|---|---|---:|---:|---:|\n";
  for (const auto &g : r.groups)
    md += fmt::format("| {} | {} | {} | {} | {} |\n", g.model, g.task, g.attempts, g.borderline_attempts,
                      g.borderline_incorrect);
}

/// Where the time goes: the bound unit and the tensor pipe over each trajectory's final correct attempt.
void markdown_profile(const Report &r, std::string &md) {
  if (r.groups.empty() || r.overall().profile.attempts == 0) return;
  const ProfileDistribution &all = r.overall().profile;
  md += "\n## Where the time goes (profiles of the final correct attempts)\n\n";
  if (all.profiled == 0) {
    md += fmt::format(
        "Not profiled: none of the {} final correct attempts carries a profile (no GPU, the profile stage "
        "off or skipped, or verdicts made before it existed).\n",
        all.attempts);
    return;
  }
  md += fmt::format(
      "Per trajectory, its final correct attempt (the last turn with `axes.correct` true) as the profile "
      "stage measured it (`stages.profile.figures.kernel_profile`). Bound by: the throughput metric closest "
      "to its peak, attempts (median % of peak). Tensor pipe: `{}`, % of peak, median [p25–p75] (min–max), "
      "beside the library's figure for the same workloads. Attempts without a profile (no GPU, the stage "
      "off or skipped, older verdicts) are counted as not profiled, never as 0%.\n\n| model | task | final "
      "correct attempts | profiled | not profiled | bound by | tensor pipe % | library tensor pipe % "
      "|\n|---|---|---:|---:|---:|---|---:|---:|\n",
      kTensorPipeMetric);
  for (const auto &g : r.groups) {
    const ProfileDistribution &d = g.profile;
    const bool none = d.profiled == 0;
    md += fmt::format("| {} | {} | {} | {} | {} | {} | {} | {} |\n", g.model, g.task, d.attempts, d.profiled,
                      d.not_profiled,
                      d.attempts == 0 ? "—"
                      : none          ? "not profiled"
                                      : detail::bound_units_text(d),
                      d.tensor_pipe ? detail::spread_text(*d.tensor_pipe)
                      : none        ? "not profiled"
                                    : "not measured",
                      d.library_tensor_pipe ? detail::library_spread_text(*d.library_tensor_pipe)
                      : none                ? "not profiled"
                                            : "not measured");
  }
  std::string units;
  for (const auto &[name, unit] : all.bound_units)
    units += fmt::format("{}{} = `{}`", units.empty() ? " Units: " : "; ", unit.label, name);
  md += fmt::format("\nThe per-attempt figures are in profiles.csv.{}\n", units.empty() ? "" : units + ".");
}

/// Tokens, cost and time per group.
void markdown_cost(const Report &r, std::string &md) {
  md += "\n## Cost and time\n\n";
  if (r.prices.empty()) {
    md +=
        "No prices: set \"prices\" in the run config (USD per million prompt / completion tokens per "
        "endpoint) or pass --price to see costs.\n\n";
  } else {
    md += "Prices (USD per million tokens, prompt / completion):";
    for (const auto &[name, p] : r.prices)
      md += fmt::format(" {} {:g} / {:g};", name, p.prompt_per_mtok, p.completion_per_mtok);
    md += " completion tokens as the endpoint counted them (reasoning included where it counts it so).\n\n";
  }
  md +=
      "| model | task | attempts | prompt tokens | completion tokens | reasoning tokens | cost | cost / turn "
      "| "
      "cost / trajectory | cost / success | request s / turn | first token s | wall s | successes "
      "|\n|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n";
  for (const auto &g : r.groups) {
    md += fmt::format("| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {:.1f} | {} |\n",
                      g.model, g.task, g.attempts, g.prompt_tokens, g.completion_tokens, g.reasoning_tokens,
                      usd(g.cost_usd), usd(g.cost_per_attempt), usd(g.cost_per_trajectory),
                      usd(g.cost_per_success), opt_fixed(g.mean_request_seconds, 2),
                      opt_fixed(g.mean_ttft_seconds, 2), g.wall_seconds, g.successes);
  }
}

/// Repairs, trajectory pages and warnings.
void markdown_tail(const Report &r, std::string &md) {
  if (r.repairs) md += render_repairs_markdown(*r.repairs, "##");
  md += fmt::format(
      "\n## Trajectories\n\nEvery trajectory has a page under `trajectories/` ({} pages), linked from "
      "report.html; `ptxbench show RUN_DIR --model M --task T --sample S` prints the same in a terminal.\n",
      r.pages.size());
  if (!r.warnings.empty()) {
    md += "\n## Warnings\n\n";
    for (const auto &w : r.warnings) md += "- " + w + "\n";
  }
}

}  // namespace

std::string render_markdown(const Report &r) {
  std::string md;
  markdown_intro(r, md);
  markdown_summary(r, md);
  markdown_comparisons(r, md);
  markdown_pass_at_k(r, md);
  markdown_by_turn(r, md);
  markdown_failures(r, md);
  markdown_borderline(r, md);
  markdown_profile(r, md);
  markdown_cost(r, md);
  markdown_tail(r, md);
  return md;
}

namespace {

/// summary.csv: one row per group; every rate followed by its 95% interval.
void csv_summary(const Report &r, std::map<std::string, std::string> &files) {
  const auto &ps = r.options.fast_thresholds;
  // Every rate is followed by its Wilson 95% interval (_lo, _hi); pass@1 and the geomean by their
  // bootstrap interval.
  std::string s =
      "model,task,trajectories,attempts,compile_rate,compile_lo,compile_hi,correct_rate,correct_lo,correct_"
      "hi,"
      "executed_rate,executed_lo,executed_hi";
  for (double p : ps) s += "," + p_label(p) + "_rate," + p_label(p) + "_lo," + p_label(p) + "_hi";
  s += ",pass1_correct,pass1_correct_lo,pass1_correct_hi,pass1_fast_1.0,pass1_fast_1.0_lo,pass1_fast_1.0_hi,"
       "geomean_speedup,geomean_speedup_lo,geomean_speedup_hi,best_speedup,speedup_samples,successes,"
       "prompt_tokens,completion_tokens,reasoning_tokens,wall_seconds,tokens_per_success,wall_seconds_per_"
       "success,cost_usd,cost_per_attempt_usd,cost_per_trajectory_usd,cost_per_success_usd,mean_request_"
       "seconds,mean_ttft_seconds,generalization_checked,generalizes_rate,generalizes_lo,generalizes_hi,"
       "borderline_attempts,borderline_incorrect,";
  s += kProfileSummaryColumns;
  s += "\n";
  auto pass1 = [](const std::map<int, double> &m, const std::map<int, Interval> &cis) {
    auto it = m.find(1);
    auto c = cis.find(1);
    return fmt::format("{},{}", it == m.end() ? std::string() : fmt::format("{:.6g}", it->second),
                       ci_lo_hi(c == cis.end() ? std::nullopt : std::optional<Interval>(c->second)));
  };
  for (const auto &g : r.groups) {
    s += fmt::format("{},{},{},{},{},{},{}", csv_field(g.model), csv_field(g.task), g.trajectories,
                     g.attempts, rate_lo_hi(g.end.compiled, g.trajectories),
                     rate_lo_hi(g.end.correct, g.trajectories), rate_lo_hi(g.end.executed, g.trajectories));
    for (std::size_t i = 0; i < ps.size(); ++i) s += "," + rate_lo_hi(g.end.fast[i], g.trajectories);
    s += fmt::format(",{},{},{},{},{},{},{},{},{},{},{:.6g},{},{},{},{},{},{},{},{}\n",
                     pass1(g.pass_correct, g.pass_correct_ci), pass1(g.pass_fast1, g.pass_fast1_ci),
                     csv_num(g.geomean_speedup), ci_lo_hi(g.geomean_speedup_ci), csv_num(g.best_speedup),
                     g.speedup_samples, g.successes, g.prompt_tokens, g.completion_tokens, g.reasoning_tokens,
                     g.wall_seconds, csv_num(g.tokens_per_success), csv_num(g.wall_seconds_per_success),
                     csv_num(g.cost_usd), csv_num(g.cost_per_attempt), csv_num(g.cost_per_trajectory),
                     csv_num(g.cost_per_success), csv_num(g.mean_request_seconds),
                     csv_num(g.mean_ttft_seconds));
    s.pop_back();  // the row's newline: the generalization columns follow
    s += fmt::format(",{},{},{},{},{}\n", g.generalization_checked,
                     rate_lo_hi(g.generalizing, g.generalization_checked), g.borderline_attempts,
                     g.borderline_incorrect, profile_summary_fields(g.profile));
  }
  files["summary.csv"] = s;
}

/// by_turn.csv: cumulative and per-attempt rates by turn.
void csv_by_turn(const Report &r, std::map<std::string, std::string> &files) {
  const auto &ps = r.options.fast_thresholds;
  std::string s = "model,task,turn,attempts,cum_compile_rate,cum_correct_rate,cum_executed_rate";
  for (double p : ps) s += ",cum_" + p_label(p) + "_rate";
  s += ",cum_compile_lo,cum_compile_hi,cum_correct_lo,cum_correct_hi,cum_executed_lo,cum_executed_hi";
  for (double p : ps) s += ",cum_" + p_label(p) + "_lo,cum_" + p_label(p) + "_hi";
  s += ",attempt_compile_rate,attempt_correct_rate,attempt_executed_rate";
  for (double p : ps) s += ",attempt_" + p_label(p) + "_rate";
  s += "\n";
  for (const auto &g : r.groups) {
    for (const auto &row : g.by_turn) {
      s += fmt::format("{},{},{},{},{},{},{}", csv_field(g.model), csv_field(g.task), row.turn, row.attempts,
                       rate(row.cumulative.compiled, g.trajectories),
                       rate(row.cumulative.correct, g.trajectories),
                       rate(row.cumulative.executed, g.trajectories));
      for (std::size_t i = 0; i < ps.size(); ++i) s += "," + rate(row.cumulative.fast[i], g.trajectories);
      auto lo_hi = [&](int num) {
        auto ci = wilson_interval(num, g.trajectories);
        return ci ? fmt::format(",{:.6g},{:.6g}", ci->lo, ci->hi) : std::string(",,");
      };
      s += lo_hi(row.cumulative.compiled) + lo_hi(row.cumulative.correct) + lo_hi(row.cumulative.executed);
      for (std::size_t i = 0; i < ps.size(); ++i) s += lo_hi(row.cumulative.fast[i]);
      s += fmt::format(",{},{},{}", rate(row.per_attempt.compiled, row.attempts),
                       rate(row.per_attempt.correct, row.attempts),
                       rate(row.per_attempt.executed, row.attempts));
      for (std::size_t i = 0; i < ps.size(); ++i) s += "," + rate(row.per_attempt.fast[i], row.attempts);
      s += "\n";
    }
  }
  files["by_turn.csv"] = s;
}

/// pass_at_k.csv: pass@k per group and k with its bootstrap interval.
void csv_pass_at_k(const Report &r, std::map<std::string, std::string> &files) {
  std::string s = "model,task,metric,k,pass_at_k,lo,hi\n";
  for (const auto &g : r.groups) {
    for (int which = 0; which < 2; ++which) {
      const auto &m = which ? g.pass_fast1 : g.pass_correct;
      const auto &cis = which ? g.pass_fast1_ci : g.pass_correct_ci;
      for (const auto &[k, v] : m) {
        auto c = cis.find(k);
        s += fmt::format("{},{},{},{},{:.6g},{}\n", csv_field(g.model), csv_field(g.task),
                         which ? "fast_1.0" : "correct", k, v,
                         ci_lo_hi(c == cis.end() ? std::nullopt : std::optional<Interval>(c->second)));
      }
    }
  }
  files["pass_at_k.csv"] = s;
}

/// failures.csv: verdict statuses by turn.
void csv_failures(const Report &r, std::map<std::string, std::string> &files) {
  std::string s = "model,task,turn,status,count\n";
  for (const auto &g : r.groups) {
    for (std::size_t t = 0; t < g.failures_by_turn.size(); ++t) {
      for (const auto &[status, n] : g.failures_by_turn[t]) {
        s += fmt::format("{},{},{},{},{}\n", csv_field(g.model), csv_field(g.task), t, csv_field(status), n);
      }
    }
  }
  files["failures.csv"] = s;
}

/// speedups.csv: every timed correct attempt.
void csv_speedups(const Report &r, std::map<std::string, std::string> &files) {
  std::string s = fmt::format("model,task,trajectory_id,turn,speedup,{}\n", kProfileColumns);
  for (const auto &p : r.speedups) {
    s += fmt::format("{},{},{},{},{:.6g},{}\n", csv_field(p.model), csv_field(p.task),
                     csv_field(p.trajectory_id), p.turn, p.speedup, profile_fields(p.profile));
  }
  files["speedups.csv"] = s;
}

/// profiles.csv: every trajectory's final correct attempt, the population of the profile distributions.
void csv_profiles(const Report &r, std::map<std::string, std::string> &files) {
  std::string s =
      fmt::format("model,task,trajectory_id,turn,profiled,bound_unit_label,{}\n", kProfileColumns);
  for (const auto &a : r.profiled_attempts) {
    s += fmt::format("{},{},{},{},{},{},{}\n", csv_field(a.model), csv_field(a.task),
                     csv_field(a.trajectory_id), a.turn, a.profile.profiled, csv_field(a.profile.bound_label),
                     profile_fields(a.profile));
  }
  files["profiles.csv"] = s;
}

/// comparison.csv: paired model differences (when there are comparisons).
void csv_comparison(const Report &r, std::map<std::string, std::string> &files) {
  if (!r.comparisons.empty()) {
    std::string s =
        "model_a,model_b,task,pairs,pass1_a,pass1_b,pass1_diff,pass1_diff_lo,pass1_diff_hi,fast1_a,fast1_b,"
        "fast1_diff,fast1_diff_lo,fast1_diff_hi,gen_checked_a,gen_a_rate,gen_a_lo,gen_a_hi,gen_checked_b,"
        "gen_b_rate,gen_b_lo,gen_b_hi,measured_a,measured_b\n";
    // Rates of a side never measured on a GPU (measured_x = 0) and differences involving it are empty.
    const auto value = [](double v, bool measured) { return measured ? fmt::format("{:.6g}", v) : ""; };
    for (const auto &c : r.comparisons) {
      for (const auto &row : c.rows) {
        const bool a = row.measured_a > 0, b = row.measured_b > 0;
        s += fmt::format("{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}\n", csv_field(c.model_a),
                         csv_field(c.model_b), csv_field(row.task), row.pairs, value(row.pass1_a, a),
                         value(row.pass1_b, b), value(row.pass1_diff, a && b),
                         a && b ? ci_lo_hi(row.pass1_diff_ci) : ",", value(row.fast1_a, a),
                         value(row.fast1_b, b), value(row.fast1_diff, a && b),
                         a && b ? ci_lo_hi(row.fast1_diff_ci) : ",", row.gen_checked_a,
                         rate_lo_hi(row.gen_a, row.gen_checked_a), row.gen_checked_b,
                         rate_lo_hi(row.gen_b, row.gen_checked_b), row.measured_a, row.measured_b);
      }
    }
    files["comparison.csv"] = s;
  }
}

/// repairs.csv: fix rates of a repairs run (when the runs hold one).
void csv_repairs(const Report &r, std::map<std::string, std::string> &files) {
  if (r.repairs) {
    // Fix rates of a repairs run, each with its Wilson interval.
    std::string rep = "group,key,trajectories,fixed,fix_rate,fix_lo,fix_hi\n";
    auto add = [&](const std::string &group, const std::string &key, const FixCount &c) {
      rep += fmt::format("{},{},{},{},{}\n", group, csv_field(key), c.trajectories, c.fixed,
                         rate_lo_hi(c.fixed, c.trajectories));
    };
    add("all", "all", r.repairs->all);
    for (const auto &[k, c] : r.repairs->by_category) add("category", k, c);
    for (const auto &[k, c] : r.repairs->by_task) add("task", k, c);
    for (const auto &[k, c] : r.repairs->by_student_model) add("student_model", k, c);
    for (const auto &[k, c] : r.repairs->by_student_turn) add("student_turn", std::to_string(k), c);
    files["repairs.csv"] = rep;
  }
}

}  // namespace

std::map<std::string, std::string> render_csv(const Report &r) {
  std::map<std::string, std::string> files;
  csv_summary(r, files);
  csv_by_turn(r, files);
  csv_pass_at_k(r, files);
  csv_failures(r, files);
  csv_speedups(r, files);
  csv_profiles(r, files);
  csv_comparison(r, files);
  csv_repairs(r, files);
  return files;
}

std::string render_html(const Report &report) {
  return detail::render_html_report(report);
}

util::Expected<std::vector<std::filesystem::path>> write_report(const Report &report,
                                                                const std::filesystem::path &out_dir) {
  std::error_code ec;
  std::filesystem::create_directories(out_dir, ec);
  if (ec) return util::unexpected(fmt::format("cannot create {}: {}", out_dir.string(), ec.message()));
  std::vector<std::pair<std::string, std::string>> files = {{"report.md", render_markdown(report)},
                                                            {"report.html", render_html(report)}};
  for (auto &[name, text] : render_csv(report)) files.emplace_back(name, std::move(text));
  if (!report.pages.empty()) {
    std::filesystem::create_directories(out_dir / "trajectories", ec);
    if (ec)
      return util::unexpected(
          fmt::format("cannot create {}: {}", (out_dir / "trajectories").string(), ec.message()));
  }
  for (const auto &page : report.pages)
    files.emplace_back(page.file, render_trajectory_html(page, "../report.html"));
  std::vector<std::filesystem::path> written;
  for (const auto &[name, text] : files) {
    auto path = out_dir / name;
    auto ok = util::write_file_atomic(path, text);
    if (!ok) return util::unexpected(fmt::format("cannot write {}: {}", path.string(), ok.error()));
    if (name.rfind("trajectories/", 0) != 0) written.push_back(path);
  }
  if (!report.pages.empty()) written.push_back(out_dir / "trajectories");
  return written;
}

}  // namespace ptxbench::traces
