#include "util/subprocess.hpp"

#include "util/strings.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

// Boost.Process v1 (the only API in Boost 1.81-1.83, without the v1/ folder).
#include <boost/process/args.hpp>
#include <boost/process/child.hpp>
#include <boost/process/env.hpp>
#include <boost/process/environment.hpp>
#include <boost/process/exe.hpp>
#include <boost/process/extend.hpp>
#include <boost/process/handles.hpp>
#include <boost/process/io.hpp>
#include <boost/process/pipe.hpp>
#include <boost/process/start_dir.hpp>

#include <array>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <thread>
#include <utility>

#include <fmt/core.h>

namespace ptxbench::util {
namespace bp = boost::process;
namespace fs = std::filesystem;

namespace {

// Runs in the child between fork and exec: only async-signal-safe calls.
struct ChildSetup : bp::extend::handler {
  ProcessLimits limits;
  int channel_fd = -1;  ///< the private channel's write end: the one descriptor of ours the child keeps
  template <class Executor>
  void on_exec_setup(Executor &) const {
    if (channel_fd >= 0) ::fcntl(channel_fd, F_SETFD, 0);  // only in the child: survives the exec
    ::setsid();  // own session and process group: the wall-clock kill reaches every descendant
    auto set = [](int resource, std::uint64_t value) {
      rlimit rl{static_cast<rlim_t>(value), static_cast<rlim_t>(value)};
      ::setrlimit(resource, &rl);
    };
    if (limits.cpu_seconds > 0) set(RLIMIT_CPU, limits.cpu_seconds);
    if (limits.address_space_bytes > 0) set(RLIMIT_AS, limits.address_space_bytes);
    if (limits.file_size_bytes > 0) set(RLIMIT_FSIZE, limits.file_size_bytes);
    if (limits.open_files > 0) set(RLIMIT_NOFILE, limits.open_files);
    set(RLIMIT_CORE, 0);
    ::signal(SIGPIPE, SIG_DFL);  // we ignore SIGPIPE; ignored dispositions survive exec
    // A stop meant for the caller (Slurm's scancel or time limit, `docker stop`) signals every process
    // of the job. The caller decides when a child stops (SIGKILL at its wall-clock limit), so a child
    // cut short that way never passes for its input's own failure (a compile error, a crashed kernel).
    ::signal(SIGINT, SIG_IGN);
    ::signal(SIGTERM, SIG_IGN);
  }
};

// Writing to a child's stdin after it exited must be an EPIPE, not a signal.
void ignore_sigpipe_once() {
  static std::once_flag once;
  std::call_once(once, [] { ::signal(SIGPIPE, SIG_IGN); });
}

void set_nonblocking(int fd) {
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
}

struct Capture {
  int fd = -1;
  std::string *text = nullptr;
  std::size_t *dropped = nullptr;
  std::size_t cap = 0;
  bool open() const { return fd >= 0; }
  // Reads what is available; false at EOF or error.
  bool drain() {
    std::array<char, 65536> buf;
    for (;;) {
      ssize_t n = ::read(fd, buf.data(), buf.size());
      if (n > 0) {
        std::size_t keep =
            std::min<std::size_t>(static_cast<std::size_t>(n), cap - std::min(cap, text->size()));
        text->append(buf.data(), keep);
        *dropped += static_cast<std::size_t>(n) - keep;
        continue;
      }
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;
      if (n < 0 && errno == EINTR) continue;
      ::close(fd);
      fd = -1;
      return false;
    }
  }
};

const char *signal_name(int sig) {
  switch (sig) {
    case SIGKILL:
      return "SIGKILL";
    case SIGSEGV:
      return "SIGSEGV";
    case SIGABRT:
      return "SIGABRT";
    case SIGXCPU:
      return "SIGXCPU";
    case SIGXFSZ:
      return "SIGXFSZ";
    case SIGTERM:
      return "SIGTERM";
    case SIGBUS:
      return "SIGBUS";
    case SIGFPE:
      return "SIGFPE";
    case SIGILL:
      return "SIGILL";
    case SIGPIPE:
      return "SIGPIPE";
    case SIGINT:
      return "SIGINT";
    default:
      return "signal";
  }
}

std::vector<std::string> split_path(std::string_view path) {
  std::vector<std::string> dirs;
  while (!path.empty()) {
    std::size_t colon = path.find(':');
    if (colon != 0) dirs.emplace_back(path.substr(0, colon));
    if (colon == std::string_view::npos) break;
    path.remove_prefix(colon + 1);
  }
  return dirs;
}

bool executable_file(const fs::path &p) {
  std::error_code ec;
  return fs::is_regular_file(p, ec) && ::access(p.c_str(), X_OK) == 0;
}

}  // namespace

std::string ProcessResult::describe() const {
  if (timed_out) return fmt::format("timed out after {:.1f} s", wall_seconds);
  if (signaled) return fmt::format("killed by signal {} ({})", signal, signal_name(signal));
  if (still_running) return "still running";
  return fmt::format("exit {}", exit_code);
}

std::optional<std::string> find_program(const std::string &name, const std::vector<std::string> &extra_dirs) {
  if (name.empty()) return std::nullopt;
  if (name.find('/') != std::string::npos) {
    if (executable_file(name)) return fs::absolute(name).string();
    return std::nullopt;
  }
  std::vector<std::string> dirs = extra_dirs;
  if (const char *path = std::getenv("PATH")) {
    auto more = split_path(path);
    dirs.insert(dirs.end(), more.begin(), more.end());
  }
  for (const auto &dir : dirs)
    if (executable_file(fs::path(dir) / name)) return (fs::absolute(fs::path(dir) / name)).string();
  return std::nullopt;
}

std::map<std::string, std::string> scrubbed_environment(const std::string &home_dir) {
  std::map<std::string, std::string> env;
  const char *path = std::getenv("PATH");
  env["PATH"] = path && *path ? path : "/usr/local/bin:/usr/bin:/bin";
  env["HOME"] = home_dir;
  env["TMPDIR"] = home_dir;
  env["LANG"] = "C";
  env["LC_ALL"] = "C";
  // Only what CUDA tools need to find devices and libraries; never credentials.
  for (const char *name : {"CUDA_VISIBLE_DEVICES", "LD_LIBRARY_PATH", "CUDA_HOME", "CUDA_PATH"})
    if (const char *v = std::getenv(name)) env[name] = v;
  return env;
}

namespace {

struct Launched {
  int pid = -1, out_fd = -1, err_fd = -1, in_fd = -1, channel_fd = -1;
  std::chrono::steady_clock::time_point t0;
};

// Starts the child (own session, rlimits, scrubbed environment) with three pipes; our ends non-blocking
// (stdin blocking until the caller sets it) and close-on-exec.
Expected<Launched> launch(const ProcessSpec &spec) {
  if (spec.argv.empty()) return unexpected(std::string("empty argv"));
  std::vector<std::string> path_dirs;
  if (auto it = spec.env.find("PATH"); it != spec.env.end()) path_dirs = split_path(it->second);
  auto program = find_program(spec.argv[0], path_dirs);
  if (!program) return unexpected("program not found: " + spec.argv[0]);
  ignore_sigpipe_once();

  // The private channel: both ends close-on-exec here (so children other threads start never hold
  // them); the child clears the flag on its write end.
  int channel[2] = {-1, -1};
  if (!spec.channel_fd_env.empty() && ::pipe2(channel, O_CLOEXEC) != 0)
    return unexpected(std::string("could not create the channel pipe: ") + std::strerror(errno));
  bp::environment env;  // empty: nothing inherited
  for (const auto &[k, v] : spec.env) env[k] = v;
  if (channel[1] >= 0) env[spec.channel_fd_env] = std::to_string(channel[1]);
  std::vector<std::string> args(spec.argv.begin() + 1, spec.argv.end());
  ChildSetup setup;
  setup.limits = spec.limits;
  setup.channel_fd = channel[1];
  bp::pipe out_pipe, err_pipe, in_pipe;
  // Our ends must not leak into children started concurrently by other threads.
  for (int fd : {out_pipe.native_source(), err_pipe.native_source(), in_pipe.native_sink()})
    ::fcntl(fd, F_SETFD, FD_CLOEXEC);
  fs::path start = spec.working_directory.empty() ? fs::current_path() : fs::path(spec.working_directory);

  Launched l;
  l.t0 = std::chrono::steady_clock::now();
  std::error_code ec;
  bp::child child(bp::exe = *program, bp::args = args, bp::env = env, bp::start_dir = start.string(),
                  bp::std_out > out_pipe, bp::std_err > err_pipe, bp::std_in < in_pipe, setup, ec);
  if (channel[1] >= 0) ::close(channel[1]);  // the child's now: EOF on our end once it (and its group) exit
  if (ec) {
    if (channel[0] >= 0) ::close(channel[0]);
    return unexpected("could not start " + *program + ": " + ec.message());
  }
  l.pid = child.id();
  child.detach();  // reaped with waitpid by the caller; keep boost from waiting again
  // The fds are ours now; the pipe objects must not close them again.
  l.out_fd = out_pipe.native_source();
  l.err_fd = err_pipe.native_source();
  l.in_fd = in_pipe.native_sink();
  out_pipe.assign_source(-1);
  err_pipe.assign_source(-1);
  in_pipe.assign_sink(-1);
  set_nonblocking(l.out_fd);
  set_nonblocking(l.err_fd);
  l.channel_fd = channel[0];
  if (l.channel_fd >= 0) set_nonblocking(l.channel_fd);
  return l;
}

/// Closes stdin at once when there is no input, else makes it non-blocking for the loop's writes.
void prepare_stdin(int &in_fd, const std::string &input) {
  if (in_fd >= 0 && input.empty()) {
    ::close(in_fd);
    in_fd = -1;
  } else if (in_fd >= 0) {
    set_nonblocking(in_fd);
  }
}

/// Waits up to 20 ms (never past `deadline`) for output or room on stdin, then drains what came; false
/// when nothing was open to wait on (it slept instead).
bool poll_once(std::array<Capture, 3> &captures, int in_fd, std::chrono::steady_clock::time_point now,
               std::chrono::steady_clock::time_point deadline) {
  std::vector<pollfd> fds;
  for (auto &c : captures)
    if (c.open()) fds.push_back({c.fd, POLLIN, 0});
  if (in_fd >= 0) fds.push_back({in_fd, POLLOUT, 0});
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now).count();
  int wait_ms = static_cast<int>(std::clamp<long long>(left, 1, 20));  // short: we also poll waitpid
  if (fds.empty()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(wait_ms));
    return false;
  }
  ::poll(fds.data(), fds.size(), wait_ms);
  for (auto &c : captures)
    if (c.open()) c.drain();
  return true;
}

