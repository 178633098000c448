// Reports over hand-written fixture runs (tests/data/runs/make_fixtures.py holds the outcome table;
// every expected number below is worked out by hand from that table, as the comments show).
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>

#include <fmt/core.h>

#include "traces/detail/html_report.hpp"
#include "traces/record.hpp"
#include "traces/report.hpp"
#include "traces/stats.hpp"
#include "traces/trajectory_view.hpp"
#include "util/files.hpp"

using namespace ptxbench::traces;

namespace {

const std::filesystem::path kRuns = std::filesystem::path(PTXBENCH_TEST_DATA) / "runs";

Report load_report(const std::vector<std::string> &names) {
  std::vector<LoadedRun> runs;
  for (const auto &n : names) {
    auto run = load_run(kRuns / n);
    REQUIRE_MESSAGE(run.has_value(), (run ? "" : run.error()));
    runs.push_back(std::move(*run));
  }
  auto report = build_report(runs);
  REQUIRE_MESSAGE(report.has_value(), (report ? "" : report.error()));
  return std::move(*report);
}

// "all" as model or task selects the pooled group (the fixtures have no model or task named "all").
const GroupReport &group(const Report &r, const std::string &model, const std::string &task) {
  const GroupReport *g = model == "all" && task == "all" ? &r.overall()
                         : model == "all"                ? r.find_task(task)
                         : task == "all"                 ? r.find_model(model)
                                                         : r.find(model, task);
  REQUIRE_MESSAGE(g != nullptr, model << " × " << task);
  return *g;
}

// Index of p in the default fast thresholds {0.5, 0.8, 1.0, 1.2}.
constexpr int kF05 = 0, kF08 = 1, kF10 = 2, kF12 = 3;

}  // namespace

TEST_CASE("pass@k: the unbiased estimator, computed stably") {
  // n=3, c=2: pass@1 = c/n; pass@2 = 1 - C(1,2)/C(3,2) = 1 (fewer failures than k).
  CHECK(pass_at_k(3, 2, 1) == doctest::Approx(2.0 / 3));
  CHECK(pass_at_k(3, 2, 2) == doctest::Approx(1.0));
  // n=3, c=1, k=2: 1 - C(2,2)/C(3,2) = 1 - 1/3.
  CHECK(pass_at_k(3, 1, 2) == doctest::Approx(2.0 / 3));
  // n=10, c=3, k=5: 1 - C(7,5)/C(10,5) = 1 - 21/252 = 0.916666...
  CHECK(pass_at_k(10, 3, 5) == doctest::Approx(1.0 - 21.0 / 252));
  CHECK(pass_at_k(5, 0, 3) == 0.0);
  // Large n where C(n, k) overflows doubles: n=2000, c=1000, k=1 is exactly c/n.
  CHECK(pass_at_k(2000, 1000, 1) == doctest::Approx(0.5));
  // n=2000, c=1, k=1000: the one success is in half of all 1000-subsets.
  CHECK(pass_at_k(2000, 1, 1000) == doctest::Approx(0.5));
  CHECK_THROWS(pass_at_k(3, 4, 1));
  CHECK_THROWS(pass_at_k(3, 1, 4));
}

TEST_CASE("report: per model × task rates, pass@k and speedups match the hand-computed values") {
  Report r = load_report({"two_models"});
  CHECK(r.models == std::vector<std::string>{"alpha", "beta"});
  CHECK(r.tasks == std::vector<std::string>{"gemm_a", "mha_b"});
  CHECK(r.turns == 3);
  CHECK(r.skipped_partial_lines == 0);
  // 4 pairs + 2 per-model + 2 per-task + overall.
  CHECK(r.groups.size() == 9);

  SUBCASE("alpha × gemm_a") {
    // s0: CE, incorrect, ok(1.5); s1: ok(0.6, not executed), ok(0.9), ok(1.25); s2: no_kernel, CE, request
    // failed.
    const GroupReport &g = group(r, "alpha", "gemm_a");
    CHECK(g.trajectories == 3);
    CHECK(g.attempts == 9);
    // cumulative by turn: compile [1,2,2], correct [1,1,2], executed [0,1,2], fast_1.0 [0,0,2], fast_0.8
    // [0,1,2]
    CHECK(g.by_turn[0].cumulative.compiled == 1);
    CHECK(g.by_turn[1].cumulative.compiled == 2);
    CHECK(g.by_turn[0].cumulative.correct == 1);
    CHECK(g.by_turn[1].cumulative.correct == 1);
    CHECK(g.by_turn[2].cumulative.correct == 2);
    CHECK(g.by_turn[0].cumulative.executed == 0);
    CHECK(g.by_turn[1].cumulative.executed == 1);
    CHECK(g.by_turn[1].cumulative.fast[kF08] == 1);
    CHECK(g.by_turn[1].cumulative.fast[kF10] == 0);
    CHECK(g.end.fast[kF10] == 2);
    CHECK(g.end.fast[kF12] == 2);
    // per attempt at turn 1: incorrect, ok(0.9), compile_error -> 2 of 3 compiled, 1 correct.
    CHECK(g.by_turn[1].attempts == 3);
    CHECK(g.by_turn[1].per_attempt.compiled == 2);
    CHECK(g.by_turn[1].per_attempt.correct == 1);
    // pass@k, n=3 c=2 for both correctness and fast_1.0; k=5,10 exceed n and are left out.
    CHECK(g.pass_correct.at(1) == doctest::Approx(2.0 / 3));
    CHECK(g.pass_correct.at(2) == doctest::Approx(1.0));
    CHECK(g.pass_correct.count(5) == 0);
    CHECK(g.pass_fast1.at(1) == doctest::Approx(2.0 / 3));
    // speedups of correct attempts: 1.5, 0.6, 0.9, 1.25 -> geomean 1.0125^(1/4) = 1.0031105
    CHECK(g.speedup_samples == 4);
    CHECK(*g.geomean_speedup == doctest::Approx(1.0031105).epsilon(1e-6));
    CHECK(*g.best_speedup == doctest::Approx(1.5));
    // taxonomy: turn 0 = compile_error, ok, no_kernel; turn 2 = ok ×2, request_failed
    CHECK(g.failures_by_turn[0].at("compile_error") == 1);
    CHECK(g.failures_by_turn[0].at("no_kernel") == 1);
    CHECK(g.failures_by_turn[0].at("ok") == 1);
    CHECK(g.failures_by_turn[2].at("ok") == 2);
    CHECK(g.failures_by_turn[2].at("request_failed") == 1);
    // 8 answered attempts × (1000 + 500) tokens over 2 successes; wall 8 × 15 s + 30 s over 2.
    CHECK(g.prompt_tokens == 8000);
    CHECK(g.reasoning_tokens == 1600);
    CHECK(*g.tokens_per_success == doctest::Approx(6000));
    CHECK(*g.wall_seconds_per_success == doctest::Approx(75));
  }

  SUBCASE("alpha × mha_b: stopped trajectories carry their success forward; fast_p is strict") {
    // s0: ok(1.1) at turn 0 only; s1: runtime_error, timeout, incorrect; s2: static_error, ok(0.5, not
    // executed).
    const GroupReport &g = group(r, "alpha", "mha_b");
    CHECK(g.attempts == 6);
    CHECK(g.by_turn[2].cumulative.correct == 2);   // s0's turn-0 success still counts at turn 2
    CHECK(g.by_turn[0].cumulative.compiled == 2);  // ok + runtime_error compiled; static_error did not
    CHECK(g.end.compiled == 3);
    CHECK(g.end.executed == 1);
    CHECK(g.end.fast[kF05] == 1);  // 0.5 is not > 0.5
    CHECK(g.end.fast[kF12] == 0);
    CHECK(g.pass_fast1.at(1) == doctest::Approx(1.0 / 3));
    CHECK(g.pass_fast1.at(2) == doctest::Approx(2.0 / 3));
    CHECK(*g.geomean_speedup == doctest::Approx(std::sqrt(1.1 * 0.5)));
    CHECK(g.by_turn[1].attempts == 2);
    CHECK(g.by_turn[2].attempts == 1);
  }

  SUBCASE("beta × gemm_a: a suspicious verdict counts as correct but never as fast") {
    const GroupReport &g = group(r, "beta", "gemm_a");
    CHECK(g.end.correct == 1);
    CHECK(g.end.fast[kF05] == 1);  // 0.8 at turn 1
    CHECK(g.end.fast[kF08] == 0);  // 0.8 is not > 0.8; 5.0 at turn 2 is suspicious
    CHECK(g.speedup_samples == 1);
    CHECK(*g.best_speedup == doctest::Approx(0.8));
    CHECK(g.pass_correct.at(1) == doctest::Approx(0.5));
    CHECK(g.pass_fast1.at(2) == doctest::Approx(0.0));
    CHECK(g.failures_by_turn[2].at("suspicious") == 1);
  }

  SUBCASE("per model and overall: pass@k averages the pairs; rates pool trajectories") {
    const GroupReport &alpha = group(r, "alpha", "all");
    CHECK(alpha.trajectories == 6);
    CHECK(alpha.end.correct == 4);
    CHECK(alpha.pass_correct.at(1) == doctest::Approx(2.0 / 3));
    CHECK(alpha.pass_fast1.at(1) == doctest::Approx(0.5));      // mean(2/3, 1/3)
    CHECK(alpha.pass_fast1.at(2) == doctest::Approx(5.0 / 6));  // mean(1, 2/3)
    // 1.5 · 0.6 · 0.9 · 1.25 · 1.1 · 0.5 = 0.556875; ^(1/6)
    CHECK(*alpha.geomean_speedup == doctest::Approx(std::pow(0.556875, 1.0 / 6)));
    const GroupReport &beta = group(r, "beta", "all");
    CHECK(beta.pass_correct.at(1) == doctest::Approx(0.75));  // mean(1/2, 1)
    CHECK(beta.pass_fast1.at(1) == doctest::Approx(0.25));    // mean(0, 1/2)
    CHECK(*beta.geomean_speedup == doctest::Approx(std::cbrt(0.8 * 2.0 * 1.0)));
    CHECK(*beta.best_speedup == doctest::Approx(2.0));
    const GroupReport &all = group(r, "all", "all");
    CHECK(all.trajectories == 10);
    CHECK(all.attempts == 25);
    CHECK(all.end.correct == 7);
    CHECK(all.pass_correct.at(1) == doctest::Approx((2.0 / 3 + 2.0 / 3 + 0.5 + 1.0) / 4));
    CHECK(all.pass_correct.at(2) == doctest::Approx(1.0));
    CHECK(all.pass_correct.count(5) == 0);
    const GroupReport &mha = group(r, "all", "mha_b");
    CHECK(mha.trajectories == 5);
    CHECK(mha.end.correct == 4);
  }
}

