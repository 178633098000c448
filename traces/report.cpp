#include "traces/report.hpp"

#include <algorithm>
#include <cmath>
#include <set>
#include <stdexcept>
#include <tuple>

#include <fmt/core.h>

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

/// What one attempt achieved.
struct AttemptFacts {
  bool compiled = false, correct = false, executed = false, timed_ok = false;
  std::optional<double> speedup;
};

AttemptFacts facts_of(const Json &record) {
  AttemptFacts f;
  f.compiled = detail::compiled_of(record);
  f.correct = detail::correct_of(record) == true;
  f.executed = detail::targets_executed_of(record) == true;
  f.speedup = detail::speedup_of(record);
  f.timed_ok = f.correct && f.speedup && detail::status_of(record) == "ok";
  return f;
}

bool is_fast(const AttemptFacts &f, double p) {
  return f.timed_ok && *f.speedup > p;
}

void add(AxisCounts &c, const AttemptFacts &f, const std::vector<double> &ps) {
  c.compiled += f.compiled;
  c.correct += f.correct;
  c.executed += f.executed;
  for (std::size_t i = 0; i < ps.size(); ++i) c.fast[i] += is_fast(f, ps[i]);
}

double wall_seconds_of(const Json &record) {
  if (const Json *t = detail::object_field(record, "timings")) {
    double s = detail::number_field(*t, "request_s").value_or(0) +
               detail::number_field(*t, "cpu_stages_s").value_or(0) +
               detail::number_field(*t, "gpu_stage_s").value_or(0);
    if (s > 0) return s;
  }
  double s = 0;
  if (const Json *r = detail::object_field(record, "response"))
    s += detail::number_field(*r, "latency_seconds").value_or(0);
  if (const Json *v = detail::verdict_of(record)) s += detail::number_field(*v, "wall_seconds").value_or(0);
  return s;
}

struct Accumulator {
  GroupReport g;
  double log_speedup_sum = 0;
  std::set<std::pair<std::string, std::string>> pairs;  ///< model × task pairs in the group
};

}  // namespace

