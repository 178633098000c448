// Report figures from the runs' typed turn records: per-turn and end-of-trajectory axis counts per group
// (model × task, model, task, overall), pass@k with bootstrap intervals, costs, and paired model
// comparisons. Rendering (Markdown, CSV, HTML) is in report.cpp.
#include <algorithm>
#include <array>
#include <cmath>
#include <set>
#include <tuple>

#include <fmt/core.h>
#include <fmt/ranges.h>

#include "traces/detail/run_view.hpp"
#include "traces/outcome.hpp"
#include "traces/repairs.hpp"
#include "traces/report.hpp"

namespace ptxbench::traces {

using detail::Json;

namespace {

/// What one attempt achieved.
struct AttemptFacts {
  bool compiled = false, correct = false, executed = false, timed_ok = false;
  std::optional<double> speedup;
};

AttemptFacts facts_of(const TurnRecord &record) {
  AttemptFacts f;
  f.compiled = compiled_of(record);
  f.correct = correct_of(record) == true;
  f.executed = targets_executed_of(record) == true;
  f.speedup = speedup_of(record);
  f.timed_ok = f.correct && f.speedup && status_of(record) == "ok";
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
  if (const auto v = record.decoded_verdict()) s += v->wall_seconds;
  return s;
}

struct Accumulator {
  GroupReport g;
  double log_speedup_sum = 0;
  std::set<std::pair<std::string, std::string>> pairs;  ///< model × task pairs in the group
  double request_seconds = 0, ttft_seconds = 0;
  int request_samples = 0;
  bool unpriced = false;                               ///< some attempt's model has no price
  std::vector<double> tensor_pct, library_tensor_pct;  ///< of the profiled final correct attempts
};

/// Median, quartiles and range of the values (type-7 quantiles); nullopt when there are none.
std::optional<Spread> spread_of(std::vector<double> values) {
  if (values.empty()) return std::nullopt;
  std::sort(values.begin(), values.end());
  Spread s;
  s.n = static_cast<int>(values.size());
  s.median = quantile_sorted(values.data(), values.size(), 0.5);
  s.p25 = quantile_sorted(values.data(), values.size(), 0.25);
  s.p75 = quantile_sorted(values.data(), values.size(), 0.75);
  s.min = values.front();
  s.max = values.back();
  return s;
}

/// Adds one trajectory's final correct attempt to a group's profile distribution.
void add_profile(Accumulator &a, const AttemptProfile &p) {
  ProfileDistribution &d = a.g.profile;
  ++d.attempts;
  if (!p.profiled) {
    ++d.not_profiled;
    d.malformed += !p.error.empty();
    return;
  }
  ++d.profiled;
  if (p.bound_unit.empty()) {
    ++d.bound_unknown;
  } else {
    auto &unit = d.bound_units[p.bound_unit];
    unit.label = p.bound_label;
    ++unit.attempts;
    if (p.bound_value) unit.values.push_back(*p.bound_value);
  }
  if (p.tensor_pct) {
    a.tensor_pct.push_back(*p.tensor_pct);
    if (p.library_tensor_pct) a.library_tensor_pct.push_back(*p.library_tensor_pct);
  } else {
    ++d.tensor_pipe_missing;
  }
}

/// What one trajectory reached, for the bootstrap (which resamples whole trajectories).
struct TrajectoryFacts {
  int sample = 0;
  bool correct = false, fast1 = false;
  bool gpu_measured = false;  ///< some attempt's GPU stages ran (else correct/fast1 were never measured)
  std::optional<bool> generalizes;   ///< its last attempt with the hidden workloads checked
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

using Pairs = std::vector<std::pair<const TrajectoryFacts *, const TrajectoryFacts *>>;

/// (pass1 A, pass1 B, fast1 A, fast1 B) of a set of tasks' pairs; each task weighs the same.
std::array<double, 4> paired_rates(const std::vector<const Pairs *> &ts) {
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
}

int count_correct(const std::vector<TrajectoryFacts> &v) {
  return static_cast<int>(std::count_if(v.begin(), v.end(), [](const auto &f) { return f.correct; }));
}
int count_fast1(const std::vector<TrajectoryFacts> &v) {
  return static_cast<int>(std::count_if(v.begin(), v.end(), [](const auto &f) { return f.fast1; }));
}

/// Every turn of the trajectory was a failed request: the endpoint's failure, not the model's.
bool only_request_failures(const detail::TrajectoryView &t) {
  return std::all_of(t.turns.begin(), t.turns.end(), [](const TurnRecord *r) {
    return r->verdict_object() == nullptr && !r->response &&
           (r->request_error || r->stop_reason == "request_failed");
  });
}

/// The figures of one attempt that groups add up.
struct AttemptCosts {
  std::string status;
  long long prompt = 0, completion = 0, reasoning = 0;
  double wall = 0;
  bool gpu_measured = false;
  bool borderline = false;  ///< the correctness stage flagged a workload near the tolerance
  std::optional<double> request_s, ttft_s;
};

AttemptCosts costs_of(const TurnRecord &record) {
  AttemptCosts c;
  const TurnOutcome outcome = outcome_of(record);
  c.status = outcome.status;
  if (const auto &resp = record.response) {
    c.prompt = resp->usage.prompt_tokens.value_or(0);
    c.completion = resp->usage.completion_tokens.value_or(0);
    c.reasoning = resp->usage.reasoning_tokens.value_or(0);
  }
  c.wall = wall_seconds_of(record);
  if (const auto v = record.decoded_verdict()) c.gpu_measured = v->correctness.status != protocol::Status::skipped;
  c.borderline = outcome.borderline == true;
  if (const auto &tm = record.timings) {
    c.request_s = tm->request_s;
    c.ttft_s = tm->ttft_s;
  }
  return c;
}

class ReportBuilder {
 public:
  ReportBuilder(const std::vector<LoadedRun> &runs, const ReportOptions &options)
      : runs_(runs), options_(options), index_(detail::index_runs(runs)) {}

