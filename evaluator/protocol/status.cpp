#include "evaluator/protocol/status.hpp"

#include "evaluator/protocol/error.hpp"
#include "util/enum_names.hpp"

namespace ptxbench::protocol {
namespace {

// Written verbatim into traces and verdicts: never rename one.
constexpr util::EnumName<Status> kStatusNames[] = {{Status::ok, "ok"},
                                                   {Status::no_kernel, "no_kernel"},
                                                   {Status::bad_manifest, "bad_manifest"},
                                                   {Status::static_error, "static_error"},
                                                   {Status::compile_error, "compile_error"},
                                                   {Status::launch_error, "launch_error"},
                                                   {Status::runtime_error, "runtime_error"},
                                                   {Status::timeout, "timeout"},
                                                   {Status::incorrect, "incorrect"},
                                                   {Status::nondeterministic, "nondeterministic"},
                                                   {Status::suspicious, "suspicious"},
                                                   {Status::skipped, "skipped"}};
static_assert(std::size(kStatusNames) == std::size(kAllStatuses), "every status has a name");

}  // namespace

std::string_view to_string(Status s) {
  const std::string_view name = util::enum_to_string(kStatusNames, s);
  return name.empty() ? "unknown" : name;
}

std::optional<Status> status_from_string(std::string_view text) {
  return util::enum_from_string(kStatusNames, text);
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