TEST_CASE("report: outputs are written; CSV rows match the numbers; HTML is self-contained") {
  Report r = load_report({"two_models"});
  ptxbench::util::TempDir dir("h7-report");
  auto written = write_report(r, dir.path());
  REQUIRE(written.has_value());
  CHECK(written->size() == 10);  // report.md, report.html, 7 CSV files, the trajectories folder
  auto read = [&](const std::string &name) {
    auto text = ptxbench::util::read_file(dir.path() / name);
    REQUIRE(text.has_value());
    return *text;
  };
  const std::string md = read("report.md");
  // 2 of 3, Wilson 95%: 20.8–93.9%.
  CHECK(md.find("| alpha | gemm_a | 3 | 66.7% [20.8–93.9] | 66.7% [20.8–93.9] | 66.7% [20.8–93.9] |") !=
        std::string::npos);
  CHECK(md.find("| all | all | 10 |") != std::string::npos);
  const std::string summary = read("summary.csv");
  // compile 2/2 [0.34238, 1], correct 2/2, executed 1/2 [0.0945312, 0.905469].
  CHECK(summary.find("beta,mha_b,2,4,1,0.34238,1,1,0.34238,1,0.5,0.0945312,0.905469,") != std::string::npos);
  const std::string pass = read("pass_at_k.csv");
  CHECK(pass.find("alpha,all,fast_1.0,2,0.833333,") != std::string::npos);
  const std::string speedups = read("speedups.csv");
  CHECK(std::count(speedups.begin(), speedups.end(), '\n') ==
        1 + 4 + 2 + 1 + 2);  // header + correct ok attempts
  const std::string html = read("report.html");
  CHECK(html.find("<svg") != std::string::npos);
  CHECK(html.find("<script") == std::string::npos);
  CHECK(html.find("http://") == html.find("http://www.w3.org/2000/svg"));  // only the SVG namespace
  CHECK(html.find("https://") == std::string::npos);
  CHECK(html.find("src=") == std::string::npos);
  // One line chart per axis (compile, correct, executed, 4 fast_p), pass@1, speedups, one taxonomy per
  // model.
  std::size_t charts = 0;
  for (std::size_t at = html.find("<svg"); at != std::string::npos; at = html.find("<svg", at + 1)) ++charts;
  CHECK(charts == 7 + 1 + 1 + 2);
  CHECK(html.find("class=\"errbar\"") != std::string::npos);
  // Every trajectory is linked, and its page exists.
  for (const auto &p : r.pages) {
    CHECK(html.find("href=\"" + p.file + "\"") != std::string::npos);
    CHECK(std::filesystem::exists(dir.path() / p.file));
  }
  CHECK(r.pages.size() == 10);
  const std::string page = read("trajectories/alpha__gemm_a__0.html");
  CHECK(page.find("href=\"../report.html\"") != std::string::npos);
  CHECK(page.find("<script") == std::string::npos);
  CHECK(page.find("id=\"turn-2\"") != std::string::npos);
  CHECK(page.find("<details class=\"reasoning\">") != std::string::npos);
  CHECK(page.find("diff against turn 1") != std::string::npos);
  const std::string cmp = read("comparison.csv");
  CHECK(cmp.rfind("model_a,model_b,task,pairs,", 0) == 0);
  CHECK(cmp.find("\nalpha,beta,all,") != std::string::npos);
}

TEST_CASE("report: bad input gives clear messages; partial lines are counted, not fatal") {
  SUBCASE("a killed run: garbage and a partial last line are skipped and counted") {
    Report r = load_report({"truncated"});
    CHECK(r.skipped_partial_lines == 2);
    CHECK(group(r, "all", "all").attempts == 2);
    CHECK(render_markdown(r).find("Warnings") != std::string::npos);
  }
  SUBCASE("mixed format versions: the other version is skipped with a warning") {
    Report r = load_report({"mixed_versions"});
    CHECK(group(r, "all", "all").attempts == 1);
    bool warned = false;
    for (const auto &w : r.warnings) warned |= w.find("format_version other than 1") != std::string::npos;
    CHECK(warned);
  }
  SUBCASE("an empty run is an error naming the run and the reason") {
    auto run = load_run(kRuns / "empty");
    REQUIRE(run.has_value());
    auto report = build_report({*run});
    REQUIRE_FALSE(report.has_value());
    CHECK(report.error().find("empty") != std::string::npos);
    CHECK(report.error().find("runs/empty") != std::string::npos);
  }
  SUBCASE("a run with only another format version says so") {
    auto run = load_run(kRuns / "future_only");
    REQUIRE(run.has_value());
    auto report = build_report({*run});
    REQUIRE_FALSE(report.has_value());
    CHECK(report.error().find("another format version") != std::string::npos);
  }
  SUBCASE("a model named \"all\" is not confused with the pooled groups") {
    ptxbench::util::TempDir dir("h7-all");
    std::ofstream(dir.path() / "trajectories.jsonl")
        << R"({"format_version":1,"model":"all","task_id":"t","sample":0,"turn":0,"verdict":{"status":"ok","axes":{"correct":true}}})"
        << "\n"
        << R"({"format_version":1,"model":"b","task_id":"t","sample":0,"turn":0,"verdict":{"status":"incorrect"}})"
        << "\n";
    auto run = load_run(dir.path());
    REQUIRE(run.has_value());
    auto report = build_report({*run});
    REQUIRE(report.has_value());
    CHECK(report->find_model("all")->trajectories == 1);
    CHECK(report->find_task("t")->trajectories == 2);
    CHECK(report->overall().trajectories == 2);
    CHECK(report->overall().end.correct == 1);
  }
  SUBCASE("two runs: trajectories of both are pooled") {
    Report r = load_report({"two_models", "truncated"});
    CHECK(group(r, "alpha", "mha_b").trajectories == 3 + 2);  // truncated holds s0 and s1 of alpha × mha_b
  }
  SUBCASE("records with wrong field types do not crash the report") {
    ptxbench::util::TempDir dir("h7-bad");
    std::ofstream(dir.path() / "trajectories.jsonl")
        << R"({"format_version":1,"model":"m","task_id":"t","sample":0,"turn":0,"verdict":{"status":7,"axes":"x"},"response":{"usage":[1]}})"
        << "\n"
        << R"({"format_version":1,"model":"m","task_id":"t","sample":"zero","turn":0})"
        << "\n";
    auto run = load_run(dir.path());
    REQUIRE(run.has_value());
    auto report = build_report({*run});
    REQUIRE(report.has_value());
    REQUIRE(report->find("m", "t") != nullptr);
    CHECK(report->find("m", "t")->attempts == 1);
    CHECK(report->find("m", "t")->end.correct == 0);
    bool warned = false;
    for (const auto &w : report->warnings)
      warned |= w.find("lack model, task_id, sample or turn") != std::string::npos;
    CHECK(warned);
  }
}