/// Writes what stdin takes of the rest of `input`; closes it when all is written or the child stopped
/// reading.
void feed_stdin(int &in_fd, const std::string &input, std::size_t &in_written) {
  if (in_fd < 0) return;
  ssize_t n = ::write(in_fd, input.data() + in_written, input.size() - in_written);
  if (n > 0) in_written += static_cast<std::size_t>(n);
  if ((n < 0 && errno != EAGAIN && errno != EINTR) || in_written == input.size()) {
    ::close(in_fd);
    in_fd = -1;
  }
}

/// After the exit (or the kill): the last output drained, every pipe closed, the exit status recorded.
void finish_child(std::array<Capture, 3> &captures, int &in_fd, int status, ProcessResult &result) {
  for (auto &c : captures)
    if (c.open()) {
      c.drain();
      if (c.open()) ::close(c.fd);
      c.fd = -1;
    }
  if (in_fd >= 0) ::close(in_fd);
  in_fd = -1;
  if (WIFSIGNALED(status)) {
    result.signaled = true;
    result.signal = WTERMSIG(status);
  } else if (WIFEXITED(status)) {
    result.exit_code = WEXITSTATUS(status);
  }
}

// Feeds stdin, captures both outputs and reaps the child, killing its group at `deadline`.
/// Feeds `input`, captures the outputs (stdout, stderr, channel) and waits for the exit (or kills at
/// `deadline`). With a non-empty `until_line` it returns true as soon as captures[line_stream] holds a
/// complete line starting with it (stdout and stderr drained once more), leaving the process running
/// and its pipes open.
bool drive(int pid, std::array<Capture, 3> &captures, int &in_fd, const std::string &input,
           std::chrono::steady_clock::time_point deadline, bool &exited, int &status, ProcessResult &result,
           const std::string &until_line = {}, std::size_t line_stream = 0) {
  std::size_t in_written = 0;
  prepare_stdin(in_fd, input);
  std::chrono::steady_clock::time_point exited_at{};
  if (exited) {
    exited_at = std::chrono::steady_clock::now();
    ::kill(-pid, SIGKILL);
  }
  for (;;) {
    auto now = std::chrono::steady_clock::now();
    if (!exited) {
      pid_t w = ::waitpid(pid, &status, WNOHANG);
      if (w == pid) {
        exited = true;
        exited_at = now;
        // Stragglers in the group would hold our pipes open: end them too.
        ::kill(-pid, SIGKILL);
      }
    }
    bool outputs_open = captures[0].open() || captures[1].open() || captures[2].open();
    if (exited && (!outputs_open || now - exited_at > std::chrono::milliseconds(500))) break;
    if (!exited && now >= deadline) {
      result.timed_out = true;
      ::kill(-pid, SIGKILL);
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      exited = true;
      break;
    }
    if (!poll_once(captures, in_fd, now, deadline)) continue;
    if (!until_line.empty() && !exited &&
        !line_starting_with(*captures[line_stream].text, until_line).empty()) {
      // What the process wrote to its outputs before the line is in their pipes by now.
      for (std::size_t i = 0; i < 2; ++i)
        if (captures[i].open()) captures[i].drain();
      if (in_fd >= 0) ::close(in_fd);  // the line answers the input: it was read
      in_fd = -1;
      return true;
    }
    feed_stdin(in_fd, input, in_written);
  }
  finish_child(captures, in_fd, status, result);
  return false;
}

}  // namespace