  util::Expected<Report> build() {
    if (index_.usable_records == 0) return util::unexpected(detail::no_usable_records_message(runs_, index_));
    if (auto ok = start(); !ok) return util::unexpected(ok.error());
    for (const auto &t : index_.trajectories) add_trajectory(t);
    for (const auto &m : report_.models) {
      for (const auto &t : report_.tasks) {
        auto it = acc_.find({GroupScope::model_task, m, t});
        if (it != acc_.end()) finish(it->second);
      }
    }
    for (const auto &m : report_.models) finish(acc_.at({GroupScope::model, m, "all"}));
    for (const auto &t : report_.tasks) finish(acc_.at({GroupScope::task, "all", t}));
    finish(acc_.at({GroupScope::overall, "all", "all"}));
    // Paired model differences on their common tasks.
    std::vector<std::pair<std::string, std::string>> compare = options_.compare;
    if (compare.empty()) {
      for (std::size_t i = 0; i < report_.models.size(); ++i)
        for (std::size_t j = i + 1; j < report_.models.size(); ++j)
          compare.emplace_back(report_.models[i], report_.models[j]);
    }
    for (const auto &[ma, mb] : compare) add_comparison(ma, mb);
    report_.pages = build_trajectory_pages(runs_, report_.prices);
    if (has_repairs(runs_)) report_.repairs = summarize_repairs(runs_, report_.prices);
    return std::move(report_);
  }

 private:
  // Successes per model × task pair at the end, for pass@k.
  struct PairCounts {
    int n = 0, correct = 0, fast1 = 0;
  };

  util::Expected<void> start() {
    report_.options = options_;
    report_.warnings = index_.warnings;
    report_.skipped_partial_lines = index_.skipped_partial_lines;
    for (const auto &r : runs_) report_.sources.push_back(r.dir.string());
    std::set<std::string> models, tasks;
    for (const auto &t : index_.trajectories) {
      models.insert(t.model);
      tasks.insert(t.task_id);
      report_.turns = std::max(report_.turns, t.turns.back()->turn + 1);
    }
    report_.models.assign(models.begin(), models.end());
    report_.tasks.assign(tasks.begin(), tasks.end());
    for (const auto &[a, b] : options_.compare) {
      for (const auto *m : {&a, &b}) {
        if (!models.count(*m))
          return util::unexpected(fmt::format("--compare: no model named '{}' in the runs (models: {})", *m,
                                              fmt::format("{}", fmt::join(report_.models, ", "))));
      }
    }
    report_.prices = prices_of_runs(runs_);
    for (const auto &[name, price] : options_.prices) report_.prices[name] = price;
    return {};
  }