TEST_CASE("Wilson intervals match published values") {
  // Newcombe (1998), Statistics in Medicine 17:857-872, Table I, method 3 (score, no continuity correction).
  auto w = [](int k, int n) {
    auto ci = wilson_interval(k, n);
    REQUIRE(ci.has_value());
    return *ci;
  };
  CHECK(w(81, 263).lo == doctest::Approx(0.2553).epsilon(0.0002));
  CHECK(w(81, 263).hi == doctest::Approx(0.3662).epsilon(0.0002));
  CHECK(w(15, 148).lo == doctest::Approx(0.0624).epsilon(0.0005));
  CHECK(w(15, 148).hi == doctest::Approx(0.1605).epsilon(0.0005));
  CHECK(w(0, 20).lo == 0.0);
  CHECK(w(0, 20).hi == doctest::Approx(0.1611).epsilon(0.0005));
  CHECK(w(1, 29).lo == doctest::Approx(0.0061).epsilon(0.01));
  CHECK(w(1, 29).hi == doctest::Approx(0.1718).epsilon(0.0005));
  // 0, 5 and 10 of 10: [0, 0.2775], [0.2366, 0.7634], [0.7225, 1] (symmetric about 1/2).
  CHECK(w(0, 10).lo == 0.0);
  CHECK(w(0, 10).hi == doctest::Approx(0.2775).epsilon(0.0005));
  CHECK(w(5, 10).lo == doctest::Approx(0.2366).epsilon(0.0005));
  CHECK(w(5, 10).hi == doctest::Approx(0.7634).epsilon(0.0005));
  CHECK(w(10, 10).lo == doctest::Approx(0.7225).epsilon(0.0005));
  CHECK(w(10, 10).hi == 1.0);
  CHECK_FALSE(wilson_interval(0, 0).has_value());
  CHECK_FALSE(wilson_interval(3, 2).has_value());
}

TEST_CASE("bootstrap: deterministic given the seed, different with another seed, sensible coverage") {
  BootstrapSettings s;
  s.resamples = 1000;
  s.seed = 7;
  std::vector<double> data;
  Resampler gen(1, "data");
  for (int i = 0; i < 40; ++i) data.push_back(static_cast<double>(gen.index(1000)) / 1000.0);
  auto mean_of_resample = [&](Resampler &rng) -> std::optional<double> {
    double sum = 0;
    for (std::size_t i = 0; i < data.size(); ++i) sum += data[rng.index(data.size())];
    return sum / static_cast<double>(data.size());
  };
  auto a = percentile_bootstrap(s, "mean", mean_of_resample);
  auto b = percentile_bootstrap(s, "mean", mean_of_resample);
  REQUIRE(a.has_value());
  CHECK(a->lo == b->lo);  // bit for bit
  CHECK(a->hi == b->hi);
  s.seed = 8;
  auto c = percentile_bootstrap(s, "mean", mean_of_resample);
  CHECK((c->lo != a->lo || c->hi != a->hi));
  // A uniform(0,1) mean of 40 has sd 0.0456: the 95% interval is about ±1.96 sd wide around the mean.
  CHECK(a->hi - a->lo == doctest::Approx(2 * 1.96 * 0.2887 / std::sqrt(40.0)).epsilon(0.25));
  // Coverage: over 200 Bernoulli(0.3) samples of 30, the bootstrap interval of the rate holds 0.3 in
  // roughly 95% of them (percentile intervals undercover a little at this size: accept 88-99%).
  BootstrapSettings cs;
  cs.resamples = 400;
  int covered = 0;
  Resampler draw(99, "coverage");
  for (int rep = 0; rep < 200; ++rep) {
    std::vector<int> x;
    for (int i = 0; i < 30; ++i) x.push_back(draw.index(10) < 3 ? 1 : 0);
    cs.seed = static_cast<std::uint64_t>(rep);
    auto ci = percentile_bootstrap(cs, "rate", [&](Resampler &rng) -> std::optional<double> {
      int k = 0;
      for (std::size_t i = 0; i < x.size(); ++i) k += x[rng.index(x.size())];
      return k / 30.0;
    });
    REQUIRE(ci.has_value());
    covered += ci->lo <= 0.3 && 0.3 <= ci->hi;
  }
  CHECK(covered >= 176);
  CHECK(covered <= 198);
  // Replicates without a value are left out; too few valid ones give no interval.
  auto none = percentile_bootstrap(s, "none", [](Resampler &) { return std::optional<double>(); });
  CHECK_FALSE(none.has_value());
  s.resamples = 0;
  CHECK_FALSE(percentile_bootstrap(s, "mean", mean_of_resample).has_value());
}

TEST_CASE("report: intervals of pass@k and the geomean, recorded seed, paired model comparison") {
  Report r = load_report({"two_models"});
  const GroupReport &g = group(r, "alpha", "gemm_a");
  // pass@1 correct = 2/3; the bootstrap interval holds it and stays within [0, 1]; resampling 3
  // trajectories can give 0/3 .. 3/3.
  REQUIRE(g.pass_correct_ci.count(1));
  CHECK(g.pass_correct_ci.at(1).lo <= 2.0 / 3);
  CHECK(g.pass_correct_ci.at(1).hi >= 2.0 / 3);
  CHECK(g.pass_correct_ci.at(1).lo >= 0.0);
  CHECK(g.pass_correct_ci.at(1).hi <= 1.0);
  REQUIRE(g.geomean_speedup_ci.has_value());
  CHECK(g.geomean_speedup_ci->lo <= *g.geomean_speedup);
  CHECK(g.geomean_speedup_ci->hi >= *g.geomean_speedup);
  // The same report twice: the same intervals (seeded).
  Report again = load_report({"two_models"});
  CHECK(group(again, "alpha", "gemm_a").geomean_speedup_ci->lo == g.geomean_speedup_ci->lo);
  const std::string md = render_markdown(r);
  CHECK(md.find(fmt::format("seed {}", r.options.bootstrap.seed)) != std::string::npos);

  // alpha vs beta: by hand, gemm_a pairs (s0, s0) (s1, s1): alpha correct 2/2 of those, beta 1/2 -> +0.5;
  // mha_b pairs (s0, s0) (s1, s1): alpha 1/2 (s1 never correct), beta 2/2 -> -0.5; overall mean 0.
  REQUIRE(r.comparisons.size() == 1);
  const Comparison &c = r.comparisons[0];
  CHECK(c.model_a == "alpha");
  CHECK(c.model_b == "beta");
  REQUIRE(c.rows.size() == 3);
  CHECK(c.rows[0].task == "gemm_a");
  CHECK(c.rows[0].pairs == 2);
  CHECK(c.rows[0].pass1_diff == doctest::Approx(0.5));
  CHECK(c.rows[1].pass1_diff == doctest::Approx(-0.5));
  CHECK(c.rows[2].task == "all");
  CHECK(c.rows[2].pairs == 4);
  CHECK(c.rows[2].pass1_diff == doctest::Approx(0.0));
  REQUIRE(c.rows[2].pass1_diff_ci.has_value());
  CHECK(c.rows[2].pass1_diff_ci->lo <= 0.0);
  CHECK(c.rows[2].pass1_diff_ci->hi >= 0.0);
  // fast_1.0 (status ok, correct, speedup > 1): gemm_a alpha s0 (1.5) and s1 (1.25) vs beta none -> +1.0.
  CHECK(c.rows[0].fast1_diff == doctest::Approx(1.0));
  CHECK(md.find("## Model comparison") != std::string::npos);

  ReportOptions o;
  o.compare = {{"alpha", "nobody"}};
  auto run = load_run(kRuns / "two_models");
  auto bad = build_report({*run}, o);
  REQUIRE_FALSE(bad.has_value());
  CHECK(bad.error().find("nobody") != std::string::npos);
}

