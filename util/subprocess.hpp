// Running a child process with argv only (never a shell), a wall-clock limit
// that kills its whole process group, rlimits and a scrubbed environment.
// Knows nothing of PTXBench: used for ptxas, cuobjdump, the GPU worker.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "util/expected.hpp"

namespace ptxbench::util {

struct ProcessLimits {
  std::chrono::milliseconds wall_time{60'000};  ///< wall-clock limit; the process group is killed past it
  std::uint64_t cpu_seconds = 120;              ///< RLIMIT_CPU, seconds
  std::uint64_t address_space_bytes = 0;  ///< RLIMIT_AS, bytes; 0 = unlimited (CUDA needs a huge VA space)
  std::uint64_t file_size_bytes = 512ull << 20;  ///< RLIMIT_FSIZE, bytes
  std::uint64_t open_files = 256;                ///< RLIMIT_NOFILE
  std::size_t max_output_bytes =
      4u << 20;  ///< stdout/stderr each kept up to this many bytes (rest dropped, counted)
};

struct ProcessSpec {
  std::vector<std::string> argv;           ///< argv[0] is the program (absolute path or looked up in PATH)
  std::map<std::string, std::string> env;  ///< the complete environment (scrubbed: nothing inherited)
  std::string working_directory;           ///< empty = current
  std::string stdin_data;                  ///< written to the child's stdin, then closed
  ProcessLimits limits;
  /// Non-empty: the child also gets a private channel, a pipe whose write end it inherits and whose
  /// descriptor number is put in this environment variable. The caller reads it apart from stdout
  /// (ProcessResult::channel_text; StartedProcess looks for its lines there), so a protocol between the
  /// two cannot be imitated by output the child passes through to stdout (a GPU kernel's printf).
  std::string channel_fd_env;
};

struct ProcessResult {
  int exit_code = -1;              ///< valid when !signaled
  bool signaled = false;           ///< killed by a signal
  int signal = 0;                  ///< the signal number when signaled
  bool timed_out = false;          ///< killed by us at the wall-clock limit
  std::string stdout_text;         ///< captured, truncated at max_output_bytes
  std::string stderr_text;         ///< captured, truncated at max_output_bytes
  std::size_t stdout_dropped = 0;  ///< bytes dropped past the cap
  std::size_t stderr_dropped = 0;
  std::string channel_text;  ///< the private channel's lines (ProcessSpec::channel_fd_env), capped alike
  std::size_t channel_dropped = 0;
  double wall_seconds = 0;  ///< measured wall time
  /// finish_until_line returned at its line: the process may still be running (reap() ends it) and
  /// exit_code, signaled and signal are not known yet
  bool still_running = false;
  bool ok() const { return !signaled && !timed_out && !still_running && exit_code == 0; }
  /// One line: "exit 1", "killed by signal 9 (SIGKILL)", "timed out after 10.0 s".
  std::string describe() const;
};

/// Runs the process to completion (or kill). Fails (returns an error string)
/// only when the process could not be started at all (program not found, fork failure).
Expected<ProcessResult> run_process(const ProcessSpec &spec);

/// A child started now and given its input later: for a process that prepares itself (slow set-up)
/// before its work arrives. Its stdin stays open until finish(); the wall-clock limit counts from
/// finish(). Destroying it unfinished kills its process group.
class StartedProcess {
 public:
  /// Starts spec.argv (spec.stdin_data and spec.limits.wall_time are ignored here).
  static Expected<StartedProcess> start(const ProcessSpec &spec);
  StartedProcess(StartedProcess &&other) noexcept;
  StartedProcess &operator=(StartedProcess &&other) noexcept;
  StartedProcess(const StartedProcess &) = delete;
  StartedProcess &operator=(const StartedProcess &) = delete;
  ~StartedProcess();

  /// Waits until the channel (stdout when the spec asked for none) holds the line `line`: false when
  /// the process exits (or closes that stream) first or `timeout` passes. stdout and stderr are drained
  /// meanwhile.
  bool wait_for_line(const std::string &line, std::chrono::milliseconds timeout);
  /// Writes `input` to stdin, closes it and runs the process to completion or to the `wall` limit
  /// (counted from now), as run_process does.
  ProcessResult finish(const std::string &input, std::chrono::milliseconds wall);
  /// As finish(), but returns as soon as the channel (stdout when the spec asked for none) holds a
  /// complete line starting with `line_prefix` ("" = never: finish()) (the process announcing that its
  /// work is done while its teardown goes on); stdout and stderr are drained once more after the line,
  /// so they hold all the process wrote before it. The result then has still_running set and this
  /// object still owns the process: reap() or the destructor ends it.
  ProcessResult finish_until_line(const std::string &input, const std::string &line_prefix,
                                  std::chrono::milliseconds wall);
  /// Waits up to `limit` for a process finish_until_line left running, then kills its group; the
  /// output it wrote since and how it ended.
  ProcessResult reap(std::chrono::milliseconds limit);
  int pid() const { return pid_; }

 private:
  StartedProcess() = default;
  void kill_group();
  /// Drives the owned process (input, outputs, exit or `limit`) into `result`; see finish_until_line.
  void drive_owned(ProcessResult &result, const std::string &input, std::chrono::milliseconds limit,
                   const std::string &until_line);
  int pid_ = -1;
  int out_fd_ = -1, err_fd_ = -1, in_fd_ = -1;
  int channel_fd_ = -1;       ///< our end of the private channel (-1: none, or closed)
  bool has_channel_ = false;  ///< the spec asked for a channel: lines are looked for there
  std::size_t max_output_bytes_ = 0;
  std::chrono::steady_clock::time_point t0_{};
  ProcessResult result_;
  bool exited_ = false;
  int status_ = 0;
};

/// Absolute path of a program found in PATH (or in extra_dirs first), if any.
std::optional<std::string> find_program(const std::string &name,
                                        const std::vector<std::string> &extra_dirs = {});

/// A minimal environment for children: PATH, HOME=tmp, LANG=C, plus the CUDA
/// variables that matter (CUDA_VISIBLE_DEVICES, LD_LIBRARY_PATH); never keys/tokens.
std::map<std::string, std::string> scrubbed_environment(const std::string &home_dir);

}  // namespace ptxbench::util