Expected<ProcessResult> run_process(const ProcessSpec &spec) {
  auto l = launch(spec);
  if (!l) return unexpected(l.error());
  ProcessResult result;
  std::array<Capture, 3> captures{
      Capture{l->out_fd, &result.stdout_text, &result.stdout_dropped, spec.limits.max_output_bytes},
      Capture{l->err_fd, &result.stderr_text, &result.stderr_dropped, spec.limits.max_output_bytes},
      Capture{l->channel_fd, &result.channel_text, &result.channel_dropped, spec.limits.max_output_bytes}};
  bool exited = false;
  int status = 0;
  drive(l->pid, captures, l->in_fd, spec.stdin_data, l->t0 + spec.limits.wall_time, exited, status, result);
  result.wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - l->t0).count();
  return result;
}

Expected<StartedProcess> StartedProcess::start(const ProcessSpec &spec) {
  auto l = launch(spec);
  if (!l) return unexpected(l.error());
  StartedProcess p;
  p.pid_ = l->pid;
  p.out_fd_ = l->out_fd;
  p.err_fd_ = l->err_fd;
  p.in_fd_ = l->in_fd;
  p.channel_fd_ = l->channel_fd;
  p.has_channel_ = l->channel_fd >= 0;
  p.t0_ = l->t0;
  p.max_output_bytes_ = spec.limits.max_output_bytes;
  return p;
}