  AxisCounts fresh_counts() const {
    AxisCounts c;
    c.fast.assign(options_.fast_thresholds.size(), 0);
    return c;
  }

  Accumulator &group(GroupScope scope, const std::string &model, const std::string &task) {
    auto [it, inserted] = acc_.try_emplace({scope, model, task});
    if (inserted) {
      GroupReport &g = it->second.g;
      g.scope = scope;
      g.model = model;
      g.task = task;
      g.end = fresh_counts();
      g.by_turn.resize(static_cast<std::size_t>(report_.turns));
      for (int t = 0; t < report_.turns; ++t) {
        g.by_turn[t].turn = t;
        g.by_turn[t].per_attempt = fresh_counts();
        g.by_turn[t].cumulative = fresh_counts();
      }
      g.failures_by_turn.resize(static_cast<std::size_t>(report_.turns));
    }
    return it->second;
  }

  void add_trajectory(const detail::TrajectoryView &t) {
    const std::array<Accumulator *, 4> targets = {
        &group(GroupScope::model_task, t.model, t.task_id), &group(GroupScope::model, t.model, "all"),
        &group(GroupScope::task, "all", t.task_id), &group(GroupScope::overall, "all", "all")};
    // A trajectory whose every turn was a failed request never heard from the model: the endpoint's
    // failure, left out of the model's rates (one with answers before a failure keeps them).
    if (only_request_failures(t)) {
      for (auto *a : targets) ++a->g.request_failed_trajectories;
      return;
    }
    const auto &ps = options_.fast_thresholds;
    std::map<int, const TurnRecord *> by_turn;
    for (const TurnRecord *r : t.turns) by_turn[r->turn] = r;
    AttemptFacts reached;             // carried forward: what the trajectory reached by turn t
    std::optional<bool> generalizes;  // the last checked attempt's
    std::vector<bool> reached_fast(ps.size(), false);
    bool reached_fast1 = false;
    TrajectoryFacts facts;
    facts.sample = t.sample;
    const TurnRecord *last_correct = nullptr;  // the final correct attempt, whose profile is counted
    for (int turn = 0; turn < report_.turns; ++turn) {
      if (auto it = by_turn.find(turn); it != by_turn.end()) {
        const AttemptFacts f = facts_of(*it->second);
        if (f.correct) last_correct = it->second;
        if (const auto g = generalizes_of(*it->second)) generalizes = g;
        reached.compiled |= f.compiled;
        reached.correct |= f.correct;
        reached.executed |= f.executed;
        for (std::size_t i = 0; i < ps.size(); ++i) reached_fast[i] = reached_fast[i] || is_fast(f, ps[i]);
        reached_fast1 = reached_fast1 || is_fast(f, 1.0);
        if (f.timed_ok) {
          report_.speedups.push_back(
              {t.model, t.task_id, t.trajectory_id, turn, *f.speedup, attempt_profile_of(*it->second)});
          facts.log_speedups.push_back(std::log(*f.speedup));
        }
        const AttemptCosts costs = costs_of(*it->second);
        facts.gpu_measured = facts.gpu_measured || costs.gpu_measured;
        add_attempt(targets, t.model, turn, f, costs);
      }
      for (Accumulator *a : targets) {
        AxisCounts &c = a->g.by_turn[turn].cumulative;
        c.compiled += reached.compiled;
        c.correct += reached.correct;
        c.executed += reached.executed;
        for (std::size_t i = 0; i < ps.size(); ++i) c.fast[i] += reached_fast[i];
      }
    }
    if (last_correct) {
      const AttemptProfile p = attempt_profile_of(*last_correct);
      if (!p.error.empty())
        report_.warnings.push_back(
            fmt::format("{} turn {}: profile record not read ({}); counted as not profiled", t.trajectory_id,
                        last_correct->turn, p.error));
      for (Accumulator *a : targets) add_profile(*a, p);
      report_.profiled_attempts.push_back({t.model, t.task_id, t.trajectory_id, last_correct->turn, p});
    }
    for (Accumulator *a : targets) {
      ++a->g.trajectories;
      a->g.successes += reached.correct;
      a->g.generalization_checked += generalizes.has_value();
      a->g.generalizing += generalizes == true;
      a->pairs.insert({t.model, t.task_id});
    }
    PairCounts &pc = pair_counts_[{t.model, t.task_id}];
    ++pc.n;
    pc.correct += reached.correct;
    pc.fast1 += reached_fast1;
    facts.correct = reached.correct;
    facts.fast1 = reached_fast1;
    facts.generalizes = generalizes;
    pair_facts_[{t.model, t.task_id}].push_back(std::move(facts));
  }

