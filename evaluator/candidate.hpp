// The candidate contract: a model response holds one kernel block
// (```ptx or ```cuda) and one ```json launch manifest. What the parsers make of it (ParsedResponse,
// Manifest) is declared in detail/candidate_types.hpp, shared with the pipeline's stages.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "evaluator/detail/candidate_types.hpp"
#include "evaluator/protocol/job.hpp"
#include "evaluator/status.hpp"
#include "tasks/task.hpp"
#include "util/expected.hpp"

namespace ptxbench::evaluator {

/// A fenced block found in the response.
struct CodeBlock {
  std::string info;  ///< the info string after the fence, lower-cased ("ptx", "cuda", "json", "")
  std::string body;
  int first_line = 0;  ///< 1-based line of the block's first body line in the response
};

struct ParseLimits {
  std::size_t max_response_bytes = 4u << 20;   ///< bytes; larger responses are rejected unparsed
  std::size_t max_kernel_bytes = 2u << 20;     ///< bytes of one kernel block
  std::size_t max_manifest_bytes = 64u << 10;  ///< bytes of the manifest block
};

/// Error carries status (no_kernel or bad_manifest) and a message a model can act on.
struct ParseError {
  Status status = Status::no_kernel;
  std::string message;
};
util::Expected<ParsedResponse, ParseError> parse_response(std::string_view response,
                                                          const ParseLimits &limits = {});

/// A response as read for evaluation. Past ParseLimits::max_response_bytes the text is not kept: the
/// parse stage rejects the response by its size alone.
struct ResponseInput {
  std::string text;             ///< the response; empty when it is over the limit
  std::size_t bytes = 0;        ///< its size, bytes
  bool bytes_at_least = false;  ///< `bytes` is a lower bound: a stream read only that far
};

/// The size rule: an error (no_kernel, saying the size and the limit) when `bytes` is over
/// limits.max_response_bytes; `at_least` says the size is a lower bound (a stream read only that far).
std::optional<ParseError> response_size_error(std::size_t bytes, const ParseLimits &limits,
                                              bool at_least = false);

/// Reads a response from `path` ("-" = stdin), reading no more than limits.max_response_bytes + 1 bytes.
/// Error (a sentence) only when it cannot be read; an oversized one is a value (over_limit).
util::Expected<ResponseInput> read_response(const std::string &path, const ParseLimits &limits);

/// The name of the device symbol for the SM count, usable in every manifest expression.
inline constexpr std::string_view kNumSmsSymbol = "num_sms";

/// Symbols of the GPU the kernel runs on, usable in every manifest expression beside the task's.
/// The launch plan is resolved on the CPU before any GPU is involved, so the values are the task's
/// reference GPU's (tasks/arch.hpp) unless a setting says otherwise; the GPU stage compares num_sms
/// with the device the worker reports and warns when they differ.
struct DeviceSymbols {
  std::int64_t num_sms = 0;  ///< SMs; 0 = unknown (an expression naming num_sms is then an error)
  std::string source;        ///< where the value came from, for the verdict ("H200 SXM (arch table)")
};

/// The device symbols for `task`: num_sms = `num_sms_setting` when it is > 0 (EvaluatorSettings::num_sms),
/// else the SM count of the task architecture's reference GPU, else unknown.
DeviceSymbols device_symbols(const tasks::Task &task, std::int64_t num_sms_setting = 0);

/// Parses and validates the manifest JSON against the task (names, kinds,
/// expression syntax over the task's symbols and the device symbols, tensor-map settings that can be
/// checked without a GPU). Error message is specific: field, value, reason. `device`: nullopt =
/// device_symbols(task).
util::Expected<Manifest, std::string> parse_manifest(
    std::string_view json_text, const tasks::Task &task,
    const std::optional<DeviceSymbols> &device = std::nullopt);

/// Resolves every expression of a (parsed) manifest for one workload and checks
/// what can be checked without a GPU: grid/block/cluster limits, shared memory, the workspace's size
/// (1 byte .. protocol::kMaxWorkspaceBytes), tensor-map dims, strides, box and swizzle.
/// Error: "<field>: <reason>". `device`: nullopt = device_symbols(task).
/// ResolvedParam::ptx_type is left empty: the PTX entry declares it, so the static stage reports it
/// (StaticCheckResult::entry_param_types) and the pipeline joins the two (with_param_types).
util::Expected<LaunchPlan, std::string> resolve_launch(
    const Manifest &manifest, const tasks::Task &task, const tasks::Workload &workload,
    const std::optional<DeviceSymbols> &device = std::nullopt);

}  // namespace ptxbench::evaluator