StartedProcess::StartedProcess(StartedProcess &&o) noexcept {
  *this = std::move(o);
}

StartedProcess &StartedProcess::operator=(StartedProcess &&o) noexcept {
  if (this != &o) {
    kill_group();
    pid_ = std::exchange(o.pid_, -1);
    out_fd_ = std::exchange(o.out_fd_, -1);
    err_fd_ = std::exchange(o.err_fd_, -1);
    in_fd_ = std::exchange(o.in_fd_, -1);
    channel_fd_ = std::exchange(o.channel_fd_, -1);
    has_channel_ = o.has_channel_;
    max_output_bytes_ = o.max_output_bytes_;
    t0_ = o.t0_;
    result_ = std::move(o.result_);
    exited_ = o.exited_;
    status_ = o.status_;
  }
  return *this;
}

StartedProcess::~StartedProcess() {
  kill_group();
}

void StartedProcess::kill_group() {
  for (int *fd : {&out_fd_, &err_fd_, &in_fd_, &channel_fd_})
    if (*fd >= 0) {
      ::close(*fd);
      *fd = -1;
    }
  if (pid_ > 0) {
    ::kill(-pid_, SIGKILL);
    ::kill(pid_, SIGKILL);
    if (!exited_) ::waitpid(pid_, &status_, 0);
  }
  pid_ = -1;
}

