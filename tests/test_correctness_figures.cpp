// The correctness stage's figures (evaluator/protocol/correctness.hpp): one codec whose JSON is the worker's
// former by-key JSON byte for byte, round trips, an older record with its defaults, malformed fields named.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "evaluator/protocol/correctness.hpp"
#include "evaluator/protocol/error.hpp"

namespace p = ptxbench::protocol;
using nlohmann::json;

namespace {

// The worker's former by-key writers (correctness_stage.cpp: the first mismatch as run_trial built it,
// workload_check_json), fed the values the worker now puts in the typed row, kept as the reference the
// codec must reproduce.
json former_row(const p::CorrectnessWorkload &c) {
  json worst_first = nullptr;
  if (const auto &f = c.first_mismatch)
    worst_first = {{"tensor", f->tensor},
                   {"index", f->index},
                   {"got", std::isnan(f->got) ? json("NaN") : json(f->got)},
                   {"expected", f->expected},
                   {"trial", f->trial},
                   {"unwritten", f->unwritten}};
  return {{"name", c.name},
          {"trials", c.trials},
          {"trials_planned", c.trials_planned},
          {"passed", c.passed},
          {"max_abs_error", c.max_abs_error},
          {"max_rel_error", c.max_rel_error},
          {"mismatches", c.mismatches},
          {"first_mismatch", worst_first},
          {"mismatch_pattern", c.mismatch_pattern ? json(*c.mismatch_pattern) : json(nullptr)},
          {"nan_count", c.nan_count},
          {"unwritten_count", c.unwritten_count},
          {"guard_damage", c.guard_damage},
          {"inputs_mutated", c.inputs_mutated},
          {"deterministic", c.deterministic},
          {"margin", *c.margin},
          {"output_elements", c.output_elements}};
}

// A row: name, trials run, planned, passed, errors, mismatches, NaN, unwritten, guard bytes, inputs
// changed, deterministic.
p::CorrectnessWorkload row(const char *name, int run, int planned, int passed, double abs, double rel,
                           std::uint64_t mismatches, std::uint64_t nans, std::uint64_t unwritten,
                           std::uint64_t damage, bool mutated, bool deterministic) {
  return {.name = name,
          .trials = run,
          .trials_planned = planned,
          .passed = passed,
          .max_abs_error = abs,
          .max_rel_error = rel,
          .mismatches = mismatches,
          .nan_count = nans,
          .unwritten_count = unwritten,
          .guard_damage = damage,
          .inputs_mutated = mutated,
          .deterministic = deterministic};
}

p::WorkloadMargin margin(double ratio, bool borderline, int run, int failed, int extra, const char *stop) {
  p::WorkloadMargin m;
  m.tensors = {{"C", ratio, 1}};
  m.max_error_ratio = ratio;
  m.borderline = borderline;
  m.trials_run = run;
  m.trials_failed = failed;
  m.extra_trials = extra;
  m.failure_rate = run ? static_cast<double>(failed) / run : 0;
  m.extra_stopped_by = stop;
  return m;
}

std::vector<p::CorrectnessWorkload> rows() {
  const double inf = std::numeric_limits<double>::infinity();
  auto pass = row("M=8192", 3, 3, 3, 0.0078125, 0.0039, 0, 0, 0, 0, false, true);
  pass.margin = margin(0.31, false, 3, 0, 0, "");
  pass.output_elements = 8192ull * 7168;
  auto wrong = row("M=3000", 1, 3, 0, 41.5, 1.0, 1234, 512, 512, 64, true, true);
  wrong.first_mismatch =
      p::FirstMismatch{"C", {2944, 17}, std::numeric_limits<double>::quiet_NaN(), 2.25, 1, true};
  p::MismatchPattern pattern;
  pattern.trial = 1;
  p::TensorMismatches t;
  t.tensor = "C";
  t.elements = 3000ull * 7168;
  t.mismatches = 1234;
  t.share = 1234.0 / static_cast<double>(t.elements);
  t.worst = {{{2944, 17}, 0, 2.25, 0, "unwritten"}};
  pattern.tensors = {t};
  wrong.mismatch_pattern = pattern;
  wrong.margin = margin(3.4e38, false, 1, 1, 0, "");
  wrong.output_elements = 3000ull * 7168;
  auto edge = row("M=77", 11, 3, 8, 0.02, 0.0081, 3, 0, 0, 0, false, false);
  edge.first_mismatch = p::FirstMismatch{"C", {5, 70}, 1.0234375, 1.0078125, 4, false};
  edge.margin = margin(1.04, true, 11, 3, 8, "budget");
  edge.output_elements = 77ull * 7168;
  auto infinite = row("M=1", 1, 3, 0, inf, 1, 1, 0, 0, 0, false, true);
  infinite.first_mismatch = p::FirstMismatch{"C", {0, 0}, inf, 0.5, 1, false};
  infinite.margin = margin(3.4e38, false, 1, 1, 0, "");
  infinite.output_elements = 7168;
  return {pass, wrong, edge, infinite};
}

}  // namespace

