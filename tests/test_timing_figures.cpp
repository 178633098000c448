// The timing stage's figures (evaluator/protocol/timing.hpp): one codec whose JSON is the worker's form key
// for key, a recorded figures object read back, older records with their defaults, malformed fields named.
#include <doctest/doctest.h>

#include <fstream>
#include <limits>
#include <string>

#include <nlohmann/json.hpp>

#include "evaluator/protocol/error.hpp"
#include "evaluator/protocol/timing.hpp"

namespace p = ptxbench::protocol;
using nlohmann::json;

namespace {

json recorded_figures() {
  std::ifstream in(std::string(PTXBENCH_TEST_DATA) + "/timing/gemm_h200_timing_figures.json");
  REQUIRE(in.good());
  return json::parse(in);
}

p::TimingWorkload sample_row() {
  p::TimingWorkload w;
  w.name = "M=8192";
  w.candidate_ms = 0.7718;
  w.candidate_spread = 0.0094;
  w.library_ms = 0.7318;
  w.library_spread = 0.0081;
  w.speedup = 0.9482;
  w.speedup_of_medians = 0.9481;
  w.candidate_tflops = 712.3;
  w.library_tflops = 751.2;
  w.sol_floor_ms = 0.5135;
  w.candidate_median_ci = 0.0021;
  w.library_median_ci = 0.0018;
  w.speedup_ratio_ci = 0.0012;
  w.speedup_ci95 = {0.9441, 0.9523};
  w.warmup_launches = 3;
  w.lag1_autocorrelation = {0.12, 0.0, 0.05};
  w.stopped_by = p::TimingStop::ratio;
  w.sampling_seconds = 0.2874;
  w.samples = 64;
  w.library_samples = 64;
  w.reverified.random = p::ReverifiedLaunch{6, 1, 0};
  w.reverified.last_launch = p::ReverifiedLaunch{64, 3, 2};
  w.output_poison_ms = 0.0142;
  w.sm_clock_mhz_after = 1980.0;
  w.flops = 549755813888.0;
  w.bytes = 150994944.0;
  w.peak_tflops = 1070.5;
  w.peak_bandwidth_gbs = 4800.0;
  return w;
}

/// The row as the worker built it by key before the codec (evaluator/worker/timing_stage.cpp at 65cf3c3).
json worker_row_by_key(const p::TimingWorkload &w) {
  json reverify = {{"launch", w.reverified.random->launch},
                   {"input_set", w.reverified.random->input_set},
                   {"mismatches", w.reverified.random->mismatches}};
  reverify["last_launch"] = {{"launch", w.reverified.last_launch->launch},
                             {"input_set", w.reverified.last_launch->input_set},
                             {"mismatches", w.reverified.last_launch->mismatches}};
  json wj = {{"name", w.name},
             {"candidate_ms", w.candidate_ms},
             {"candidate_spread", w.candidate_spread},
             {"library_ms", w.library_ms},
             {"library_spread", w.library_spread},
             {"speedup", w.speedup},
             {"candidate_tflops", w.candidate_tflops},
             {"library_tflops", w.library_tflops},
             {"sol_floor_ms", *w.sol_floor_ms},
             {"candidate_median_ci", w.candidate_median_ci},
             {"library_median_ci", w.library_median_ci},
             {"speedup_ratio_ci", w.speedup_ratio_ci},
             {"speedup_ci95", {w.speedup_ci95.lo, w.speedup_ci95.hi}},
             {"warmup_launches", w.warmup_launches},
             {"lag1_autocorrelation",
              {{"candidate", w.lag1_autocorrelation.candidate},
               {"library", w.lag1_autocorrelation.library},
               {"ratio", w.lag1_autocorrelation.ratio}}},
             {"speedup_of_medians", w.speedup_of_medians},
             {"stopped_by", "ratio"},
             {"sampling_seconds", w.sampling_seconds},
             {"samples", w.samples},
             {"library_samples", w.library_samples},
             {"reverified", reverify},
             {"inputs_mutated", w.inputs_mutated},
             {"output_poison_ms", w.output_poison_ms},
             {"sm_clock_mhz_after", *w.sm_clock_mhz_after},
             {"flops", w.flops},
             {"bytes", w.bytes}};
  wj.update(json{{"peak_tflops", w.peak_tflops}, {"peak_bandwidth_gbs", w.peak_bandwidth_gbs}});
  return wj;
}

}  // namespace

