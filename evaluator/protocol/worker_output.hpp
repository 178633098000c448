// What the worker says besides result.json, on two separate streams:
// - the protocol channel: a pipe the evaluator creates and the worker inherits, its fd number in the
//   environment variable kChannelFdEnv. Only the worker writes there: `ready` (a pre-started worker set
//   up), `finished N` (the result file is complete; N is the exit code it is about to return). A
//   candidate kernel cannot write to it: device code has no file descriptors, and device printf goes to
//   stdout. The job line ("JOB<TAB>RESULT") comes on stdin, read before the candidate is loaded.
// - stdout: nothing of the worker's own in job mode, so all of it is the candidate's device printf
//   output. The evaluator keeps it bounded and reports it as a KernelOutput.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "evaluator/protocol/detail/equality.hpp"

namespace ptxbench::protocol {

/// The environment variable holding the channel's fd number in the worker.
inline constexpr const char *kChannelFdEnv = "PTXBENCH_WORKER_CHANNEL_FD";
/// The line a pre-started worker writes on the channel once it is set up.
inline constexpr const char *kReadyLine = "ready";
/// "finished N": kFinishedLinePrefix (result.hpp) followed by the exit code.
std::string finished_line(int exit_code);
/// The exit code of the first complete `finished N` line in `channel_text`; nullopt when there is none
/// (or N is not a number).
std::optional<int> finished_code(std::string_view channel_text);

/// The worker's end of the channel, from kChannelFdEnv. Without the variable (a one-shot worker, the
/// sanitizer rerun) it is closed and say() writes nothing: such a worker's exit is its end.
class WorkerChannel {
 public:
  /// Reads kChannelFdEnv: "" and a usable channel, "" and a closed one (variable unset), or why the
  /// variable names no open descriptor (then closed). Marks the descriptor close-on-exec.
  static WorkerChannel from_environment(std::string &error);
  bool open() const { return fd_ >= 0; }
  /// Writes `line` and a newline in one write (retried on EINTR and partial writes). stdout is flushed
  /// first, so that everything the kernel printed before this line is in the stdout pipe before the
  /// line is on the channel. false when the channel is closed or the write failed.
  bool say(std::string_view line) const;

 private:
  int fd_ = -1;
};

/// The candidate's device printf output over every launch of one job (the worker's stdout), bounded.
struct KernelOutput {
  std::uint64_t bytes = 0;               ///< bytes printed, all of them (kept or not)
  std::vector<std::string> first_lines;  ///< at most kMaxLines lines, each cut at kMaxLineChars
  bool truncated = false;                ///< more was printed than first_lines shows
  PTXBENCH_PROTOCOL_EQUALITY(KernelOutput)

  static constexpr std::size_t kMaxLines = 20;
  static constexpr std::size_t kMaxLineChars = 200;
};

/// From what was kept of stdout (`kept`) and how many bytes past it were dropped.
KernelOutput kernel_output_from(std::string_view kept, std::uint64_t dropped);

void to_json(nlohmann::json &j, const KernelOutput &o);
/// Throws ProtocolError naming the field on a malformed object.
void from_json(const nlohmann::json &j, KernelOutput &o);

}  // namespace ptxbench::protocol
