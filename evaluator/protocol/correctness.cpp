#include "evaluator/protocol/correctness.hpp"

#include <cmath>
#include <limits>

#include "evaluator/protocol/error.hpp"
#include "evaluator/protocol/fields.hpp"

namespace ptxbench::protocol {

using codec::Bounds;
using codec::plain_json;
using nlohmann::json;

namespace {

// got / expected: a number; NaN as "NaN" (got only, as the worker writes it); an infinity as null (JSON
// has no infinities), read back as +inf.
json value_json(double v, bool nan_as_text) {
  if (std::isnan(v) && nan_as_text) return "NaN";
  return v;  // a non-finite double dumps as null
}

double value_of(const json &j, const char *key) {
  if (j.is_number()) return j.get<double>();
  if (j.is_null()) return std::numeric_limits<double>::infinity();
  if (j.is_string() && j.get<std::string>() == "NaN") return std::numeric_limits<double>::quiet_NaN();
  throw ProtocolError(key, "expected a number, \"NaN\" or null, got " + j.dump());
}

}  // namespace

// got and expected are read and written apart (a number, "NaN" or null).
template <class IO>
void fields(IO &io, FirstMismatch &m) {
  io("tensor", m.tensor);
  io("index", m.index);
  io("trial", m.trial, Bounds{0});
  io("unwritten", m.unwritten);
}

template <class IO>
void fields(IO &io, CorrectnessWorkload &w) {
  io("name", w.name);
  io("trials", w.trials, Bounds{0});
  io("trials_planned", w.trials_planned, Bounds{0});
  io("passed", w.passed, Bounds{0});
  io("max_abs_error", w.max_abs_error);
  io("max_rel_error", w.max_rel_error);
  io("mismatches", w.mismatches);
  io("first_mismatch", w.first_mismatch);
  io("mismatch_pattern", w.mismatch_pattern);
  io("nan_count", w.nan_count);
  io("unwritten_count", w.unwritten_count);
  io("guard_damage", w.guard_damage);
  io("inputs_mutated", w.inputs_mutated);
  io("deterministic", w.deterministic);
  io("margin", w.margin);
  io("output_elements", w.output_elements);
}

// The workloads are read apart (their errors name the row).
template <class IO>
void fields(IO &io, CorrectnessFigures &f) {
  io("base_seed", f.base_seed);
  io("borderline", f.borderline);
  io("stopped_early", f.stopped_early);
  io("workloads_skipped", f.workloads_skipped);
  io("slowest_launch_ms", f.slowest_launch_ms, Bounds{0});
  io("phase_seconds", f.phase_seconds);
}

void to_json(json &j, const FirstMismatch &m) {
  j = plain_json(m);
  j["got"] = value_json(m.got, /*nan_as_text=*/true);
  j["expected"] = value_json(m.expected, /*nan_as_text=*/false);
}

void from_json(const json &j, FirstMismatch &m) {
  m = FirstMismatch{};
  if (!j.is_object()) throw ProtocolError("", "expected an object, got " + std::string(j.type_name()));
  json rest = j;
  for (const auto &[key, value] : {std::pair{"got", &m.got}, std::pair{"expected", &m.expected}})
    if (const auto it = rest.find(key); it != rest.end()) {
      *value = value_of(*it, key);
      rest.erase(it);
    }
  codec::read_fields(rest, m);
}

void to_json(json &j, const CorrectnessWorkload &w) {
  j = plain_json(w);
  codec::erase_if_null(j, "margin");  // absent in older records; the worker always writes one
}

void from_json(const json &j, CorrectnessWorkload &w) {
  w = CorrectnessWorkload{};
  if (!j.is_object()) throw ProtocolError("", "expected an object, got " + std::string(j.type_name()));
  // An infinite error travels as null (JSON has no infinities).
  json rest = j;
  for (const auto &[key, value] :
       {std::pair{"max_abs_error", &w.max_abs_error}, std::pair{"max_rel_error", &w.max_rel_error}})
    if (const auto it = rest.find(key); it != rest.end() && it->is_null()) {
      *value = std::numeric_limits<double>::infinity();
      rest.erase(it);
    }
  codec::read_fields(rest, w);
}

void to_json(json &j, const CorrectnessFigures &f) {
  j = plain_json(f);
  j["workloads"] = f.workloads;
}

void from_json(const json &j, CorrectnessFigures &f) {
  f = CorrectnessFigures{};
  if (!j.is_object()) throw ProtocolError("", "expected an object, got " + std::string(j.type_name()));
  json rest = j;
  if (const auto it = rest.find("workloads"); it != rest.end()) {
    f.workloads = codec::read_rows<CorrectnessWorkload>(*it, "workloads");
    rest.erase(it);
  }
  codec::read_fields(rest, f);
}

std::optional<CorrectnessFigures> correctness_figures_from_figures(const json &figures) {
  if (!figures.is_object() || figures.empty()) return std::nullopt;
  return figures.get<CorrectnessFigures>();
}

}  // namespace ptxbench::protocol
