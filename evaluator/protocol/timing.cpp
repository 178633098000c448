#include "evaluator/protocol/timing.hpp"

#include <algorithm>
#include <cmath>

#include "evaluator/protocol/error.hpp"
#include "evaluator/protocol/fields.hpp"
#include "util/enum_names.hpp"

namespace ptxbench::protocol {

using codec::Bounds;
using codec::erase_if_null;
using codec::plain_json;
using codec::read_plain;
using nlohmann::json;

namespace {

// Written verbatim as `stopped_by`: never rename one.
constexpr util::EnumName<TimingStop> kTimingStopNames[] = {{TimingStop::medians, "medians"},
                                                           {TimingStop::ratio, "ratio"},
                                                           {TimingStop::far_from_library, "far_from_library"},
                                                           {TimingStop::max_seconds, "max_seconds"}};

}  // namespace

std::string_view to_string(TimingStop s) {
  return util::enum_to_string(kTimingStopNames, s);
}

std::optional<TimingStop> timing_stop_from_string(std::string_view name) {
  return util::enum_from_string(kTimingStopNames, name);
}

template <class IO>
void fields(IO &io, ReverifiedLaunch &r) {
  io("launch", r.launch, Bounds{0});
  io("input_set", r.input_set, Bounds{0});
  io("mismatches", r.mismatches);
}

template <class IO>
void fields(IO &io, TimingAutocorrelation &a) {
  io("candidate", a.candidate, Bounds{-1, 1});
  io("library", a.library, Bounds{-1, 1});
  io("ratio", a.ratio, Bounds{-1, 1});
}

template <class IO>
void fields(IO &io, TimingWorkload &w) {
  io("name", w.name);
  io("candidate_ms", w.candidate_ms, Bounds{0});
  io("candidate_spread", w.candidate_spread, Bounds{0});
  io("library_ms", w.library_ms, Bounds{0});
  io("library_spread", w.library_spread, Bounds{0});
  io("speedup", w.speedup, Bounds{0});
  io("speedup_of_medians", w.speedup_of_medians, Bounds{0});
  io("candidate_tflops", w.candidate_tflops, Bounds{0});
  io("library_tflops", w.library_tflops, Bounds{0});
  io("sol_floor_ms", w.sol_floor_ms, Bounds{0});
  io("candidate_median_ci", w.candidate_median_ci, Bounds{0});
  io("library_median_ci", w.library_median_ci, Bounds{0});
  io("speedup_ratio_ci", w.speedup_ratio_ci, Bounds{0});
  io("speedup_ci95", w.speedup_ci95);
  io("warmup_launches", w.warmup_launches, Bounds{0});
  io("lag1_autocorrelation", w.lag1_autocorrelation);
  io("stopped_by", w.stopped_by);
  io("sampling_seconds", w.sampling_seconds, Bounds{0});
  io("samples", w.samples);
  io("library_samples", w.library_samples);
  io("reverified", w.reverified);
  io("inputs_mutated", w.inputs_mutated);
  io("output_poison_ms", w.output_poison_ms, Bounds{0});
  io("sm_clock_mhz_after", w.sm_clock_mhz_after, Bounds{0});
  io("flops", w.flops, Bounds{0});
  io("bytes", w.bytes, Bounds{0});
  io("peak_tflops", w.peak_tflops, Bounds{0});
  io("peak_bandwidth_gbs", w.peak_bandwidth_gbs, Bounds{0});
  io("candidate_samples_ms", w.candidate_samples_ms);
  io("library_samples_ms", w.library_samples_ms);
}

template <class IO>
void fields(IO &io, TimingLibrary &l) {
  io("name", l.name);
  io("version", l.version);
  io("algo", l.algo);
}

// The workloads are read apart (their errors name the row: "workloads[1].stopped_by").
template <class IO>
void fields(IO &io, TimingFigures &f) {
  io("geomean_speedup", f.geomean_speedup, Bounds{0});
  io("min_speedup", f.min_speedup, Bounds{0});
  io("sm_clock_mhz", f.sm_clock_mhz, Bounds{0});
  io("library", f.library);
  io("l2_flush_bytes", f.l2_flush_bytes);
  io("phase_seconds", f.phase_seconds);
  io("policy", f.policy);
}

bool SpeedupInterval::bounded() const {
  return std::isfinite(lo) && std::isfinite(hi) && lo > 0 && hi > 0;
}

bool TimingFigures::far_from_library() const {
  return std::any_of(workloads.begin(), workloads.end(),
                     [](const TimingWorkload &w) { return w.stopped_by == TimingStop::far_from_library; });
}

void set_speedup_summary(TimingFigures &f) {
  double log_sum = 0;
  f.min_speedup = f.workloads.empty() ? 0 : f.workloads[0].speedup;
  for (const auto &w : f.workloads) {
    log_sum += std::log(std::max(w.speedup, 1e-12));
    f.min_speedup = std::min(f.min_speedup, w.speedup);
  }
  f.geomean_speedup = f.workloads.empty() ? 0 : std::exp(log_sum / static_cast<double>(f.workloads.size()));
}

void to_json(json &j, TimingStop s) {
  j = std::string(to_string(s));
}

void from_json(const json &j, TimingStop &s) {
  codec::read_enum(j, s, kTimingStopNames);
}

void to_json(json &j, const SpeedupInterval &i) {
  j = json::array({i.lo, i.hi});  // a non-finite end is written as null
}

void from_json(const json &j, SpeedupInterval &i) {
  if (!j.is_array() || j.size() != 2) throw ProtocolError("", "expected [lo, hi], got " + j.dump());
  if (!j[0].is_number()) throw ProtocolError("", "lo: expected a number, got " + j[0].dump());
  if (!j[1].is_number() && !j[1].is_null())
    throw ProtocolError("", "hi: expected a number or null, got " + j[1].dump());
  i.lo = j[0].get<double>();
  i.hi = j[1].is_null() ? std::numeric_limits<double>::infinity() : j[1].get<double>();
  if (i.lo < 0 || i.hi < i.lo) throw ProtocolError("", "expected 0 <= lo <= hi, got " + j.dump());
}

void to_json(json &j, const ReverifiedLaunch &r) {
  j = plain_json(r);
}
void from_json(const json &j, ReverifiedLaunch &r) {
  read_plain(j, r);
}

// null when neither launch was checked; the random launch's fields at the top, the last one under
// `last_launch`.
void to_json(json &j, const Reverified &r) {
  if (r.empty()) {
    j = nullptr;
    return;
  }
  j = r.random ? json(*r.random) : json::object();
  if (r.last_launch) j["last_launch"] = *r.last_launch;
}

void from_json(const json &j, Reverified &r) {
  r = Reverified{};
  if (j.is_null()) return;
  if (!j.is_object()) throw ProtocolError("", "expected an object or null, got " + j.dump());
  r.last_launch = codec::record_in_figures<ReverifiedLaunch>(j, "last_launch");
  json random = j;
  random.erase("last_launch");
  if (!random.empty()) r.random = random.get<ReverifiedLaunch>();
}

void to_json(json &j, const TimingAutocorrelation &a) {
  j = plain_json(a);
}
void from_json(const json &j, TimingAutocorrelation &a) {
  read_plain(j, a);
}

void to_json(json &j, const TimingWorkload &w) {
  j = plain_json(w);
  erase_if_null(j, "candidate_samples_ms");
  erase_if_null(j, "library_samples_ms");
}
void from_json(const json &j, TimingWorkload &w) {
  read_plain(j, w);
}

void to_json(json &j, const TimingLibrary &l) {
  j = plain_json(l);
}
void from_json(const json &j, TimingLibrary &l) {
  read_plain(j, l);
}

void to_json(json &j, const TimingFigures &f) {
  j = codec::write_fields(const_cast<TimingFigures &>(f));
  j["workloads"] = f.workloads;
  erase_if_null(j, "policy");
}

void from_json(const json &j, TimingFigures &f) {
  f = TimingFigures{};
  if (!j.is_object()) throw ProtocolError("", "expected an object, got " + std::string(j.type_name()));
  json rest = j;
  if (const auto it = rest.find("workloads"); it != rest.end()) {
    f.workloads = codec::read_rows<TimingWorkload>(*it, "workloads");
    rest.erase(it);
  }
  codec::read_fields(rest, f);
}

std::optional<TimingFigures> timing_figures_from_figures(const json &figures) {
  if (!figures.is_object() || figures.empty()) return std::nullopt;
  if (figures.size() == 1 && figures.contains("policy")) return std::nullopt;  // nothing was timed
  return figures.get<TimingFigures>();
}

}  // namespace ptxbench::protocol