TEST_CASE("report: costs per turn, trajectory and success from endpoint prices") {
  auto run = load_run(kRuns / "two_models");
  REQUIRE(run.has_value());
  ReportOptions o;
  o.prices["alpha"] = Price{2.0, 10.0};  // USD per million prompt / completion tokens
  auto r = build_report({*run}, o);
  REQUIRE(r.has_value());
  // Every fixture attempt with a response uses 1000 prompt + 500 completion tokens: 0.002 + 0.005 USD.
  const GroupReport &g = group(*r, "alpha", "gemm_a");
  REQUIRE(g.cost_usd.has_value());
  CHECK(*g.cost_usd == doctest::Approx(0.007 * 8));  // 9 attempts, one failed request without usage
  CHECK(*g.cost_per_attempt == doctest::Approx(0.007 * 8 / 9));
  CHECK(*g.cost_per_trajectory == doctest::Approx(0.007 * 8 / 3));
  CHECK(*g.cost_per_success == doctest::Approx(0.007 * 8 / 2));
  // beta has no price: its groups and the pooled ones show no cost rather than a partial one.
  CHECK_FALSE(group(*r, "beta", "gemm_a").cost_usd.has_value());
  CHECK_FALSE(group(*r, "all", "all").cost_usd.has_value());
  CHECK(render_markdown(*r).find("$0.0280") != std::string::npos);  // alpha × gemm_a cost per success
  // The trajectory page's turns carry their cost.
  for (const auto &p : r->pages)
    if (p.model == "alpha" && p.task_id == "gemm_a" && p.sample == 0)
      CHECK(*p.turns[0].cost_usd == doctest::Approx(0.007));
}

TEST_CASE("trajectory view: feedback received, kernel diff against the previous turn, key figures") {
  auto run = load_run(kRuns / "two_models");
  REQUIRE(run.has_value());
  auto pages = build_trajectory_pages({*run}, {});
  const TrajectoryPage *p = nullptr;
  for (const auto &x : pages)
    if (x.trajectory_id == "alpha/gemm_a/0") p = &x;
  REQUIRE(p != nullptr);
  REQUIRE(p->turns.size() == 3);
  CHECK(p->file == "trajectories/alpha__gemm_a__0.html");
  CHECK(p->turns[0].feedback_received == "Write C = A * B^T (bf16).");  // turn 0: the task
  CHECK(p->turns[1].feedback_received == "Your kernel failed: compile_error. Fix it.");
  CHECK(p->turns[1].previous_kernel_turn == 0);
  CHECK(p->turns[1].kernel_diff.find("- // alpha gemm_a sample 0 turn 0") != std::string::npos);
  CHECK(p->turns[1].kernel_diff.find("+ // alpha gemm_a sample 0 turn 1") != std::string::npos);
  CHECK(p->turns[1].kernel_diff.find("  .version 8.5") != std::string::npos);
  CHECK(p->reached_correct);
  CHECK(*p->best_speedup == doctest::Approx(1.5));
  const std::string text = render_trajectory_text(*p, 1);
  CHECK(text.find("=== turn 1: incorrect") != std::string::npos);
  CHECK(text.find("=== turn 0") == std::string::npos);
  CHECK(text.find("diff against turn 0") != std::string::npos);
}

TEST_CASE("trajectory view: timing rows read through the protocol's codec; a malformed record is named") {
  auto run = load_run(kRuns / "two_models");
  REQUIRE(run.has_value());
  auto text = ptxbench::util::read_file(std::filesystem::path(PTXBENCH_TEST_DATA) / "timing" /
                                        "gemm_h200_timing_figures.json");
  REQUIRE(text.has_value());
  const nlohmann::json timing = nlohmann::json::parse(*text);
  auto figures_with = [&](const nlohmann::json &figures) {
    LoadedRun copy = *run;
    for (auto &t : copy.turns)
      if (t.trajectory_id == "alpha/gemm_a/0" && t.turn == 2)
        t.verdict["stages"]["timing"]["figures"] = figures;
    for (const auto &page : build_trajectory_pages({copy}, {}))
      if (page.trajectory_id == "alpha/gemm_a/0") return page.turns.at(2).figures;
    FAIL("no page");
    return std::vector<std::string>{};
  };
  auto has = [](const std::vector<std::string> &lines, const std::string &line) {
    return std::find(lines.begin(), lines.end(), line) != lines.end();
  };
  const auto lines = figures_with(timing);
  CHECK(has(lines, "timing M=8192: candidate 0.7718 ms, library 0.7318 ms, speedup 0.948x"));
  CHECK(has(lines, "geomean speedup 0.948x"));

  nlohmann::json bad = timing;
  bad["workloads"][0]["stopped_by"] = "patience";
  const auto named = figures_with(bad);
  CHECK(std::any_of(named.begin(), named.end(), [](const std::string &l) {
    return l.rfind("timing figures unreadable: workloads[0].stopped_by: unknown value", 0) == 0;
  }));
  CHECK_FALSE(std::any_of(named.begin(), named.end(),
                          [](const std::string &l) { return l.rfind("geomean", 0) == 0; }));
  CHECK(figures_with(nlohmann::json::object()).size() < lines.size());  // not timed: no timing lines
}

TEST_CASE("line diff: common prefix and suffix kept, changes marked, long runs folded") {
  CHECK(line_diff("a\nb\nc\n", "a\nB\nc\n") == "  a\n- b\n+ B\n  c\n");
  CHECK(line_diff("a\nb\n", "a\nb\n") == "@@ 2 unchanged lines @@\n");
  std::string before, after;
  for (int i = 0; i < 20; ++i) before += "l" + std::to_string(i) + "\n";
  after = before;
  after.replace(after.find("l10\n"), 4, "x10\n");
  const std::string d = line_diff(before, after, 2);
  CHECK(
      d.find("@@ 8 unchanged lines @@\n  l8\n  l9\n- l10\n+ x10\n  l11\n  l12\n@@ 7 unchanged lines @@\n") ==
      0);
  CHECK(line_diff("x\ny\n", "y\nz\n") == "- x\n  y\n+ z\n");
}