util::Expected<Report> build_report(const std::vector<LoadedRun> &runs, const ReportOptions &options) {
  detail::RunIndex index = detail::index_runs(runs);
  if (index.usable_records == 0) return util::unexpected(detail::no_usable_records_message(runs, index));
  Report report;
  report.options = options;
  report.warnings = index.warnings;
  report.skipped_partial_lines = index.skipped_partial_lines;
  for (const auto &r : runs) report.sources.push_back(r.dir.string());
  std::set<std::string> models, tasks;
  for (const auto &t : index.trajectories) {
    models.insert(t.model);
    tasks.insert(t.task_id);
    report.turns =
        std::max(report.turns, static_cast<int>(detail::int_field(*t.turns.back(), "turn").value_or(0)) + 1);
  }
  report.models.assign(models.begin(), models.end());
  report.tasks.assign(tasks.begin(), tasks.end());
  const auto &ps = options.fast_thresholds;
  const std::size_t np = ps.size();
  auto fresh_counts = [&] {
    AxisCounts c;
    c.fast.assign(np, 0);
    return c;
  };

  std::map<std::tuple<GroupScope, std::string, std::string>, Accumulator> acc;
  auto group = [&](GroupScope scope, const std::string &model, const std::string &task) -> Accumulator & {
    auto [it, inserted] = acc.try_emplace({scope, model, task});
    if (inserted) {
      GroupReport &g = it->second.g;
      g.scope = scope;
      g.model = model;
      g.task = task;
      g.end = fresh_counts();
      g.by_turn.resize(static_cast<std::size_t>(report.turns));
      for (int t = 0; t < report.turns; ++t) {
        g.by_turn[t].turn = t;
        g.by_turn[t].per_attempt = fresh_counts();
        g.by_turn[t].cumulative = fresh_counts();
      }
      g.failures_by_turn.resize(static_cast<std::size_t>(report.turns));
    }
    return it->second;
  };
  // Successes per model × task pair at the end, for pass@k: (n, c_correct, c_fast1).
  struct PairCounts {
    int n = 0, correct = 0, fast1 = 0;
  };
  std::map<std::pair<std::string, std::string>, PairCounts> pair_counts;

  for (const auto &t : index.trajectories) {
    // A trajectory whose every turn was a failed request never heard from the model: the endpoint's
    // failure, left out of the model's rates (one with answers before a failure keeps them).
    if (std::all_of(t.turns.begin(), t.turns.end(), [](const Json *r) {
          return detail::verdict_of(*r) == nullptr && detail::object_field(*r, "response") == nullptr &&
                 (detail::object_field(*r, "request_error") != nullptr ||
                  detail::string_field(*r, "stop_reason").value_or("") == "request_failed");
        })) {
      for (auto *a :
           {&group(GroupScope::model_task, t.model, t.task_id), &group(GroupScope::model, t.model, "all"),
            &group(GroupScope::task, "all", t.task_id), &group(GroupScope::overall, "all", "all")})
        ++a->g.request_failed_trajectories;
      continue;
    }
    Accumulator *targets[] = {
        &group(GroupScope::model_task, t.model, t.task_id), &group(GroupScope::model, t.model, "all"),
        &group(GroupScope::task, "all", t.task_id), &group(GroupScope::overall, "all", "all")};
    std::map<int, const Json *> by_turn;
    for (const Json *r : t.turns) by_turn[static_cast<int>(detail::int_field(*r, "turn").value_or(0))] = r;
    AttemptFacts reached;  // carried forward: what the trajectory reached by turn t
    std::vector<bool> reached_fast(np, false);
    bool reached_fast1 = false;
    for (int turn = 0; turn < report.turns; ++turn) {
      auto it = by_turn.find(turn);
      if (it != by_turn.end()) {
        const Json &record = *it->second;
        AttemptFacts f = facts_of(record);
        reached.compiled |= f.compiled;
        reached.correct |= f.correct;
        reached.executed |= f.executed;
        for (std::size_t i = 0; i < np; ++i) reached_fast[i] = reached_fast[i] || is_fast(f, ps[i]);
        reached_fast1 = reached_fast1 || is_fast(f, 1.0);
        const std::string status = detail::status_of(record);
        long long prompt = 0, completion = 0, reasoning = 0;
        if (const Json *resp = detail::object_field(record, "response")) {
          if (const Json *u = detail::object_field(*resp, "usage")) {
            prompt = detail::int_field(*u, "prompt_tokens").value_or(0);
            completion = detail::int_field(*u, "completion_tokens").value_or(0);
            reasoning = detail::int_field(*u, "reasoning_tokens").value_or(0);
          }
        }
        const double wall = wall_seconds_of(record);
        bool gpu_measured = false;
        if (const Json *v = detail::verdict_of(record))
          if (const Json *stages = detail::object_field(*v, "stages"))
            if (const Json *c = detail::object_field(*stages, "correctness"))
              gpu_measured = detail::string_field(*c, "status").value_or("skipped") != "skipped";
        if (f.timed_ok) report.speedups.push_back({t.model, t.task_id, t.trajectory_id, turn, *f.speedup});
        for (Accumulator *a : targets) {
          GroupReport &g = a->g;
          ++g.attempts;
          g.gpu_measured_attempts += gpu_measured;
          ++g.by_turn[turn].attempts;
          add(g.by_turn[turn].per_attempt, f, ps);
          ++g.failures_by_turn[turn][status];
          g.prompt_tokens += prompt;
          g.completion_tokens += completion;
          g.reasoning_tokens += reasoning;
          g.wall_seconds += wall;
          if (f.timed_ok) {
            ++g.speedup_samples;
            a->log_speedup_sum += std::log(*f.speedup);
            g.best_speedup = std::max(g.best_speedup.value_or(0.0), *f.speedup);
          }
        }
      }
      for (Accumulator *a : targets) {
        AxisCounts &c = a->g.by_turn[turn].cumulative;
        c.compiled += reached.compiled;
        c.correct += reached.correct;
        c.executed += reached.executed;
        for (std::size_t i = 0; i < np; ++i) c.fast[i] += reached_fast[i];
      }
    }
    for (Accumulator *a : targets) {
      ++a->g.trajectories;
      a->g.successes += reached.correct;
      a->pairs.insert({t.model, t.task_id});
    }
    PairCounts &pc = pair_counts[{t.model, t.task_id}];
    ++pc.n;
    pc.correct += reached.correct;
    pc.fast1 += reached_fast1;
  }

  auto finish = [&](Accumulator &a) {
    GroupReport &g = a.g;
    if (!g.by_turn.empty()) g.end = g.by_turn.back().cumulative;
    if (g.speedup_samples) g.geomean_speedup = std::exp(a.log_speedup_sum / g.speedup_samples);
    if (g.successes) {
      g.tokens_per_success = static_cast<double>(g.prompt_tokens + g.completion_tokens) / g.successes;
      g.wall_seconds_per_success = g.wall_seconds / g.successes;
    }
    for (int k : options.pass_k) {
      double sum_correct = 0, sum_fast = 0;
      int used = 0;
      for (const auto &p : a.pairs) {
        const PairCounts &pc = pair_counts[p];
        if (k > pc.n) continue;
        sum_correct += pass_at_k(pc.n, pc.correct, k);
        sum_fast += pass_at_k(pc.n, pc.fast1, k);
        ++used;
      }
      // Only when every pair has k samples: an average over a subset would mix populations.
      if (used && used == static_cast<int>(a.pairs.size())) {
        g.pass_correct[k] = sum_correct / used;
        g.pass_fast1[k] = sum_fast / used;
      }
    }
    report.groups.push_back(g);
  };
  for (const auto &m : report.models) {
    for (const auto &t : report.tasks) {
      auto it = acc.find({GroupScope::model_task, m, t});
      if (it != acc.end()) finish(it->second);
    }
  }
  for (const auto &m : report.models) finish(acc.at({GroupScope::model, m, "all"}));
  for (const auto &t : report.tasks) finish(acc.at({GroupScope::task, "all", t}));
  finish(acc.at({GroupScope::overall, "all", "all"}));
  return report;
}