  void add_attempt(const std::array<Accumulator *, 4> &targets, const std::string &model, int turn,
                   const AttemptFacts &f, const AttemptCosts &c) {
    const auto price = report_.prices.find(model);
    for (Accumulator *a : targets) {
      GroupReport &g = a->g;
      ++g.attempts;
      g.gpu_measured_attempts += c.gpu_measured;
      g.borderline_attempts += c.borderline;
      g.borderline_incorrect += c.borderline && c.status == "incorrect";
      ++g.by_turn[turn].attempts;
      add(g.by_turn[turn].per_attempt, f, options_.fast_thresholds);
      ++g.failures_by_turn[turn][c.status];
      g.prompt_tokens += c.prompt;
      g.completion_tokens += c.completion;
      g.reasoning_tokens += c.reasoning;
      g.wall_seconds += c.wall;
      if (price != report_.prices.end())
        g.cost_usd = g.cost_usd.value_or(0.0) + cost_usd(price->second, c.prompt, c.completion);
      else
        a->unpriced = true;
      if (c.request_s) {
        a->request_seconds += *c.request_s;
        ++a->request_samples;
      }
      if (c.ttft_s) {
        a->ttft_seconds += *c.ttft_s;
        ++g.ttft_samples;
      }
      if (f.timed_ok) {
        ++g.speedup_samples;
        a->log_speedup_sum += std::log(*f.speedup);
        g.best_speedup = std::max(g.best_speedup.value_or(0.0), *f.speedup);
      }
    }
  }

  void finish(Accumulator &a) {
    GroupReport &g = a.g;
    if (!g.by_turn.empty()) g.end = g.by_turn.back().cumulative;
    if (g.speedup_samples) g.geomean_speedup = std::exp(a.log_speedup_sum / g.speedup_samples);
    if (g.successes) {
      g.tokens_per_success = static_cast<double>(g.prompt_tokens + g.completion_tokens) / g.successes;
      g.wall_seconds_per_success = g.wall_seconds / g.successes;
    }
    finish_pass_at_k(a);
    finish_intervals(a);
    if (a.unpriced) g.cost_usd.reset();
    if (g.cost_usd) {
      if (g.attempts) g.cost_per_attempt = *g.cost_usd / g.attempts;
      if (g.trajectories) g.cost_per_trajectory = *g.cost_usd / g.trajectories;
      if (g.successes) g.cost_per_success = *g.cost_usd / g.successes;
    }
    if (a.request_samples) g.mean_request_seconds = a.request_seconds / a.request_samples;
    if (g.ttft_samples) g.mean_ttft_seconds = a.ttft_seconds / g.ttft_samples;
    g.profile.tensor_pipe = spread_of(a.tensor_pct);
    g.profile.library_tensor_pipe = spread_of(a.library_tensor_pct);
    report_.groups.push_back(g);
  }