namespace {

/// One record of a run without a GPU: compiled, GPU stages skipped; or a failed request.
nlohmann::json no_gpu_record(const std::string &task, int sample, bool request_failed) {
  nlohmann::json r = {{"format_version", kFormatVersion},
                      {"run_id", "r"},
                      {"model", "m"},
                      {"task_id", task},
                      {"sample", sample},
                      {"turn", 0},
                      {"trajectory_id", "m/" + task + "/" + std::to_string(sample)},
                      {"messages", nlohmann::json::array()},
                      {"feedback", ""},
                      {"stop_reason", request_failed ? "request_failed" : "turn_limit"}};
  if (request_failed) {
    r["response"] = nullptr;
    r["request_error"] = {{"kind", "network"}, {"http_status", 0}, {"message", "refused"}, {"attempts", 3}};
    r["verdict"] = nullptr;
    return r;
  }
  auto stage = [](const char *status) {
    return nlohmann::json{{"status", status},
                          {"summary", ""},
                          {"diagnostics", nlohmann::json::array()},
                          {"figures", nlohmann::json::object()},
                          {"wall_seconds", 0.1}};
  };
  r["response"] = {{"content", "```ptx\n...\n```"},
                   {"finish_reason", "stop"},
                   {"usage", {{"prompt_tokens", 10}, {"completion_tokens", 10}}}};
  r["request_error"] = nullptr;
  r["verdict"] = {{"status", "ok"},
                  {"task_id", task},
                  {"axes", {{"correct", nullptr}, {"targets_executed", nullptr}, {"speedup", nullptr}}},
                  {"stages",
                   {{"parse", stage("ok")},
                    {"static", stage("ok")},
                    {"compile", stage("ok")},
                    {"correctness", stage("skipped")},
                    {"execution", stage("skipped")},
                    {"timing", stage("skipped")}}}};
  return r;
}

}  // namespace

TEST_CASE(
    "report: without a GPU the GPU axes say \"not measured\"; request failures are not model failures") {
  LoadedRun run;
  run.dir = "no-gpu-run";
  run.run.run_id = "r";
  for (auto [sample, failed] : {std::pair{0, false}, std::pair{1, false}, std::pair{2, true}})
    run.turns.push_back(TurnRecord::from_json(no_gpu_record("gemm_a", sample, failed)));
  auto report = build_report({run});
  REQUIRE(report);
  const GroupReport &g = group(*report, "m", "gemm_a");
  CHECK(g.trajectories == 2);  // the failed request is the endpoint's failure, not the model's
  CHECK(g.request_failed_trajectories == 1);
  CHECK(g.gpu_measured_attempts == 0);
  CHECK(g.end.compiled == 2);
  const std::string md = render_markdown(*report);
  CHECK(md.find("| m | gemm_a | 2 | 100.0% [") != std::string::npos);  // compile is measured: a rate
  CHECK(md.find("] | not measured | not measured |") != std::string::npos);
  CHECK(md.find("0.000") == std::string::npos);  // no pass@k of zero for an unmeasured axis
  CHECK(md.find("1 trajectory ended in a request failure") != std::string::npos);
}

TEST_CASE("report: the generalization column counts trajectories checked on hidden workloads") {
  LoadedRun run;
  run.dir = "hidden-run";
  run.run.run_id = "r";
  // Three trajectories, correct on the shown workload: right on the hidden ones, wrong there, not checked.
  const std::optional<bool> outcomes[] = {true, false, std::nullopt};
  for (int sample = 0; sample < 3; ++sample) {
    nlohmann::json r = no_gpu_record("gemm_a", sample, false);
    r["verdict"]["axes"] = {{"correct", true}, {"targets_executed", true}, {"speedup", 0.5}};
    r["verdict"]["stages"]["correctness"]["status"] = "ok";
    r["verdict"]["generalizes"] = {
        {"value", outcomes[sample] ? nlohmann::json(*outcomes[sample]) : nlohmann::json()},
        {"passed", outcomes[sample] == true ? 2
                   : outcomes[sample]       ? 1
                                            : 0},
        {"total", outcomes[sample] ? 2 : 0}};
    run.turns.push_back(TurnRecord::from_json(r));
  }
  auto report = build_report({run});
  REQUIRE(report);
  const GroupReport &g = group(*report, "m", "gemm_a");
  CHECK(g.generalization_checked == 2);
  CHECK(g.generalizing == 1);
  const std::string md = render_markdown(*report);
  CHECK(md.find("| generalizes |") != std::string::npos);
  CHECK(md.find("| 1/2 (50.0% [") != std::string::npos);
  const auto files = render_csv(*report);
  const std::string &summary = files.at("summary.csv");
  CHECK(summary.find("generalization_checked,generalizes_rate,generalizes_lo,generalizes_hi") !=
        std::string::npos);
  CHECK(summary.find(",2,0.5,") != std::string::npos);
  CHECK(render_html(*report).find("<th>generalizes</th>") != std::string::npos);
  // `ptxbench show` and the trajectory pages say it per turn, and only where it was checked.
  const auto pages = build_trajectory_pages({run}, {});
  REQUIRE(pages.size() == 3);
  std::map<int, std::string> text;
  for (const auto &p : pages) text[p.sample] = render_trajectory_text(p, std::nullopt);
  CHECK(text[0].find("| generalizes yes ===") != std::string::npos);
  CHECK(text[1].find("| generalizes no ===") != std::string::npos);
  CHECK(text[2].find("generalizes") == std::string::npos);
}

TEST_CASE("report: borderline attempts counted per model; show gives every workload's margin") {
  LoadedRun run;
  run.dir = "edge-run";
  run.run.run_id = "r";
  // Four trajectories: correct near the edge, incorrect near the edge, correct with room, no margin recorded.
  const nlohmann::json margin_near = {
      {"tensors", nlohmann::json::array({{{"tensor", "C"}, {"max_error_ratio", 0.93}, {"trial", 2}}})},
      {"max_error_ratio", 0.93},
      {"borderline", true},
      {"trials_run", 11},
      {"trials_failed", 0},
      {"extra_trials", 8},
      {"failure_rate", 0.0},
      {"extra_stopped_by", "count"}};
  for (int sample = 0; sample < 4; ++sample) {
    nlohmann::json r = no_gpu_record("gemm_a", sample, false);
    const bool incorrect = sample == 1;
    r["verdict"]["status"] = incorrect ? "incorrect" : "ok";
    r["verdict"]["axes"] = {{"correct", !incorrect}, {"targets_executed", true}, {"speedup", 0.5}};
    auto &c = r["verdict"]["stages"]["correctness"];
    c["status"] = incorrect ? "incorrect" : "ok";
    nlohmann::json margin = margin_near;
    if (incorrect) {
      margin["max_error_ratio"] = 1.04;
      margin["tensors"][0]["max_error_ratio"] = 1.04;
      margin["trials_failed"] = 2;
      margin["extra_stopped_by"] = "budget";
    }
    if (sample == 2) {
      margin["borderline"] = false;
      margin["max_error_ratio"] = 0.31;
      margin["tensors"][0]["max_error_ratio"] = 0.31;
    }
    if (sample < 3) {
      c["figures"] = {{"workloads", nlohmann::json::array({{{"name", "M=8192"}, {"margin", margin}}})},
                      {"borderline", sample < 2}};
    }
    run.turns.push_back(TurnRecord::from_json(r));
  }
  auto report = build_report({run});
  REQUIRE(report);
  const GroupReport &g = group(*report, "m", "gemm_a");
  CHECK(g.attempts == 4);
  CHECK(g.borderline_attempts == 2);
  CHECK(g.borderline_incorrect == 1);
  const std::string md = render_markdown(*report);
  CHECK(md.find("## Near the tolerance (borderline attempts)") != std::string::npos);
  CHECK(md.find("| m | gemm_a | 4 | 2 | 1 |") != std::string::npos);
  const auto files = render_csv(*report);
  const std::string &summary = files.at("summary.csv");
  CHECK(summary.find("generalizes_hi,borderline_attempts,borderline_incorrect,profile_attempts,") !=
        std::string::npos);
  CHECK(summary.find("m,gemm_a,") != std::string::npos);
  // borderline 2, of them incorrect 1; then 3 final correct attempts, none profiled: the profile columns
  // are empty (14 of them), not 0.
  CHECK(summary.find(",2,1,3,0,3" + std::string(14, ',') + "\n") != std::string::npos);

  // `ptxbench show`: the margin of every workload, the extra trials where it was borderline.
  const auto pages = build_trajectory_pages({run}, {});
  REQUIRE(pages.size() == 4);
  std::map<int, std::string> text;
  for (const auto &p : pages) text[p.sample] = render_trajectory_text(p, std::nullopt);
  CHECK(
      text[0].find("margin M=8192: largest |error| / tolerance C 0.93 — borderline: 0 of 11 trials failed (8 "
                   "extra)") != std::string::npos);
  CHECK(text[1].find("C 1.04 — borderline: 2 of 11 trials failed (8 extra, stopped by the time budget)") !=
        std::string::npos);
  CHECK(text[2].find("margin M=8192: largest |error| / tolerance C 0.31") != std::string::npos);
  CHECK(text[2].find("borderline") == std::string::npos);
  CHECK(text[3].find("margin") == std::string::npos);

  // A run without any borderline attempt has no such section.
  LoadedRun plain;
  plain.dir = "plain-run";
  plain.run.run_id = "r";
  plain.turns.push_back(TurnRecord::from_json(no_gpu_record("gemm_a", 0, false)));
  auto plain_report = build_report({plain});
  REQUIRE(plain_report);
  CHECK(render_markdown(*plain_report).find("Near the tolerance") == std::string::npos);
}