namespace {

std::string pct(int num, int den) {
  return den ? fmt::format("{:.1f}%", 100.0 * num / den) : "—";
}
/// A GPU axis (correct, executed, fast, pass@k): "not measured" when no attempt of the group ran on a GPU.
bool gpu_unmeasured(const GroupReport &g) {
  return g.attempts > 0 && g.gpu_measured_attempts == 0;
}
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

}  // namespace

std::string render_markdown(const Report &r) {
  const auto &ps = r.options.fast_thresholds;
  std::string md = "# PTXBench report\n\nRuns:\n";
  for (const auto &s : r.sources) md += "- `" + s + "`\n";
  md += fmt::format(
      "\nModels: {}. Tasks: {}. Turns: {}.\n\nRates are over trajectories: an axis counts once the "
      "trajectory "
      "reached it at any turn so far. fast_p = status ok, correct and speedup > p. Speedups are over correct "
      "attempts (library time / candidate time).\n",
      r.models.size(), r.tasks.size(), r.turns);

  if (!r.groups.empty() && r.overall().request_failed_trajectories > 0) {
    const int n = r.overall().request_failed_trajectories;
    md += fmt::format(
        "\n{} {} ended in a request failure (the endpoint's, not the model's) and {} left out of every rate "
        "below; `ptxbench resume RUN_DIR` retries them.\n",
        n, n == 1 ? "trajectory" : "trajectories", n == 1 ? "is" : "are");
  }
  if (!r.groups.empty() && gpu_unmeasured(r.overall()))
    md += "\nNo attempt ran on a GPU: correct, executed, fast_p and pass@k are not measured.\n";

  md += "\n## Summary (end of trajectory)\n\n| model | task | trajectories | compile | correct | executed |";
  for (double p : ps) md += " " + p_label(p) + " |";
  md +=
      " pass@1 | fast_1.0 pass@1 | geomean speedup | best speedup | tokens / success | wall s / success "
      "|\n|---|---|---:|---:|---:|---:|";
  for (std::size_t i = 0; i < ps.size(); ++i) md += "---:|";
  md += "---:|---:|---:|---:|---:|---:|\n";
  for (const auto &g : r.groups) {
    const bool nm = gpu_unmeasured(g);
    auto gpu_pct = [&](int num) { return nm ? std::string("not measured") : pct(num, g.trajectories); };
    md += fmt::format("| {} | {} | {} | {} | {} | {} |", g.model, g.task, g.trajectories,
                      pct(g.end.compiled, g.trajectories), gpu_pct(g.end.correct), gpu_pct(g.end.executed));
    for (std::size_t i = 0; i < ps.size(); ++i) md += " " + gpu_pct(g.end.fast[i]) + " |";
    auto pk = [nm](const std::map<int, double> &m) {
      auto it = m.find(1);
      return nm              ? std::string("not measured")
             : it == m.end() ? std::string("—")
                             : fmt::format("{:.3f}", it->second);
    };
    md += fmt::format(" {} | {} | {} | {} | {} | {} |\n", pk(g.pass_correct), pk(g.pass_fast1),
                      opt_fixed(g.geomean_speedup, 3, "x"), opt_fixed(g.best_speedup, 3, "x"),
                      opt_fixed(g.tokens_per_success, 0), opt_fixed(g.wall_seconds_per_success, 1));
  }

  md += "\n## pass@k (unbiased estimator, averaged over model × task pairs)\n\n| model | task | metric |";
  for (int k : r.options.pass_k) md += fmt::format(" k={} |", k);
  md += "\n|---|---|---|";
  for (std::size_t i = 0; i < r.options.pass_k.size(); ++i) md += "---:|";
  md += "\n";
  for (const auto &g : r.groups) {
    for (int which = 0; which < 2; ++which) {
      const auto &m = which == 0 ? g.pass_correct : g.pass_fast1;
      md += fmt::format("| {} | {} | {} |", g.model, g.task, which == 0 ? "correct" : "fast_1.0");
      for (int k : r.options.pass_k) {
        auto it = m.find(k);
        md += gpu_unmeasured(g) ? " not measured |"
              : it == m.end()   ? " — |"
                                : fmt::format(" {:.3f} |", it->second);
      }
      md += "\n";
    }
  }

  md +=
      "\n## By turn (cumulative rates over trajectories; attempts = records at that turn)\n\n| model | task "
      "| turn | attempts | compile | correct | executed |";
  for (double p : ps) md += " " + p_label(p) + " |";
  md += "\n|---|---|---:|---:|---:|---:|---:|";
  for (std::size_t i = 0; i < ps.size(); ++i) md += "---:|";
  md += "\n";
  for (const auto &g : r.groups) {
    for (const auto &row : g.by_turn) {
      const bool nm = gpu_unmeasured(g);
      auto gpu_pct = [&](int num) { return nm ? std::string("not measured") : pct(num, g.trajectories); };
      md += fmt::format("| {} | {} | {} | {} | {} | {} | {} |", g.model, g.task, row.turn, row.attempts,
                        pct(row.cumulative.compiled, g.trajectories), gpu_pct(row.cumulative.correct),
                        gpu_pct(row.cumulative.executed));
      for (std::size_t i = 0; i < ps.size(); ++i) md += " " + gpu_pct(row.cumulative.fast[i]) + " |";
      md += "\n";
    }
  }

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

  md +=
      "\n## Cost\n\n| model | task | attempts | prompt tokens | completion tokens | reasoning tokens | wall "
      "s | successes |\n|---|---|---:|---:|---:|---:|---:|---:|\n";
  for (const auto &g : r.groups) {
    md += fmt::format("| {} | {} | {} | {} | {} | {} | {:.1f} | {} |\n", g.model, g.task, g.attempts,
                      g.prompt_tokens, g.completion_tokens, g.reasoning_tokens, g.wall_seconds, g.successes);
  }
  if (!r.warnings.empty()) {
    md += "\n## Warnings\n\n";
    for (const auto &w : r.warnings) md += "- " + w + "\n";
  }
  return md;
}

