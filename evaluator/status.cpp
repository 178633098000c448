#include "evaluator/status.hpp"

namespace ptxbench::evaluator {

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

}  // namespace ptxbench::evaluator