TEST_CASE("report --compare: each model's generalization rate on the paired tasks") {
  auto loaded = load_run(kRuns / "two_models");
  REQUIRE(loaded.has_value());
  // alpha's correct attempts generalize, beta's do not.
  for (auto &t : loaded->turns)
    if (t.verdict.is_object() && t.verdict.contains("axes") && t.verdict["axes"]["correct"] == true)
      t.verdict["generalizes"] = {
          {"value", t.model == "alpha"}, {"passed", t.model == "alpha" ? 2 : 0}, {"total", 2}};
  auto report = build_report({*loaded});
  REQUIRE(report.has_value());
  REQUIRE(report->comparisons.size() == 1);
  const ComparisonRow &all = report->comparisons[0].rows.back();
  CHECK(all.task == "all");
  CHECK(all.gen_checked_a > 0);
  CHECK(all.gen_a == all.gen_checked_a);
  CHECK(all.gen_checked_b > 0);
  CHECK(all.gen_b == 0);
  const std::string md = render_markdown(*report);
  CHECK(md.find("| generalizes A | generalizes B |") != std::string::npos);
  CHECK(md.find(fmt::format("| {}/{} (100.0% [", all.gen_a, all.gen_checked_a)) != std::string::npos);
  CHECK(render_csv(*report).at("comparison.csv").find("gen_checked_a,gen_a_rate") != std::string::npos);
}

TEST_CASE("trajectory view: show gives the multiply-add work outside the targets, per family") {
  LoadedRun run;
  run.dir = "decoy-run";
  run.run.run_id = "r";
  // A decoy (mma.sync doing the GEMM beside wgmma), an honest wgmma kernel, a verdict without the record.
  const nlohmann::json decoy = {
      {"workload_flops", 1e11},
      {"target_flops", 1.024e11},
      {"target_share", 1.024},
      {"non_target_tensor_flops", 1.024e11},
      {"non_target_tensor_share", 1.024},
      {"fma_flops", 2e8},
      {"fma_share", 0.002},
      {"families",
       nlohmann::json::array({{{"family", "HMMA"}, {"unit", "tensor"}, {"flops", 1.024e11}, {"share", 1.024}},
                              {{"family", "FFMA"}, {"unit", "fma"}, {"flops", 2e8}, {"share", 0.002}}})},
      {"unknown_opcodes", nlohmann::json::array()}};
  nlohmann::json honest = decoy;
  honest["non_target_tensor_flops"] = 0;
  honest["non_target_tensor_share"] = 0;
  honest["families"].erase(0);
  for (int sample = 0; sample < 3; ++sample) {
    nlohmann::json r = no_gpu_record("gemm_a", sample, false);
    auto &e = r["verdict"]["stages"]["execution"];
    e["status"] = "ok";
    if (sample < 2)
      e["figures"] = {{"targets", nlohmann::json::array()}, {"matrix_work", sample == 0 ? decoy : honest}};
    run.turns.push_back(TurnRecord::from_json(r));
  }
  const auto pages = build_trajectory_pages({run}, {});
  REQUIRE(pages.size() == 3);
  std::map<int, std::string> text;
  for (const auto &p : pages) text[p.sample] = render_trajectory_text(p, std::nullopt);
  CHECK(text[0].find("multiply-adds outside the targets: 102.4% of the task's FLOPs on other tensor-core "
                     "instructions, 0.2% on the FMA pipe (HMMA 102.4%, FFMA 0.2%)") != std::string::npos);
  CHECK(text[1].find("multiply-adds outside the targets: 0.0% of the task's FLOPs on other tensor-core "
                     "instructions, 0.2% on the FMA pipe (FFMA 0.2%)") != std::string::npos);
  CHECK(text[2].find("multiply-adds outside the targets") == std::string::npos);
}

TEST_CASE("trajectory view: show gives a failed workload's row through the correctness codec") {
  LoadedRun run;
  run.dir = "incorrect-run";
  run.run.run_id = "r";
  const nlohmann::json rows = nlohmann::json::array(
      {{{"name", "M=4096"}, {"trials", 3}, {"passed", 3}},
       {{"name", "M=3000"},
        {"trials", 1},
        {"passed", 0},
        {"mismatches", 1234},
        {"max_abs_error", 41.5},
        {"first_mismatch", {{"tensor", "C"}, {"index", {2944, 17}}, {"got", "NaN"}, {"expected", 2.25}}},
        {"unwritten_count", 512}}});
  for (int sample = 0; sample < 2; ++sample) {
    nlohmann::json r = no_gpu_record("gemm_a", sample, false);
    auto &c = r["verdict"]["stages"]["correctness"];
    c["status"] = "incorrect";
    c["figures"] = {{"workloads", rows}};
    if (sample == 1) c["figures"]["workloads"][1]["passed"] = "none";
    run.turns.push_back(TurnRecord::from_json(r));
  }
  const auto pages = build_trajectory_pages({run}, {});
  REQUIRE(pages.size() == 2);
  std::map<int, std::string> text;
  for (const auto &p : pages) text[p.sample] = render_trajectory_text(p, std::nullopt);
  CHECK(text[0].find("correctness M=3000: 0 of 1 trials passed, 1234 mismatches, max abs error 41.5, first "
                     "mismatch C[2944, 17]: got NaN, expected 2.25, 512 never written") != std::string::npos);
  CHECK(text[0].find("correctness M=4096") == std::string::npos);  // passing rows are not listed
  CHECK(text[1].find("correctness figures unreadable: workloads[1].passed: expected a number") !=
        std::string::npos);
}

TEST_CASE("trajectory view: show gives each target's executions through the execution codec") {
  LoadedRun run;
  run.dir = "targets-run";
  run.run.run_id = "r";
  const nlohmann::json counted = {{"targets", nlohmann::json::array({{{"name", "wgmma"},
                                                                      {"sass_families", {"HGMMA"}},
                                                                      {"present_in_sass", true},
                                                                      {"warp_executions", 4096},
                                                                      {"threads_on", 524288},
                                                                      {"executed", true},
                                                                      {"work_share", 0.5}},
                                                                     {{"name", "tma_load"},
                                                                      {"sass_families", {"UTMALDG"}},
                                                                      {"present_in_sass", false},
                                                                      {"warp_executions", nullptr},
                                                                      {"executed", false}}})}};
  nlohmann::json malformed = counted;
  malformed["targets"][0]["executed"] = "yes";
  for (int sample = 0; sample < 2; ++sample) {
    nlohmann::json r = no_gpu_record("gemm_a", sample, false);
    auto &e = r["verdict"]["stages"]["execution"];
    e["status"] = "ok";
    e["figures"] = sample == 0 ? counted : malformed;
    run.turns.push_back(TurnRecord::from_json(r));
  }
  const auto pages = build_trajectory_pages({run}, {});
  REQUIRE(pages.size() == 2);
  std::map<int, std::string> text;
  for (const auto &p : pages) text[p.sample] = render_trajectory_text(p, std::nullopt);
  CHECK(text[0].find("target wgmma: executed 4096 times (warp-level), 50.0% of the task's FLOPs, in SASS") !=
        std::string::npos);
  CHECK(text[0].find("target tma_load: execution not measured, not in SASS") != std::string::npos);
  CHECK(text[1].find("execution figures unreadable: targets[0].executed: expected true or false") !=
        std::string::npos);
}