TEST_CASE("correctness figures: the codec writes the former by-key JSON byte for byte") {
  p::CorrectnessFigures figures;
  json former_rows = json::array();
  for (const p::CorrectnessWorkload &w : rows()) {
    CAPTURE(w.name);
    CHECK(json(w).dump() == former_row(w).dump());
    // And it reads back to the same JSON (NaN and infinities included).
    CHECK(json(json(w).get<p::CorrectnessWorkload>()).dump() == former_row(w).dump());
    figures.workloads.push_back(w);
    former_rows.push_back(former_row(w));
  }
  figures.base_seed = 0x9E3779B97F4A7C15ull;
  figures.borderline = true;
  figures.stopped_early = true;
  figures.workloads_skipped = 2;
  figures.slowest_launch_ms = 1.25;
  figures.phase_seconds = {{"buffers", 0.01}, {"fill", 0.02}, {"reference", 0.2}, {"checks", 0.03}};
  const json former = {{"workloads", former_rows},
                       {"base_seed", figures.base_seed},
                       {"borderline", true},
                       {"stopped_early", true},
                       {"workloads_skipped", std::size_t{2}},
                       {"slowest_launch_ms", 1.25},
                       {"phase_seconds", figures.phase_seconds}};
  CHECK(json(figures).dump() == former.dump());
  const auto back = p::correctness_figures_from_figures(former);
  REQUIRE(back.has_value());
  CHECK(json(*back).dump() == former.dump());
  CHECK(back->workloads[1].first_mismatch->unwritten);
  CHECK(std::isnan(back->workloads[1].first_mismatch->got));
  CHECK(std::isinf(back->workloads[3].first_mismatch->got));
  CHECK(std::isinf(back->workloads[3].max_abs_error));
  CHECK(back->workloads[2].margin->borderline);
  CHECK_FALSE(back->workloads[0].failed());
  CHECK(back->workloads[1].failed());
  CHECK(back->workloads[2].failed());  // 8 of 11 passed, and the relaunch differed
}

TEST_CASE("correctness figures: nothing written, and an older record with the defaults") {
  CHECK_FALSE(p::correctness_figures_from_figures(json::object()).has_value());
  CHECK_FALSE(p::correctness_figures_from_figures(json()).has_value());
  // Before margins, patterns, planned trials and the stage-level keys.
  const json older = json::parse(R"({"workloads": [
      {"name": "M=4096", "trials": 3, "passed": 3, "max_abs_error": 0.01, "max_rel_error": 0.002,
       "mismatches": 0, "first_mismatch": null, "nan_count": 0, "unwritten_count": 0, "guard_damage": 0,
       "inputs_mutated": false, "deterministic": true},
      {"name": "M=3000", "trials": 1, "passed": 0, "mismatches": 7,
       "first_mismatch": {"tensor": "C", "index": [1, 2], "got": 1.5, "expected": 2.25}}]})");
  const auto f = p::correctness_figures_from_figures(older);
  REQUIRE(f.has_value());
  REQUIRE(f->workloads.size() == 2);
  CHECK_FALSE(f->workloads[0].margin.has_value());
  CHECK_FALSE(f->workloads[0].mismatch_pattern.has_value());
  CHECK(f->workloads[0].trials_planned == 0);
  CHECK_FALSE(f->borderline);
  CHECK(f->base_seed == 0);
  CHECK(f->workloads[1].first_mismatch->index == std::vector<std::int64_t>{1, 2});
  CHECK(f->workloads[1].first_mismatch->trial == 0);
  CHECK(f->workloads[1].deterministic);
  CHECK(f->workloads[1].failed());
  // Written back, a record without a margin stays without one.
  CHECK_FALSE(json(f->workloads[0]).contains("margin"));
}

TEST_CASE("correctness figures: malformed fields are refused, naming the field") {
  const json good = json(rows()[1]);
  const auto error_of = [](const json &rows) {
    try {
      (void)json{{"workloads", rows}}.get<p::CorrectnessFigures>();
    } catch (const p::ProtocolError &e) {
      return e.field();
    }
    return std::string("(read)");
  };
  const auto with = [&](const char *key, const json &value) {
    json row = good;
    row[key] = value;
    return json::array({good, row});
  };
  CHECK(error_of(json::array({good})) == "(read)");
  CHECK(error_of(with("passed", -1)) == "workloads[1].passed");
  CHECK(error_of(with("guard_damage", true)) == "workloads[1].guard_damage");
  CHECK(error_of(with("deterministic", "no")) == "workloads[1].deterministic");
  CHECK(error_of(with("max_abs_error", "big")) == "workloads[1].max_abs_error");
  CHECK(error_of(with("surprise", 1)) == "workloads[1].surprise");
  json first = good["first_mismatch"];
  first["got"] = "nan";
  CHECK(error_of(with("first_mismatch", first)) == "workloads[1].first_mismatch.got");
  first = good["first_mismatch"];
  first["index"] = "2944,17";
  CHECK(error_of(with("first_mismatch", first)) == "workloads[1].first_mismatch.index");
  json m = good["margin"];
  m["trials_run"] = "eleven";
  CHECK(error_of(with("margin", m)).rfind("workloads[1].margin", 0) == 0);
  json pattern = good["mismatch_pattern"];
  pattern["tensors"] = 3;
  CHECK(error_of(with("mismatch_pattern", pattern)).rfind("workloads[1].mismatch_pattern", 0) == 0);
  CHECK(error_of(json::object()) == "workloads");
  try {
    (void)json{{"workloads", json::array()}, {"borderline", "yes"}}.get<p::CorrectnessFigures>();
    FAIL("read");
  } catch (const p::ProtocolError &e) {
    CHECK(e.field() == "borderline");
  }
}
