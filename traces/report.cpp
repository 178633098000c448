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

AttemptFacts facts_of(const TurnRecord &record) {
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

double wall_seconds_of(const TurnRecord &record) {
  if (const auto &t = record.timings) {
    double s = t->request_s.value_or(0) + t->cpu_stages_s.value_or(0) + t->gpu_stage_s.value_or(0);
    if (s > 0) return s;
  }
  double s = 0;
  if (record.response) s += record.response->latency_seconds;
  if (const Json *v = detail::verdict_of(record)) s += detail::number_field(*v, "wall_seconds").value_or(0);
  return s;
}

struct Accumulator {
  GroupReport g;
  double log_speedup_sum = 0;
  std::set<std::pair<std::string, std::string>> pairs;  ///< model × task pairs in the group
  double request_seconds = 0, ttft_seconds = 0;
  int request_samples = 0;
  bool unpriced = false;  ///< some attempt's model has no price
};

/// What one trajectory reached, for the bootstrap (which resamples whole trajectories).
struct TrajectoryFacts {
  int sample = 0;
  bool correct = false, fast1 = false;
  std::vector<double> log_speedups;  ///< of its attempts counted in a geomean
};
using PairKey = std::pair<std::string, std::string>;  ///< model, task

/// pass@k of a group from per-pair counts (n, c): the mean over pairs, or nullopt when a pair has
/// fewer than k samples.
template <typename CountOf>
std::optional<double> mean_pass_at_k(const std::vector<std::vector<TrajectoryFacts>> &pairs, int k,
                                     CountOf count_of) {
  double sum = 0;
  for (const auto &trajectories : pairs) {
    const int n = static_cast<int>(trajectories.size());
    if (k > n) return std::nullopt;
    sum += pass_at_k(n, count_of(trajectories), k);
  }
  return pairs.empty() ? std::nullopt : std::optional<double>(sum / static_cast<double>(pairs.size()));
}

/// One bootstrap replicate of a group: each pair's trajectories resampled with replacement.
std::vector<std::vector<TrajectoryFacts>> resample_pairs(
    const std::vector<const std::vector<TrajectoryFacts> *> &pairs, Resampler &rng) {
  std::vector<std::vector<TrajectoryFacts>> out;
  out.reserve(pairs.size());
  for (const auto *trajectories : pairs) {
    std::vector<TrajectoryFacts> drawn;
    drawn.reserve(trajectories->size());
    for (std::size_t i = 0; i < trajectories->size(); ++i)
      drawn.push_back((*trajectories)[rng.index(trajectories->size())]);
    out.push_back(std::move(drawn));
  }
  return out;
}

std::string scope_name(GroupScope s) {
  switch (s) {
    case GroupScope::model_task:
      return "model_task";
    case GroupScope::model:
      return "model";
    case GroupScope::task:
      return "task";
    case GroupScope::overall:
      return "overall";
  }
  return "?";
}

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
    report.turns = std::max(report.turns, t.turns.back()->turn + 1);
  }
  report.models.assign(models.begin(), models.end());
  report.tasks.assign(tasks.begin(), tasks.end());
  for (const auto &[a, b] : options.compare) {
    for (const auto *m : {&a, &b}) {
      if (!models.count(*m))
        return util::unexpected(fmt::format("--compare: no model named '{}' in the runs (models: {})", *m,
                                            fmt::format("{}", fmt::join(report.models, ", "))));
    }
  }
  report.prices = prices_of_runs(runs);
  for (const auto &[name, price] : options.prices) report.prices[name] = price;
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
  std::map<PairKey, std::vector<TrajectoryFacts>> pair_facts;

  for (const auto &t : index.trajectories) {
    // A trajectory whose every turn was a failed request never heard from the model: the endpoint's
    // failure, left out of the model's rates (one with answers before a failure keeps them).
    if (std::all_of(t.turns.begin(), t.turns.end(), [](const TurnRecord *r) {
          return detail::verdict_of(*r) == nullptr && !r->response &&
                 (r->request_error || r->stop_reason == "request_failed");
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
    std::map<int, const TurnRecord *> by_turn;
    for (const TurnRecord *r : t.turns) by_turn[r->turn] = r;
    AttemptFacts reached;  // carried forward: what the trajectory reached by turn t
    std::vector<bool> reached_fast(np, false);
    bool reached_fast1 = false;
    TrajectoryFacts facts;
    facts.sample = t.sample;
    const auto price = report.prices.find(t.model);
    for (int turn = 0; turn < report.turns; ++turn) {
      auto it = by_turn.find(turn);
      if (it != by_turn.end()) {
        const TurnRecord &record = *it->second;
        AttemptFacts f = facts_of(record);
        reached.compiled |= f.compiled;
        reached.correct |= f.correct;
        reached.executed |= f.executed;
        for (std::size_t i = 0; i < np; ++i) reached_fast[i] = reached_fast[i] || is_fast(f, ps[i]);
        reached_fast1 = reached_fast1 || is_fast(f, 1.0);
        const std::string status = detail::status_of(record);
        long long prompt = 0, completion = 0, reasoning = 0;
        if (const auto &resp = record.response) {
          prompt = resp->usage.prompt_tokens.value_or(0);
          completion = resp->usage.completion_tokens.value_or(0);
          reasoning = resp->usage.reasoning_tokens.value_or(0);
        }
        const double wall = wall_seconds_of(record);
        bool gpu_measured = false;
        if (const Json *v = detail::verdict_of(record))
          if (const Json *stages = detail::object_field(*v, "stages"))
            if (const Json *c = detail::object_field(*stages, "correctness"))
              gpu_measured = detail::string_field(*c, "status").value_or("skipped") != "skipped";
        if (f.timed_ok) {
          report.speedups.push_back({t.model, t.task_id, t.trajectory_id, turn, *f.speedup});
          facts.log_speedups.push_back(std::log(*f.speedup));
        }
        std::optional<double> request_s, ttft_s;
        if (const auto &tm = record.timings) {
          request_s = tm->request_s;
          ttft_s = tm->ttft_s;
        }
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
          if (price != report.prices.end())
            g.cost_usd = g.cost_usd.value_or(0.0) + cost_usd(price->second, prompt, completion);
          else
            a->unpriced = true;
          if (request_s) {
            a->request_seconds += *request_s;
            ++a->request_samples;
          }
          if (ttft_s) {
            a->ttft_seconds += *ttft_s;
            ++g.ttft_samples;
          }
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
    facts.correct = reached.correct;
    facts.fast1 = reached_fast1;
    pair_facts[{t.model, t.task_id}].push_back(std::move(facts));
  }
  const BootstrapSettings &boot = options.bootstrap;
  auto count_correct = [](const std::vector<TrajectoryFacts> &v) {
    return static_cast<int>(std::count_if(v.begin(), v.end(), [](const auto &f) { return f.correct; }));
  };
  auto count_fast1 = [](const std::vector<TrajectoryFacts> &v) {
    return static_cast<int>(std::count_if(v.begin(), v.end(), [](const auto &f) { return f.fast1; }));
  };

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
    // Bootstrap over trajectories, resampled within each model × task pair (the pairs are the strata:
    // a group's pass@k weighs each pair the same, so each must keep its size).
    std::vector<const std::vector<TrajectoryFacts> *> strata;
    for (const auto &p : a.pairs) strata.push_back(&pair_facts.at(p));
    const std::string stream = scope_name(g.scope) + "/" + g.model + "/" + g.task;
    for (const auto &[k, value] : g.pass_correct) {
      (void)value;
      const int kk = k;
      if (auto ci = percentile_bootstrap(boot, stream + "/pass_correct@" + std::to_string(k),
                                         [&](Resampler &rng) -> std::optional<double> {
                                           return mean_pass_at_k(resample_pairs(strata, rng), kk,
                                                                 count_correct);
                                         }))
        g.pass_correct_ci[k] = *ci;
      if (auto ci = percentile_bootstrap(boot, stream + "/pass_fast1@" + std::to_string(k),
                                         [&](Resampler &rng) -> std::optional<double> {
                                           return mean_pass_at_k(resample_pairs(strata, rng), kk,
                                                                 count_fast1);
                                         }))
        g.pass_fast1_ci[k] = *ci;
    }
    if (g.geomean_speedup) {
      g.geomean_speedup_ci = percentile_bootstrap(boot, stream + "/geomean", [&](Resampler &rng) {
        double sum = 0;
        int n = 0;
        for (const auto *trajectories : strata) {
          for (std::size_t i = 0; i < trajectories->size(); ++i) {
            for (double l : (*trajectories)[rng.index(trajectories->size())].log_speedups) {
              sum += l;
              ++n;
            }
          }
        }
        return n ? std::optional<double>(std::exp(sum / n)) : std::nullopt;
      });
    }
    if (a.unpriced) g.cost_usd.reset();
    if (g.cost_usd) {
      if (g.attempts) g.cost_per_attempt = *g.cost_usd / g.attempts;
      if (g.trajectories) g.cost_per_trajectory = *g.cost_usd / g.trajectories;
      if (g.successes) g.cost_per_success = *g.cost_usd / g.successes;
    }
    if (a.request_samples) g.mean_request_seconds = a.request_seconds / a.request_samples;
    if (g.ttft_samples) g.mean_ttft_seconds = a.ttft_seconds / g.ttft_samples;
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

  // Paired model differences on their common tasks.
  std::vector<std::pair<std::string, std::string>> compare = options.compare;
  if (compare.empty()) {
    for (std::size_t i = 0; i < report.models.size(); ++i)
      for (std::size_t j = i + 1; j < report.models.size(); ++j)
        compare.emplace_back(report.models[i], report.models[j]);
  }
  for (const auto &[ma, mb] : compare) {
    Comparison cmp{ma, mb, {}};
    // Per common task: trajectories paired by sample index (the i-th of A's with the i-th of B's).
    std::vector<
        std::pair<std::string, std::vector<std::pair<const TrajectoryFacts *, const TrajectoryFacts *>>>>
        tasks_paired;
    for (const auto &task : report.tasks) {
      auto ia = pair_facts.find({ma, task}), ib = pair_facts.find({mb, task});
      if (ia == pair_facts.end() || ib == pair_facts.end()) continue;
      std::vector<const TrajectoryFacts *> va, vb;
      for (const auto &f : ia->second) va.push_back(&f);
      for (const auto &f : ib->second) vb.push_back(&f);
      auto by_sample = [](const TrajectoryFacts *x, const TrajectoryFacts *y) {
        return x->sample < y->sample;
      };
      std::stable_sort(va.begin(), va.end(), by_sample);
      std::stable_sort(vb.begin(), vb.end(), by_sample);
      std::vector<std::pair<const TrajectoryFacts *, const TrajectoryFacts *>> paired;
      for (std::size_t i = 0; i < std::min(va.size(), vb.size()); ++i) paired.emplace_back(va[i], vb[i]);
      if (!paired.empty()) tasks_paired.emplace_back(task, std::move(paired));
    }
    if (tasks_paired.empty()) continue;
    // (pass1 A, pass1 B, fast1 A, fast1 B) of a set of tasks' pairs; each task weighs the same.
    using Pairs = std::vector<std::pair<const TrajectoryFacts *, const TrajectoryFacts *>>;
    auto rates = [](const std::vector<const Pairs *> &ts) {
      std::array<double, 4> r{0, 0, 0, 0};
      for (const Pairs *tp : ts) {
        std::array<double, 4> t{0, 0, 0, 0};
        for (const auto &[x, y] : *tp) {
          t[0] += x->correct;
          t[1] += y->correct;
          t[2] += x->fast1;
          t[3] += y->fast1;
        }
        for (int i = 0; i < 4; ++i) r[i] += t[i] / static_cast<double>(tp->size());
      }
      for (double &v : r) v /= static_cast<double>(ts.size());
      return r;
    };
    auto row_for = [&](const std::string &name, const std::vector<const Pairs *> &ts) {
      ComparisonRow row;
      row.task = name;
      for (const Pairs *tp : ts) row.pairs += static_cast<int>(tp->size());
      const auto r = rates(ts);
      row.pass1_a = r[0];
      row.pass1_b = r[1];
      row.pass1_diff = r[0] - r[1];
      row.fast1_a = r[2];
      row.fast1_b = r[3];
      row.fast1_diff = r[2] - r[3];
      for (int which = 0; which < 2; ++which) {
        auto ci = percentile_bootstrap(
            boot, fmt::format("compare/{}/{}/{}/{}", ma, mb, name, which ? "fast1" : "pass1"),
            [&](Resampler &rng) {
              std::vector<Pairs> drawn;
              drawn.reserve(ts.size());
              for (const Pairs *tp : ts) {
                Pairs d;
                d.reserve(tp->size());
                for (std::size_t i = 0; i < tp->size(); ++i) d.push_back((*tp)[rng.index(tp->size())]);
                drawn.push_back(std::move(d));
              }
              std::vector<const Pairs *> view;
              for (const auto &d : drawn) view.push_back(&d);
              const auto rr = rates(view);
              return std::optional<double>(which ? rr[2] - rr[3] : rr[0] - rr[1]);
            });
        (which ? row.fast1_diff_ci : row.pass1_diff_ci) = ci;
      }
      return row;
    };
    std::vector<const Pairs *> all;
    for (const auto &[task, tp] : tasks_paired) {
      cmp.rows.push_back(row_for(task, {&tp}));
      all.push_back(&tp);
    }
    cmp.rows.push_back(row_for("all", all));
    report.comparisons.push_back(std::move(cmp));
  }
  report.pages = build_trajectory_pages(runs, report.prices);
  if (has_repairs(runs)) report.repairs = summarize_repairs(runs, report.prices);
  return report;
}

namespace {

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
std::string usd(const std::optional<double> &v) {
  return v ? fmt::format("${:.4f}", *v) : "—";
}
/// CSV fields "rate,lo,hi" of a Wilson interval (empty when there are no trials).
std::string rate_lo_hi(int num, int den) {
  auto ci = wilson_interval(num, den);
  return ci ? fmt::format("{},{:.6g},{:.6g}", rate(num, den), ci->lo, ci->hi) : ",,";
}
std::string ci_lo_hi(const std::optional<Interval> &ci) {
  return ci ? fmt::format("{:.6g},{:.6g}", ci->lo, ci->hi) : ",";
}

}  // namespace

std::string render_markdown(const Report &r) {
  const auto &ps = r.options.fast_thresholds;
  const auto &boot = r.options.bootstrap;
  std::string md = "# PTXBench report\n\nRuns:\n";
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

  md += "\n## Summary (end of trajectory)\n\n| model | task | trajectories | compile | correct | executed |";
  for (double p : ps) md += " " + p_label(p) + " |";
  md +=
      " pass@1 | fast_1.0 pass@1 | geomean speedup | best speedup | tokens / success | cost / success "
      "|\n|---|---|---:|---:|---:|---:|";
  for (std::size_t i = 0; i < ps.size(); ++i) md += "---:|";
  md += "---:|---:|---:|---:|---:|---:|\n";
  for (const auto &g : r.groups) {
    const bool nm = gpu_unmeasured(g);
    auto gpu_pct = [&](int num) { return nm ? std::string("not measured") : pct_ci(num, g.trajectories); };
    md +=
        fmt::format("| {} | {} | {} | {} | {} | {} |", g.model, g.task, g.trajectories,
                    pct_ci(g.end.compiled, g.trajectories), gpu_pct(g.end.correct), gpu_pct(g.end.executed));
    for (std::size_t i = 0; i < ps.size(); ++i) md += " " + gpu_pct(g.end.fast[i]) + " |";
    md += fmt::format(" {} | {} | {} | {} | {} | {} |\n",
                      nm ? std::string("not measured") : pass_ci(g.pass_correct, g.pass_correct_ci, 1),
                      nm ? std::string("not measured") : pass_ci(g.pass_fast1, g.pass_fast1_ci, 1),
                      speedup_ci(g.geomean_speedup, g.geomean_speedup_ci), opt_fixed(g.best_speedup, 3, "x"),
                      opt_fixed(g.tokens_per_success, 0), usd(g.cost_per_success));
  }

  if (!r.comparisons.empty()) {
    md +=
        "\n## Model comparison (A − B, paired bootstrap 95% interval; * = the interval excludes 0)\n\n| A | "
        "B | "
        "task | pairs | pass@1 A | pass@1 B | pass@1 A−B | fast_1.0 A | fast_1.0 B | fast_1.0 A−B "
        "|\n|---|---|---|---:|---:|---:|---:|---:|---:|---:|\n";
    for (const auto &c : r.comparisons) {
      for (const auto &row : c.rows) {
        md += fmt::format("| {} | {} | {} | {} | {:.3f} | {:.3f} | {} | {:.3f} | {:.3f} | {} |\n", c.model_a,
                          c.model_b, row.task, row.pairs, row.pass1_a, row.pass1_b,
                          diff_ci(row.pass1_diff, row.pass1_diff_ci), row.fast1_a, row.fast1_b,
                          diff_ci(row.fast1_diff, row.fast1_diff_ci));
      }
    }
  }

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
  if (r.repairs) md += render_repairs_markdown(*r.repairs, "##");
  md += fmt::format(
      "\n## Trajectories\n\nEvery trajectory has a page under `trajectories/` ({} pages), linked from "
      "report.html; `ptxbench show RUN_DIR --model M --task T --sample S` prints the same in a terminal.\n",
      r.pages.size());
  if (!r.warnings.empty()) {
    md += "\n## Warnings\n\n";
    for (const auto &w : r.warnings) md += "- " + w + "\n";
  }
  return md;
}

std::map<std::string, std::string> render_csv(const Report &r) {
  const auto &ps = r.options.fast_thresholds;
  std::map<std::string, std::string> files;
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
       "seconds,mean_ttft_seconds\n";
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
  }
  files["summary.csv"] = s;

  s = "model,task,turn,attempts,cum_compile_rate,cum_correct_rate,cum_executed_rate";
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

  s = "model,task,metric,k,pass_at_k,lo,hi\n";
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

  if (!r.comparisons.empty()) {
    s = "model_a,model_b,task,pairs,pass1_a,pass1_b,pass1_diff,pass1_diff_lo,pass1_diff_hi,fast1_a,fast1_b,"
        "fast1_diff,fast1_diff_lo,fast1_diff_hi\n";
    for (const auto &c : r.comparisons) {
      for (const auto &row : c.rows) {
        s += fmt::format("{},{},{},{},{:.6g},{:.6g},{:.6g},{},{:.6g},{:.6g},{:.6g},{}\n",
                         csv_field(c.model_a), csv_field(c.model_b), csv_field(row.task), row.pairs,
                         row.pass1_a, row.pass1_b, row.pass1_diff, ci_lo_hi(row.pass1_diff_ci), row.fast1_a,
                         row.fast1_b, row.fast1_diff, ci_lo_hi(row.fast1_diff_ci));
      }
    }
    files["comparison.csv"] = s;
  }
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