namespace {

/// The profile stage the H200 wrote for the wgmma+TMA GEMM (tests/data/profile): tensor pipe 87.18% of
/// peak (the library 99.28%), the highest throughput metric, so it is the bound unit.
nlohmann::json profile_stage_fixture() {
  auto text = ptxbench::util::read_file(std::filesystem::path(PTXBENCH_TEST_DATA) / "profile" /
                                        "gemm_wgmma_tma_stage.json");
  REQUIRE(text.has_value());
  return nlohmann::json::parse(*text);
}

/// Sets a metric's value (and the library's, when given) in a profile stage; `value` < 0 removes it.
void set_metric(nlohmann::json &stage, const std::string &name, double value,
                std::optional<double> library = std::nullopt) {
  auto &metrics = stage["figures"]["kernel_profile"]["metrics"];
  for (auto it = metrics.begin(); it != metrics.end(); ++it) {
    if ((*it)["name"] != name) continue;
    if (value < 0) {
      metrics.erase(it);
      return;
    }
    (*it)["value"] = value;
    if (library) (*it)["library"] = *library;
    return;
  }
  FAIL("no metric " << name);
}

const std::string kTensor = "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active";
const std::string kDram = "dram__throughput.avg.pct_of_peak_sustained_elapsed";

/// A correct attempt on the GPU (correctness ran), with the given profile stage (null: none recorded).
nlohmann::json gpu_record(const std::string &model, int sample, int turn, bool correct,
                          const nlohmann::json &profile_stage) {
  nlohmann::json r = no_gpu_record("gemm_a", sample, false);
  r["model"] = model;
  r["turn"] = turn;
  r["trajectory_id"] = model + "/gemm_a/" + std::to_string(sample);
  r["verdict"]["status"] = correct ? "ok" : "incorrect";
  r["verdict"]["axes"] = {{"correct", correct}, {"targets_executed", true}, {"speedup", 0.8}};
  r["verdict"]["stages"]["correctness"]["status"] = correct ? "ok" : "incorrect";
  if (!profile_stage.is_null()) r["verdict"]["stages"]["profile"] = profile_stage;
  return r;
}

}  // namespace

TEST_CASE("report: bound unit and tensor pipe over the final correct attempts; unprofiled ones are not 0") {
  const nlohmann::json p_tensor = profile_stage_fixture();  // bound: tensor pipe 87.18, library 99.28
  nlohmann::json p_dram = p_tensor;                         // bound: DRAM 80, tensor pipe 40
  set_metric(p_dram, kDram, 80.0);
  set_metric(p_dram, kTensor, 40.0);
  nlohmann::json p_tensor70 = p_tensor;  // bound: tensor pipe 70 (above SM 64.44), library 95
  set_metric(p_tensor70, kTensor, 70.0, 95.0);
  nlohmann::json p_no_tensor = p_tensor;  // a GPU without the tensor metric: bound DRAM 70
  set_metric(p_no_tensor, kTensor, -1);
  set_metric(p_no_tensor, kDram, 70.0);
  nlohmann::json p_skipped = p_tensor;  // the stage skipped: no record
  p_skipped["status"] = "skipped";
  p_skipped["figures"] = nlohmann::json::object();
  nlohmann::json p_malformed = p_tensor;
  p_malformed["figures"]["kernel_profile"]["metrics"] = "lots";

  LoadedRun run;
  run.dir = "profiled-run";
  run.run.run_id = "r";
  auto add = [&](const nlohmann::json &r) { run.turns.push_back(TurnRecord::from_json(r)); };
  add(gpu_record("m", 0, 0, true, p_tensor));
  add(gpu_record("m", 1, 0, true, p_dram));  // sample 1: the final correct attempt is turn 1, not this
  add(gpu_record("m", 1, 1, true, p_tensor70));
  add(gpu_record("m", 2, 0, true, p_skipped));
  add(gpu_record("m", 3, 0, false, p_tensor));  // never correct: not in the population
  add(gpu_record("m", 4, 0, true, p_no_tensor));
  add(gpu_record("m", 5, 0, true, p_malformed));
  add(gpu_record("m", 6, 0, true, p_tensor));  // sample 6: correct, then a final incorrect turn
  add(gpu_record("m", 6, 1, false, p_dram));
  auto report = build_report({run});
  REQUIRE(report);
  const ProfileDistribution &d = group(*report, "m", "gemm_a").profile;
  // Final correct attempts: samples 0, 1 (turn 1), 2, 4, 5, 6 (turn 0) = 6; profiled: 0, 1, 4, 6 = 4;
  // not profiled: 2 (skipped) and 5 (malformed).
  CHECK(d.attempts == 6);
  CHECK(d.profiled == 4);
  CHECK(d.not_profiled == 2);
  CHECK(d.malformed == 1);
  REQUIRE(d.bound_units.count(kTensor) == 1);
  REQUIRE(d.bound_units.count(kDram) == 1);
  CHECK(d.bound_units.size() == 2);
  CHECK(d.bound_units.at(kTensor).attempts == 3);  // 87.18, 70, 87.18
  CHECK(d.bound_units.at(kTensor).label == "tensor pipe");
  CHECK(d.bound_units.at(kDram).attempts == 1);  // 70 (sample 4)
  CHECK(d.top_unit()->first == kTensor);
  // Tensor pipe over 70, 87.18, 87.18 (sample 4 has no tensor metric): median 87.18, p25 78.59, min 70.
  REQUIRE(d.tensor_pipe.has_value());
  CHECK(d.tensor_pipe->n == 3);
  CHECK(d.tensor_pipe->median == doctest::Approx(87.18));
  CHECK(d.tensor_pipe->p25 == doctest::Approx(78.59));
  CHECK(d.tensor_pipe->p75 == doctest::Approx(87.18));
  CHECK(d.tensor_pipe->min == doctest::Approx(70.0));
  CHECK(d.tensor_pipe->max == doctest::Approx(87.18));
  CHECK(d.tensor_pipe_missing == 1);
  REQUIRE(d.library_tensor_pipe.has_value());  // 95, 99.28, 99.28
  CHECK(d.library_tensor_pipe->median == doctest::Approx(99.28));
  CHECK(d.library_tensor_pipe->min == doctest::Approx(95.0));
  CHECK(report->warnings.size() == 1);
  CHECK(report->warnings[0].find("m/gemm_a/5 turn 0: profile record not read (kernel_profile.metrics") == 0);

  const std::string md = render_markdown(*report);
  CHECK(md.find("## Where the time goes (profiles of the final correct attempts)") != std::string::npos);
  CHECK(md.find("| m | gemm_a | 6 | 4 | 2 | tensor pipe ×3 (87.2%), DRAM throughput ×1 (70.0%) | 87.2 "
                "[78.6–87.2] (70.0–87.2) | 99.3 (95.0–99.3) |") != std::string::npos);
  CHECK(md.find("DRAM throughput = `" + kDram + "`") != std::string::npos);

  const auto files = render_csv(*report);
  const std::string &summary = files.at("summary.csv");
  CHECK(summary.find(",bound_unit,bound_unit_attempts,bound_unit_pct,bound_units,tensor_pipe_median,") !=
        std::string::npos);
  CHECK(summary.find(",6,4,2," + kTensor + ",3,87.18," + kDram + "=1;" + kTensor +
                     "=3,87.18,78.59,87.18,70,87.18,99.28,97.14,99.28,95,99.28\n") != std::string::npos);
  // profiles.csv: one row per final correct attempt; the unprofiled ones have empty figures.
  const std::string &profiles = files.at("profiles.csv");
  CHECK(profiles.rfind("model,task,trajectory_id,turn,profiled,bound_unit_label,bound_unit,bound_unit_pct,"
                       "tensor_pipe_pct,library_tensor_pipe_pct\n",
                       0) == 0);
  CHECK(profiles.find("m,gemm_a,m/gemm_a/1,1,true,tensor pipe," + kTensor + ",70,70,95\n") !=
        std::string::npos);
  CHECK(profiles.find("m,gemm_a,m/gemm_a/2,0,false,,,,,\n") != std::string::npos);
  CHECK(profiles.find("m,gemm_a,m/gemm_a/4,0,true,DRAM throughput," + kDram + ",70,,\n") !=
        std::string::npos);
  CHECK(profiles.find("m/gemm_a/3") == std::string::npos);
  CHECK(std::count(profiles.begin(), profiles.end(), '\n') == 1 + 6);
  // speedups.csv: every timed correct attempt with its profile columns.
  const std::string &speedups = files.at("speedups.csv");
  CHECK(speedups.rfind("model,task,trajectory_id,turn,speedup,bound_unit,bound_unit_pct,tensor_pipe_pct,"
                       "library_tensor_pipe_pct\n",
                       0) == 0);
  CHECK(speedups.find("m,gemm_a,m/gemm_a/1,0,0.8," + kDram + ",80,40,99.28\n") != std::string::npos);
  CHECK(speedups.find("m,gemm_a,m/gemm_a/2,0,0.8,,,,\n") != std::string::npos);

  const std::string html = render_html(*report);
  CHECK(html.find("<h2>Where the time goes (profiles of the final correct attempts)</h2>") !=
        std::string::npos);
  CHECK(html.find("<td>m</td><td>gemm_a</td><td>6</td><td>4</td><td>2</td><td class=\"bound\">tensor pipe "
                  "×3 (87.2%), DRAM throughput ×1 (70.0%)</td><td>87.2 [78.6–87.2] (70.0–87.2)</td>") !=
        std::string::npos);
  CHECK(html.find("<svg class=\"box\"") != std::string::npos);
  CHECK(html.find("class=\"lib\"") != std::string::npos);  // the library's median marked in the box
}

