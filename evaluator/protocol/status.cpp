#include "evaluator/protocol/status.hpp"

#include "evaluator/protocol/error.hpp"

namespace ptxbench::protocol {

std::string_view to_string(Status s) {
  switch (s) {
    case Status::ok: return "ok";
    case Status::no_kernel: return "no_kernel";
    case Status::bad_manifest: return "bad_manifest";
    case Status::static_error: return "static_error";
    case Status::compile_error: return "compile_error";
    case Status::launch_error: return "launch_error";
    case Status::runtime_error: return "runtime_error";
    case Status::timeout: return "timeout";
    case Status::incorrect: return "incorrect";
    case Status::nondeterministic: return "nondeterministic";
    case Status::suspicious: return "suspicious";
    case Status::skipped: return "skipped";
  }
  return "unknown";
}

std::optional<Status> status_from_string(std::string_view text) {
  for (Status s : kAllStatuses)
    if (to_string(s) == text) return s;
  return std::nullopt;
}

void to_json(nlohmann::json &j, Status s) {
  j = std::string(to_string(s));
}

void from_json(const nlohmann::json &j, Status &s) {
  if (!j.is_string()) throw ProtocolError("", "a status is a string, got " + j.dump());
  const auto text = j.get<std::string>();
  const auto parsed = status_from_string(text);
  if (!parsed) throw ProtocolError("", "unknown status '" + text + "'");
  s = *parsed;
}

}  // namespace ptxbench::protocol
