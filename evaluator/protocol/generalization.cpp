#include "evaluator/protocol/generalization.hpp"

#include "evaluator/protocol/error.hpp"
#include "evaluator/protocol/fields.hpp"
#include "util/enum_names.hpp"

namespace ptxbench::protocol {

using codec::plain_json;
using nlohmann::json;

namespace {

constexpr util::EnumName<HiddenKind> kHiddenKindNames[] = {{HiddenKind::ok, "ok"},
                                                           {HiddenKind::incorrect, "incorrect"},
                                                           {HiddenKind::nondeterministic, "nondeterministic"},
                                                           {HiddenKind::skipped, "skipped"}};

// The keys of a row beside the correctness workload's fields.
constexpr const char *kKind = "kind";
constexpr const char *kCorrect = "correct";
constexpr const char *kTiming = "timing";
constexpr const char *kSkipped = "skipped";

// A skipped row: {name, kind, reason}.
struct SkippedRow {
  std::string name;
  std::string reason;
};

template <class IO>
void fields(IO &io, SkippedRow &r) {
  io("name", r.name);
  io("reason", r.reason);
}

// The row's timing: a TimingWorkload, or {skipped: why}.
void read_timing(const json &j, HiddenWorkload &w) {
  try {
    if (j.is_object() && j.size() == 1 && j.contains(kSkipped)) {
      if (!j[kSkipped].is_string())
        throw ProtocolError(kSkipped, "expected a string, got " + j[kSkipped].dump());
      w.timing_skipped = j[kSkipped].get<std::string>();
    } else {
      w.timing = j.get<TimingWorkload>();
    }
  } catch (const ProtocolError &e) {
    throw ProtocolError(std::string(kTiming) + (e.field().empty() ? "" : "." + e.field()), e.message());
  }
}

}  // namespace

std::string_view to_string(HiddenKind k) {
  return util::enum_to_string(kHiddenKindNames, k);
}

std::optional<HiddenKind> hidden_kind_from_string(std::string_view name) {
  return util::enum_from_string(kHiddenKindNames, name);
}

void to_json(json &j, HiddenKind k) {
  j = std::string(to_string(k));
}

void from_json(const json &j, HiddenKind &k) {
  codec::read_enum(j, k, kHiddenKindNames);
}

void to_json(json &j, const HiddenWorkload &w) {
  if (w.kind == HiddenKind::skipped || !w.check) {
    j = plain_json(SkippedRow{w.name, w.reason});
    j[kKind] = w.kind;
    return;
  }
  j = *w.check;
  j["name"] = w.name;
  j[kKind] = w.kind;
  j[kCorrect] = w.correct();
  if (w.timing)
    j[kTiming] = *w.timing;
  else if (w.timing_skipped)
    j[kTiming] = json{{kSkipped, *w.timing_skipped}};
}

void from_json(const json &j, HiddenWorkload &w) {
  w = HiddenWorkload{};
  if (!j.is_object()) throw ProtocolError("", "expected an object, got " + std::string(j.type_name()));
  const auto kind = j.find(kKind);
  if (kind == j.end()) throw ProtocolError(kKind, "missing");
  try {
    w.kind = kind->get<HiddenKind>();
  } catch (const ProtocolError &e) {
    throw ProtocolError(kKind, e.message());
  }
  json rest = j;
  rest.erase(kKind);
  if (w.kind == HiddenKind::skipped) {
    SkippedRow row;
    codec::read_plain(rest, row);
    w.name = row.name;
    w.reason = row.reason;
    return;
  }
  if (const auto it = rest.find(kCorrect); it != rest.end()) {
    if (!it->is_boolean()) throw ProtocolError(kCorrect, "expected true or false");
    if (it->get<bool>() != w.correct())
      throw ProtocolError(kCorrect, "says " + it->dump() + " for kind " + std::string(to_string(w.kind)));
    rest.erase(it);
  }
  if (const auto it = rest.find(kTiming); it != rest.end()) {
    read_timing(*it, w);
    rest.erase(it);
  }
  w.check = rest.get<CorrectnessWorkload>();
  w.name = w.check->name;
}

template <class IO>
void fields(IO &io, GeneralizationFigures &f) {
  io("total", f.total);
  io("passed", f.passed);
  io("in_progress", f.in_progress);
  io("phase_seconds", f.phase_seconds);
}

void to_json(json &j, const GeneralizationFigures &f) {
  j = plain_json(f);
  codec::erase_nulls(j);
  j["workloads"] = f.workloads;
}

void from_json(const json &j, GeneralizationFigures &f) {
  f = GeneralizationFigures{};
  if (!j.is_object()) throw ProtocolError("", "expected an object, got " + std::string(j.type_name()));
  json rest = j;
  if (const auto it = rest.find("workloads"); it != rest.end()) {
    f.workloads = codec::read_rows<HiddenWorkload>(*it, "workloads");
    rest.erase(it);
  }
  codec::read_fields(rest, f);
}

std::optional<GeneralizationFigures> generalization_figures_from_figures(const json &figures) {
  return codec::figures_record<GeneralizationFigures>(figures);
}

}  // namespace ptxbench::protocol