std::map<std::string, std::string> render_csv(const Report &r) {
  const auto &ps = r.options.fast_thresholds;
  std::map<std::string, std::string> files;
  std::string s = "model,task,trajectories,attempts,compile_rate,correct_rate,executed_rate";
  for (double p : ps) s += "," + p_label(p) + "_rate";
  s += ",geomean_speedup,best_speedup,speedup_samples,successes,prompt_tokens,completion_tokens,reasoning_"
       "tokens,"
       "wall_seconds,tokens_per_success,wall_seconds_per_success\n";
  for (const auto &g : r.groups) {
    s += fmt::format("{},{},{},{},{},{},{}", csv_field(g.model), csv_field(g.task), g.trajectories,
                     g.attempts, rate(g.end.compiled, g.trajectories), rate(g.end.correct, g.trajectories),
                     rate(g.end.executed, g.trajectories));
    for (std::size_t i = 0; i < ps.size(); ++i) s += "," + rate(g.end.fast[i], g.trajectories);
    s += fmt::format(",{},{},{},{},{},{},{},{:.6g},{},{}\n", csv_num(g.geomean_speedup),
                     csv_num(g.best_speedup), g.speedup_samples, g.successes, g.prompt_tokens,
                     g.completion_tokens, g.reasoning_tokens, g.wall_seconds, csv_num(g.tokens_per_success),
                     csv_num(g.wall_seconds_per_success));
  }
  files["summary.csv"] = s;

  s = "model,task,turn,attempts,cum_compile_rate,cum_correct_rate,cum_executed_rate";
  for (double p : ps) s += ",cum_" + p_label(p) + "_rate";
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
      s += fmt::format(",{},{},{}", rate(row.per_attempt.compiled, row.attempts),
                       rate(row.per_attempt.correct, row.attempts),
                       rate(row.per_attempt.executed, row.attempts));
      for (std::size_t i = 0; i < ps.size(); ++i) s += "," + rate(row.per_attempt.fast[i], row.attempts);
      s += "\n";
    }
  }
  files["by_turn.csv"] = s;

  s = "model,task,metric,k,pass_at_k\n";
  for (const auto &g : r.groups) {
    for (const auto &[k, v] : g.pass_correct)
      s += fmt::format("{},{},correct,{},{:.6g}\n", csv_field(g.model), csv_field(g.task), k, v);
    for (const auto &[k, v] : g.pass_fast1)
      s += fmt::format("{},{},fast_1.0,{},{:.6g}\n", csv_field(g.model), csv_field(g.task), k, v);
  }
  files["pass_at_k.csv"] = s;

  s = "model,task,turn,status,count\n";
  for (const auto &g : r.groups) {
    for (std::size_t t = 0; t < g.failures_by_turn.size(); ++t) {
      for (const auto &[status, n] : g.failures_by_turn[t]) {
        s += fmt::format("{},{},{},{},{}\n", csv_field(g.model), csv_field(g.task), t, csv_field(status), n);
      }
    }
  }
  files["failures.csv"] = s;

  s = "model,task,trajectory_id,turn,speedup\n";
  for (const auto &p : r.speedups) {
    s += fmt::format("{},{},{},{},{:.6g}\n", csv_field(p.model), csv_field(p.task),
                     csv_field(p.trajectory_id), p.turn, p.speedup);
  }
  files["speedups.csv"] = s;
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
  std::vector<std::filesystem::path> written;
  for (const auto &[name, text] : files) {
    auto path = out_dir / name;
    auto ok = util::write_file_atomic(path, text);
    if (!ok) return util::unexpected(fmt::format("cannot write {}: {}", path.string(), ok.error()));
    written.push_back(path);
  }
  return written;
}

}  // namespace ptxbench::traces