TEST_CASE("timing figures: the codec writes the worker's form byte for byte and reads it back") {
  p::TimingFigures f;
  f.workloads = {sample_row()};
  p::set_speedup_summary(f);
  f.sm_clock_mhz = 1980.0;
  f.library = {"cuBLASLt", "13.0.0", json{{"candidates", 8}, {"config", "in_place"}}};
  f.l2_flush_bytes = 125829120;
  f.phase_seconds = {{"inputs", 0.0123}, {"sampling", 0.2874}};
  CHECK(f.geomean_speedup == doctest::Approx(0.9482));
  CHECK(f.min_speedup == doctest::Approx(0.9482));

  const json j = f;
  CHECK(j["workloads"][0].dump() == worker_row_by_key(f.workloads[0]).dump());
  const json old_figures = {
      {"workloads", json::array({worker_row_by_key(f.workloads[0])})},
      {"geomean_speedup", f.geomean_speedup},
      {"min_speedup", f.min_speedup},
      {"sm_clock_mhz", 1980.0},
      {"library", {{"name", "cuBLASLt"}, {"version", "13.0.0"}, {"algo", f.library.algo}}},
      {"l2_flush_bytes", f.l2_flush_bytes},
      {"phase_seconds", {{"inputs", 0.0123}, {"sampling", 0.2874}}}};
  CHECK(j.dump() == old_figures.dump());  // no policy key until the evaluator adds one

  // value -> text -> value, as between the worker and the evaluator
  const auto back = json::parse(j.dump()).get<p::TimingFigures>();
  CHECK(back == f);
  CHECK(p::timing_figures_from_figures(j) == f);

  // What JSON cannot hold travels as null and reads back: an unbounded interval, unknown clocks and floor.
  p::TimingFigures open = f;
  open.workloads[0].speedup_ci95 = {};
  open.workloads[0].sol_floor_ms.reset();
  open.workloads[0].sm_clock_mhz_after.reset();
  open.workloads[0].reverified = {};
  open.sm_clock_mhz.reset();
  open.workloads[0].candidate_samples_ms = std::vector<double>{0.77, 0.78};
  open.workloads[0].library_samples_ms = std::vector<double>{0.73, 0.74};
  open.policy = p::TimingPolicy{};
  const std::string text = json(open).dump();
  const json row = json::parse(text)["workloads"][0];
  CHECK(row["speedup_ci95"].dump() == "[0.0,null]");
  CHECK(row["sol_floor_ms"].is_null());
  CHECK(row["sm_clock_mhz_after"].is_null());
  CHECK(row["reverified"].is_null());
  CHECK(row["candidate_samples_ms"].size() == 2);
  CHECK(json::parse(text)["sm_clock_mhz"].is_null());
  CHECK(json::parse(text).contains("policy"));
  const auto open_back = json::parse(text).get<p::TimingFigures>();
  CHECK(open_back == open);
  CHECK_FALSE(open_back.workloads[0].speedup_ci95.bounded());
  CHECK(f.workloads[0].speedup_ci95.bounded());
  CHECK_FALSE(json(f)["workloads"][0].contains("candidate_samples_ms"));  // absent unless recorded
}

TEST_CASE("timing figures: stopped_by is a closed enum read and written by one name table") {
  for (p::TimingStop s : {p::TimingStop::medians, p::TimingStop::ratio, p::TimingStop::far_from_library,
                          p::TimingStop::max_seconds})
    CHECK(p::timing_stop_from_string(p::to_string(s)) == s);
  CHECK(p::to_string(p::TimingStop::far_from_library) == "far_from_library");
  CHECK_FALSE(p::timing_stop_from_string("go_on").has_value());
  CHECK_FALSE(p::timing_stop_from_string("").has_value());
}