TEST_CASE("report: runs without profiles say \"not profiled\", never 0%") {
  // The committed fixture run predates the profile stage: 7 trajectories were correct at some turn.
  Report r = load_report({"two_models"});
  CHECK(r.overall().profile.attempts == 7);
  CHECK(r.overall().profile.profiled == 0);
  CHECK(r.overall().profile.not_profiled == 7);
  CHECK(!r.overall().profile.tensor_pipe);
  CHECK(r.profiled_attempts.size() == 7);
  const std::string md = render_markdown(r);
  CHECK(md.find("Not profiled: none of the 7 final correct attempts carries a profile") != std::string::npos);
  CHECK(md.find("| tensor pipe %") == std::string::npos);
  const auto files = render_csv(r);
  const std::string &summary = files.at("summary.csv");
  CHECK(summary.find("borderline_incorrect,profile_attempts,profiled,not_profiled,") != std::string::npos);
  CHECK(summary.find(",0,0,7,0,7" + std::string(14, ',') + "\n") != std::string::npos);  // the overall row
  const std::string &speedups = files.at("speedups.csv");
  CHECK(speedups.find("alpha,gemm_a,alpha/gemm_a/1,2,1.25,,,,\n") != std::string::npos);
  CHECK(render_html(r).find("Not profiled: none of the 7 final correct attempts") != std::string::npos);

  // A mixed group: the profiled attempt's figures, the other one counted apart.
  LoadedRun run;
  run.dir = "mixed";
  run.run.run_id = "r";
  run.turns.push_back(TurnRecord::from_json(gpu_record("m", 0, 0, true, profile_stage_fixture())));
  run.turns.push_back(TurnRecord::from_json(gpu_record("m", 1, 0, true, nullptr)));
  auto mixed = build_report({run});
  REQUIRE(mixed);
  CHECK(render_markdown(*mixed).find("| m | gemm_a | 2 | 1 | 1 | tensor pipe ×1 (87.2%) | 87.2 [87.2–87.2] "
                                     "(87.2–87.2) | 99.3 |") != std::string::npos);
}

namespace {

std::size_t count_of(const std::string &text, const std::string &what) {
  std::size_t n = 0;
  for (std::size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

}  // namespace

TEST_CASE("report HTML: axes never measured (no GPU stage ran) are a label, not a 0% line") {
  // Model "cpu" ran without a GPU; model "gpu" had its correctness stage run (one correct attempt).
  nlohmann::json cpu = no_gpu_record("gemm_a", 0, false);
  cpu["model"] = "cpu";
  cpu["trajectory_id"] = "cpu/gemm_a/0";
  LoadedRun run;
  run.dir = "cpu-and-gpu";
  run.run.run_id = "r";
  run.turns.push_back(TurnRecord::from_json(cpu));
  run.turns.push_back(TurnRecord::from_json(gpu_record("gpu", 0, 0, true, nullptr)));
  auto report = build_report({run});
  REQUIRE(report);
  REQUIRE(report->models == std::vector<std::string>{"cpu", "gpu"});
  const std::string cpu_line = fmt::format("fill=\"none\" stroke=\"{}\"", detail::series_color(0));
  const std::string gpu_line = fmt::format("fill=\"none\" stroke=\"{}\"", detail::series_color(1));
  const std::string label = "not measured (no GPU stage ran)";
  const std::string html = render_html(*report);
  // Seven per-turn charts (compile, correct, executed, 4 fast_p): the GPU model has a line in each, the
  // CPU-only one only in compile (a CPU stage); on the other six its legend entry says not measured.
  CHECK(count_of(html, gpu_line) == 7);
  CHECK(count_of(html, cpu_line) == 1);
  CHECK(count_of(html, "<title>cpu turn 0: ") == 1);  // no 0% point either
  CHECK(count_of(html, ">cpu: not measured</text>") == 6);
  CHECK(count_of(html, ">gpu: not measured</text>") == 0);
  // No chart is wholly unmeasured; pass@1 (correct and fast_1.0 rows) and the speedups name the CPU model.
  CHECK(count_of(html, label) == 3);

  // A CPU-only run: every GPU chart is a label, compile keeps its line.
  LoadedRun cpu_only;
  cpu_only.dir = "cpu-only";
  cpu_only.run.run_id = "r";
  cpu_only.turns.push_back(TurnRecord::from_json(cpu));
  auto only = build_report({cpu_only});
  REQUIRE(only);
  const std::string h = render_html(*only);
  CHECK(count_of(h, "<polyline") == 1);
  CHECK(count_of(h, cpu_line) == 1);
  CHECK(count_of(h, "<circle") == 1);  // compile at turn 0; no speedup points
  CHECK(count_of(h, "class=\"nm\" text-anchor=\"middle\">" + label) == 6);  // one per GPU line chart
  CHECK(count_of(h, label) == 6 + 2 + 1);
  CHECK(h.find("<title>cpu turn 0: 0.0%") == std::string::npos);

  // Compared, the CPU-only model has no pass@1 and no difference (not 0 and not -1 "significant").
  ReportOptions o;
  o.compare = {{"cpu", "gpu"}};
  auto cmp = build_report({run}, o);
  REQUIRE(cmp);
  REQUIRE(cmp->comparisons.size() == 1);
  const ComparisonRow &all = cmp->comparisons[0].rows.back();
  CHECK(all.task == "all");
  CHECK(all.measured_a == 0);
  CHECK(all.measured_b == 1);
  const std::string md = render_markdown(*cmp);
  CHECK(md.find("| cpu | gpu | all | 1 | not measured | 1.000 | — | not measured | ") != std::string::npos);
  CHECK(md.find("-1.000") == std::string::npos);
  const std::string csv = render_csv(*cmp).at("comparison.csv");
  CHECK(csv.find("measured_a,measured_b\n") != std::string::npos);
  CHECK(csv.find("cpu,gpu,all,1,,1,,,,") != std::string::npos);
  CHECK(csv.substr(csv.size() - 5) == ",0,1\n");
  const std::string page = render_html(*cmp);
  CHECK(page.find("<td><span class=\"nm\">not measured</span></td><td>1.000</td><td>—</td>") !=
        std::string::npos);
}
