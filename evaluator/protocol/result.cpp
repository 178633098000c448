#include "evaluator/protocol/result.hpp"

#include <algorithm>

#include "evaluator/protocol/error.hpp"
#include "evaluator/protocol/job.hpp"

namespace ptxbench::protocol {

using nlohmann::json;

namespace {

template <class T>
T field_or(const json &j, const char *key, T fallback) {
  const auto it = j.find(key);
  if (it == j.end() || it->is_null()) return fallback;
  try {
    return it->get<T>();
  } catch (const json::exception &e) {
    throw ProtocolError(key, e.what());
  }
}

void require_object(const json &j, const char *what) {
  if (!j.is_object())
    throw ProtocolError("", std::string(what) + " is not a JSON object: " + j.dump().substr(0, 80));
}

}  // namespace

void to_json(json &j, const Diagnostic &d) {
  j = json{{"severity", d.severity}, {"text", d.text}, {"line", d.line ? json(*d.line) : json(nullptr)}};
}

void from_json(const json &j, Diagnostic &d) {
  require_object(j, "a diagnostic");
  d.severity = field_or<std::string>(j, "severity", "error");
  if (!j.contains("text")) throw ProtocolError("text", "missing");
  d.text = field_or<std::string>(j, "text", "");
  d.line = j.contains("line") && j["line"].is_number_integer() ? std::optional<int>(j["line"].get<int>())
                                                               : std::nullopt;
}

void to_json(json &j, const StageResult &s) {
  j = json{{"status", s.status},
           {"summary", s.summary},
           {"diagnostics", s.diagnostics},
           {"figures", s.figures},
           {"wall_seconds", s.wall_seconds}};
}

void from_json(const json &j, StageResult &s) {
  require_object(j, "a stage");
  s = StageResult{};
  s.summary = field_or<std::string>(j, "summary", "");
  if (const auto it = j.find("diagnostics"); it != j.end() && it->is_array())
    for (const auto &d : *it) s.diagnostics.push_back(d.get<Diagnostic>());
  s.figures = field_or<json>(j, "figures", json::object());
  s.wall_seconds = field_or<double>(j, "wall_seconds", 0.0);
  if (!j.contains("status")) throw ProtocolError("status", "missing");
  const json &status = j["status"];
  const auto known = status.is_string() ? status_from_string(status.get<std::string>()) : std::nullopt;
  if (known) {
    s.status = *known;
  } else {
    const std::string why = "unknown stage status " + status.dump() + " (summary was: " + s.summary + ")";
    s.status = Status::runtime_error;
    s.summary = why;
    s.diagnostics.insert(s.diagnostics.begin(), Diagnostic{"error", why, std::nullopt});
  }
}

void to_json(json &j, const FatalStage &f) {
  j = json{{"stage", f.stage}, {"status", f.status}};
}

void from_json(const json &j, FatalStage &f) {
  require_object(j, "fatal");
  f.stage = field_or<std::string>(j, "stage", "");
  f.status = status_from_string(field_or<std::string>(j, "status", "")).value_or(Status::runtime_error);
}

void to_json(json &j, const WorkerResult &r) {
  j = json{{"environment", r.environment},
           {"base_seed", r.base_seed},
           {"stages", r.stages},
           {"finished", r.finished},
           {"worker", r.worker}};
  if (r.fatal) j["fatal"] = *r.fatal;
}

void from_json(const json &j, WorkerResult &r) {
  require_object(j, "the result");
  r = WorkerResult{};
  r.environment = field_or<json>(j, "environment", json::object());
  r.base_seed = field_or<std::uint64_t>(j, "base_seed", 0);
  if (const auto it = j.find("stages"); it != j.end()) {
    require_object(*it, "stages");
    for (const auto &[name, stage] : it->items()) {
      try {
        r.stages[name] = stage.get<StageResult>();
      } catch (const ProtocolError &e) {
        throw ProtocolError("stages." + name + (e.field().empty() ? "" : "." + e.field()), e.message());
      }
    }
  }
  r.finished = field_or<bool>(j, "finished", false);
  if (j.contains("fatal") && !j["fatal"].is_null()) r.fatal = j["fatal"].get<FatalStage>();
  r.worker = field_or<json>(j, "worker", json::object());
}

std::string crashed_stage(const std::map<std::string, StageResult> &written,
                          const std::vector<std::string> &wanted) {
  if (const auto g = written.find("generalization");
      g != written.end() && g->second.figures.is_object() && g->second.figures.contains("in_progress"))
    return "generalization";
  for (const char *name : kGpuStageNames)
    if (std::find(wanted.begin(), wanted.end(), name) != wanted.end() && !written.contains(name)) return name;
  return "execution";
}

}  // namespace ptxbench::protocol