  void finish_pass_at_k(Accumulator &a) {
    GroupReport &g = a.g;
    for (int k : options_.pass_k) {
      double sum_correct = 0, sum_fast = 0;
      int used = 0;
      for (const auto &p : a.pairs) {
        const PairCounts &pc = pair_counts_[p];
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
  }

  void finish_intervals(Accumulator &a) {
    GroupReport &g = a.g;
    const BootstrapSettings &boot = options_.bootstrap;
    // Bootstrap over trajectories, resampled within each model × task pair (the pairs are the strata:
    // a group's pass@k weighs each pair the same, so each must keep its size).
    std::vector<const std::vector<TrajectoryFacts> *> strata;
    for (const auto &p : a.pairs) strata.push_back(&pair_facts_.at(p));
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
    if (!g.geomean_speedup) return;
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

  /// Per common task: trajectories paired by sample index (the i-th of A's with the i-th of B's).
  std::vector<std::pair<std::string, Pairs>> paired_tasks(const std::string &ma,
                                                          const std::string &mb) const {
    std::vector<std::pair<std::string, Pairs>> tasks_paired;
    for (const auto &task : report_.tasks) {
      auto ia = pair_facts_.find({ma, task}), ib = pair_facts_.find({mb, task});
      if (ia == pair_facts_.end() || ib == pair_facts_.end()) continue;
      std::vector<const TrajectoryFacts *> va, vb;
      for (const auto &f : ia->second) va.push_back(&f);
      for (const auto &f : ib->second) vb.push_back(&f);
      auto by_sample = [](const TrajectoryFacts *x, const TrajectoryFacts *y) {
        return x->sample < y->sample;
      };
      std::stable_sort(va.begin(), va.end(), by_sample);
      std::stable_sort(vb.begin(), vb.end(), by_sample);
      Pairs paired;
      for (std::size_t i = 0; i < std::min(va.size(), vb.size()); ++i) paired.emplace_back(va[i], vb[i]);
      if (!paired.empty()) tasks_paired.emplace_back(task, std::move(paired));
    }
    return tasks_paired;
  }

  ComparisonRow comparison_row(const std::string &ma, const std::string &mb, const std::string &name,
                               const std::vector<const Pairs *> &ts) const {
    ComparisonRow row;
    row.task = name;
    for (const Pairs *tp : ts) row.pairs += static_cast<int>(tp->size());
    const auto r = paired_rates(ts);
    row.pass1_a = r[0];
    row.pass1_b = r[1];
    row.pass1_diff = r[0] - r[1];
    row.fast1_a = r[2];
    row.fast1_b = r[3];
    row.fast1_diff = r[2] - r[3];
    for (const Pairs *tp : ts)
      for (const auto &[a, b] : *tp) {
        row.gen_checked_a += a->generalizes.has_value();
        row.gen_a += a->generalizes == true;
        row.gen_checked_b += b->generalizes.has_value();
        row.gen_b += b->generalizes == true;
        row.measured_a += a->gpu_measured;
        row.measured_b += b->gpu_measured;
      }
    for (int which = 0; which < 2; ++which) {
      auto ci = percentile_bootstrap(
          options_.bootstrap, fmt::format("compare/{}/{}/{}/{}", ma, mb, name, which ? "fast1" : "pass1"),
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
            const auto rr = paired_rates(view);
            return std::optional<double>(which ? rr[2] - rr[3] : rr[0] - rr[1]);
          });
      (which ? row.fast1_diff_ci : row.pass1_diff_ci) = ci;
    }
    return row;
  }

  void add_comparison(const std::string &ma, const std::string &mb) {
    const auto tasks_paired = paired_tasks(ma, mb);
    if (tasks_paired.empty()) return;
    Comparison cmp{ma, mb, {}};
    std::vector<const Pairs *> all;
    for (const auto &[task, tp] : tasks_paired) {
      cmp.rows.push_back(comparison_row(ma, mb, task, {&tp}));
      all.push_back(&tp);
    }
    cmp.rows.push_back(comparison_row(ma, mb, "all", all));
    report_.comparisons.push_back(std::move(cmp));
  }

  const std::vector<LoadedRun> &runs_;
  const ReportOptions &options_;
  detail::RunIndex index_;
  Report report_;
  std::map<std::tuple<GroupScope, std::string, std::string>, Accumulator> acc_;
  std::map<PairKey, PairCounts> pair_counts_;
  std::map<PairKey, std::vector<TrajectoryFacts>> pair_facts_;
};

}  // namespace

util::Expected<Report> build_report(const std::vector<LoadedRun> &runs, const ReportOptions &options) {
  return ReportBuilder(runs, options).build();
}

}  // namespace ptxbench::traces