bool StartedProcess::wait_for_line(const std::string &line, std::chrono::milliseconds timeout) {
  if (pid_ <= 0) return false;
  std::array<Capture, 3> captures{
      Capture{out_fd_, &result_.stdout_text, &result_.stdout_dropped, max_output_bytes_},
      Capture{err_fd_, &result_.stderr_text, &result_.stderr_dropped, max_output_bytes_},
      Capture{channel_fd_, &result_.channel_text, &result_.channel_dropped, max_output_bytes_}};
  Capture &source = captures[has_channel_ ? 2 : 0];
  const auto holds_line = [&] {
    const std::string &text = *source.text;
    for (std::size_t at = text.find(line); at != std::string::npos; at = text.find(line, at + 1))
      if ((at == 0 || text[at - 1] == '\n') && text.compare(at + line.size(), 1, "\n") == 0) return true;
    return false;
  };
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    for (auto &c : captures)
      if (c.open()) c.drain();
    out_fd_ = captures[0].fd;
    err_fd_ = captures[1].fd;
    channel_fd_ = captures[2].fd;
    if (holds_line()) return true;
    if (!exited_ && ::waitpid(pid_, &status_, WNOHANG) == pid_) exited_ = true;
    if (exited_ || !source.open()) return false;
    const auto now = std::chrono::steady_clock::now();
    if (now >= deadline) return false;
    std::vector<pollfd> fds;
    for (auto &c : captures)
      if (c.open()) fds.push_back({c.fd, POLLIN, 0});
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now).count();
    ::poll(fds.data(), fds.size(), static_cast<int>(std::clamp<long long>(left, 1, 20)));
  }
}

ProcessResult StartedProcess::finish(const std::string &input, std::chrono::milliseconds wall) {
  return finish_until_line(input, std::string(), wall);  // no line ends it early
}

ProcessResult StartedProcess::finish_until_line(const std::string &input, const std::string &line_prefix,
                                                std::chrono::milliseconds wall) {
  ProcessResult result = std::move(result_);
  result_ = ProcessResult{};
  if (pid_ <= 0) {
    result.signaled = true;
    result.signal = SIGKILL;
    return result;
  }
  drive_owned(result, input, wall, line_prefix);
  return result;
}

ProcessResult StartedProcess::reap(std::chrono::milliseconds limit) {
  ProcessResult result;
  if (pid_ > 0) drive_owned(result, std::string(), limit, std::string());
  return result;
}

void StartedProcess::drive_owned(ProcessResult &result, const std::string &input,
                                 std::chrono::milliseconds limit, const std::string &until_line) {
  std::array<Capture, 3> captures{
      Capture{out_fd_, &result.stdout_text, &result.stdout_dropped, max_output_bytes_},
      Capture{err_fd_, &result.stderr_text, &result.stderr_dropped, max_output_bytes_},
      Capture{channel_fd_, &result.channel_text, &result.channel_dropped, max_output_bytes_}};
  const auto start = std::chrono::steady_clock::now();
  const bool at_line = drive(pid_, captures, in_fd_, input, start + limit, exited_, status_, result,
                             until_line, has_channel_ ? 2 : 0);
  result.wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (at_line) {
    out_fd_ = captures[0].fd;  // a drain at EOF closed it
    err_fd_ = captures[1].fd;
    channel_fd_ = captures[2].fd;
    result.still_running = true;
    return;
  }
  out_fd_ = err_fd_ = channel_fd_ = -1;
  pid_ = -1;  // reaped
}

}  // namespace ptxbench::util
