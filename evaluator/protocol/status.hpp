// The closed set of outcomes a stage or a whole evaluation can have: what the worker reports per stage
// and what the verdict reports overall. Written verbatim into traces; never reorder the strings.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace ptxbench::protocol {

enum class Status {
  ok,
  no_kernel,         ///< response has no kernel block (or no manifest)
  bad_manifest,      ///< manifest JSON invalid, unknown symbol, bad expression, param mismatch
  static_error,      ///< PTX lexer/static checks failed (target, entry, params, forbidden state)
  compile_error,     ///< NVRTC or ptxas failed
  launch_error,      ///< the device refused the launch configuration
  runtime_error,     ///< the kernel faulted (illegal address, trap, ...) or the worker crashed
  timeout,           ///< wall-clock limit hit (hang)
  incorrect,         ///< values outside tolerance, guard damage, inputs mutated, unwritten outputs
  nondeterministic,  ///< a second identical launch differed bit-for-bit
  suspicious,        ///< faster than the speed-of-light floor, or output changed when re-verified
  skipped,           ///< not run (with a reason): no GPU, an earlier stage failed, ...
};

std::string_view to_string(Status);
std::optional<Status> status_from_string(std::string_view);
/// Every status, in declaration order (for reports and taxonomies).
inline constexpr Status kAllStatuses[] = {Status::ok,
                                          Status::no_kernel,
                                          Status::bad_manifest,
                                          Status::static_error,
                                          Status::compile_error,
                                          Status::launch_error,
                                          Status::runtime_error,
                                          Status::timeout,
                                          Status::incorrect,
                                          Status::nondeterministic,
                                          Status::suspicious,
                                          Status::skipped};

/// JSON: the name. from_json throws ProtocolError on a name outside the enum (StageResult's reader turns
/// that into a runtime_error stage that names it).
void to_json(nlohmann::json &j, Status s);
void from_json(const nlohmann::json &j, Status &s);

}  // namespace ptxbench::protocol