TEST_CASE("timing figures: a recorded verdict's figures read back; older records take the defaults") {
  const json recorded = recorded_figures();
  const auto f = p::timing_figures_from_figures(recorded);
  REQUIRE(f.has_value());
  REQUIRE(f->workloads.size() == 1);
  const p::TimingWorkload &w = f->workloads[0];
  CHECK(w.name == "M=8192");
  CHECK(w.candidate_ms == doctest::Approx(0.7718));
  CHECK(w.stopped_by == p::TimingStop::ratio);
  CHECK(w.reverified.random->launch == 6);
  CHECK(w.reverified.last_launch->launch == 64);
  CHECK(w.speedup_ci95.hi == doctest::Approx(0.9523));
  CHECK(f->library.name == "cuBLASLt");
  CHECK(f->policy.has_value());
  CHECK(f->policy->input_sets == 4);
  CHECK(f->sm_clock_mhz == 1980.0);
  CHECK(f->phase_seconds.at("sampling") == doctest::Approx(0.2874));
  CHECK(json(*f) == recorded);  // written back, the same figures

  // A record from before the paired ratio, the interval, the warm-up budget and the poison check.
  json old = recorded;
  for (const char *key : {"speedup_ratio_ci", "speedup_ci95", "warmup_launches", "lag1_autocorrelation",
                          "inputs_mutated", "output_poison_ms", "stopped_by"})
    old["workloads"][0].erase(key);
  old.erase("policy");
  const auto o = p::timing_figures_from_figures(old);
  REQUIRE(o.has_value());
  CHECK(o->workloads[0].speedup_ratio_ci == 1);
  CHECK(o->workloads[0].speedup_ci95.lo == 0);
  CHECK(o->workloads[0].speedup_ci95.hi == std::numeric_limits<double>::infinity());
  CHECK(o->workloads[0].warmup_launches == 0);
  CHECK(o->workloads[0].lag1_autocorrelation == p::TimingAutocorrelation{});
  CHECK_FALSE(o->workloads[0].inputs_mutated);
  CHECK(o->workloads[0].stopped_by == p::TimingStop::max_seconds);
  CHECK_FALSE(o->policy.has_value());
  CHECK(o->workloads[0].speedup == doctest::Approx(0.9482));

  // Nothing timed: a skipped stage, or a fault before the first workload (only the evaluator's policy).
  CHECK_FALSE(p::timing_figures_from_figures(json::object()).has_value());
  CHECK_FALSE(p::timing_figures_from_figures(json{{"policy", recorded["policy"]}}).has_value());
  CHECK_FALSE(p::timing_figures_from_figures(json(nullptr)).has_value());
}

TEST_CASE("timing figures: a malformed field is a ProtocolError naming it") {
  const json recorded = recorded_figures();
  auto field_of = [](const json &figures) -> std::string {
    try {
      (void)p::timing_figures_from_figures(figures);
    } catch (const p::ProtocolError &e) {
      return e.field();
    }
    return "(accepted)";
  };
  json bad = recorded;
  bad["workloads"][0]["stopped_by"] = "patience";
  CHECK(field_of(bad) == "workloads[0].stopped_by");
  bad = recorded;
  bad["workloads"][0]["candidate_ms"] = "fast";
  CHECK(field_of(bad) == "workloads[0].candidate_ms");
  bad = recorded;
  bad["workloads"][0]["speedup"] = -1;
  CHECK(field_of(bad) == "workloads[0].speedup");
  bad = recorded;
  bad["workloads"][0]["speedup_ci95"] = json::array({1.0});
  CHECK(field_of(bad) == "workloads[0].speedup_ci95");
  bad = recorded;
  bad["workloads"][0]["reverified"]["last_launch"]["mismatches"] = "none";
  CHECK(field_of(bad) == "workloads[0].reverified.last_launch.mismatches");
  bad = recorded;
  bad["workloads"][0]["candiate_ms"] = 1.0;  // a misspelt key is not dropped silently
  CHECK(field_of(bad) == "workloads[0].candiate_ms");
  bad = recorded;
  bad["geomean"] = 1.0;
  CHECK(field_of(bad) == "geomean");
  bad = recorded;
  bad["policy"]["min_samples"] = 0;
  CHECK(field_of(bad) == "policy.min_samples");
  bad = recorded;
  bad["workloads"] = json::object();
  CHECK(field_of(bad) == "workloads");
  try {
    bad = recorded;
    bad["workloads"][0]["stopped_by"] = "patience";
    (void)p::timing_figures_from_figures(bad);
  } catch (const p::ProtocolError &e) {
    CHECK(std::string(e.what()).find("far_from_library") != std::string::npos);  // names the known values
  }
}
