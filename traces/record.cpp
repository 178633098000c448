// Run-directory writer and reader. Appends are one write(2) of a complete
// line followed by fsync; a short or failed write is truncated away so the
// file always ends on a complete record.
#include "traces/record.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>

#include <fmt/core.h>

namespace ptxbench::traces {

namespace {

std::string errno_text(int err) {
  return fmt::format("{} ({})", std::strerror(err),
                     err == ENOSPC  ? "disk full"
                     : err == EFBIG ? "file size limit reached"
                                    : "I/O error");
}

/// Closes a file descriptor on scope exit.
struct FdGuard {
  int fd;
  ~FdGuard() {
    if (fd >= 0) ::close(fd);
  }
};

}  // namespace

TrajectoryWriter::TrajectoryWriter(std::filesystem::path run_dir)
    : path_(std::move(run_dir) / "trajectories.jsonl") {}

util::Expected<void> TrajectoryWriter::append(const TurnRecord &record) {
  std::string line = record.to_json().dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  line.push_back('\n');

  FdGuard guard{::open(path_.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644)};
  if (guard.fd < 0) {
    return util::unexpected(fmt::format("cannot open {}: {}", path_.string(), std::strerror(errno)));
  }
  struct stat before {};
  if (::fstat(guard.fd, &before) != 0) {
    return util::unexpected(fmt::format("cannot stat {}: {}", path_.string(), std::strerror(errno)));
  }
  std::size_t written = 0;
  int write_errno = 0;
  while (written < line.size()) {
    const ssize_t n = ::write(guard.fd, line.data() + written, line.size() - written);
    if (n < 0) {
      if (errno == EINTR) continue;
      write_errno = errno;
      break;
    }
    if (n == 0) {
      write_errno = ENOSPC;
      break;
    }
    written += static_cast<std::size_t>(n);
  }
  if (write_errno == 0 && ::fsync(guard.fd) != 0) write_errno = errno;
  if (write_errno != 0) {
    // Drop whatever part of this record reached the file: the file stays a
    // sequence of complete records.
    if (::ftruncate(guard.fd, before.st_size) == 0) ::fsync(guard.fd);
    return util::unexpected(
        fmt::format("cannot append to {}: {}; the file is intact up to its last complete record",
                    path_.string(), errno_text(write_errno)));
  }
  return {};
}

util::Expected<std::size_t> truncate_partial_tail(const std::filesystem::path &jsonl_path) {
  FdGuard guard{::open(jsonl_path.c_str(), O_RDWR | O_CLOEXEC)};
  if (guard.fd < 0) {
    if (errno == ENOENT) return std::size_t{0};
    return util::unexpected(fmt::format("cannot open {}: {}", jsonl_path.string(), std::strerror(errno)));
  }
  struct stat st {};
  if (::fstat(guard.fd, &st) != 0) {
    return util::unexpected(fmt::format("cannot stat {}: {}", jsonl_path.string(), std::strerror(errno)));
  }
  // Scan backwards in blocks for the last '\n'.
  off_t end = st.st_size;
  off_t keep = 0;
  char buffer[4096];
  bool found = false;
  while (end > 0 && !found) {
    const off_t start = end > static_cast<off_t>(sizeof buffer) ? end - static_cast<off_t>(sizeof buffer) : 0;
    const ssize_t n = ::pread(guard.fd, buffer, static_cast<std::size_t>(end - start), start);
    if (n < 0)
      return util::unexpected(fmt::format("cannot read {}: {}", jsonl_path.string(), std::strerror(errno)));
    for (ssize_t i = n - 1; i >= 0; --i) {
      if (buffer[i] == '\n') {
        keep = start + i + 1;
        found = true;
        break;
      }
    }
    end = start;
  }
  const auto removed = static_cast<std::size_t>(st.st_size - keep);
  if (removed == 0) return removed;
  if (::ftruncate(guard.fd, keep) != 0 || ::fsync(guard.fd) != 0) {
    return util::unexpected(fmt::format("cannot truncate {}: {}", jsonl_path.string(), std::strerror(errno)));
  }
  return removed;
}

namespace {

/// run.json into run.run; what cannot be read becomes a warning and run.run_error.
void read_run_json(const std::filesystem::path &dir, LoadedRun &run) {
  std::ifstream in(dir / "run.json", std::ios::binary);
  if (!in) {
    run.warnings.push_back("run.json is missing: the run's configuration and environment are unknown");
    return;
  }
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception &e) {  // also out_of_range (1e999)
    run.run_error = fmt::format("run.json is not valid JSON ({})", e.what());
  }
  if (run.run_error.empty()) {
    auto record = RunRecord::from_json(j);
    if (record)
      run.run = std::move(*record);
    else
      run.run_error = "run.json: " + record.error();
  }
  if (!run.run_error.empty()) run.warnings.push_back(run.run_error + "; ignored");
}

}  // namespace

util::Expected<LoadedRun> load_run(const std::filesystem::path &dir) {
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) {
    return util::unexpected(
        fmt::format("{}: not a run directory (does not exist or is not a directory)", dir.string()));
  }
  const auto jsonl = dir / "trajectories.jsonl";
  std::ifstream in(jsonl, std::ios::binary);
  if (!in) {
    return util::unexpected(
        fmt::format("{}: no trajectories.jsonl (is this a ptxbench run directory?)", dir.string()));
  }
  LoadedRun run;
  run.dir = dir;
  read_run_json(dir, run);

  std::string line;
  int line_number = 0;
  bool other_versions = false;
  while (std::getline(in, line)) {
    ++line_number;
    const bool complete = !in.eof();  // getline hit '\n' (a final line without one is a cut-short write)
    if (line.empty() && complete) continue;
    if (!complete) {
      ++run.skipped_partial_lines;
      run.warnings.push_back(
          fmt::format("line {}: incomplete last record ({} bytes) ignored (the run was cut short)",
                      line_number, line.size()));
      break;
    }
    try {
      nlohmann::json record = nlohmann::json::parse(line);
      if (!record.is_object())
        throw nlohmann::json::type_error::create(302, "record is not an object", nullptr);
      TurnRecord typed = TurnRecord::from_json(record);
      if (typed.format_version != kFormatVersion) other_versions = true;
      run.turns.push_back(std::move(typed));
    } catch (const nlohmann::json::exception &e) {
      ++run.skipped_partial_lines;
      run.warnings.push_back(fmt::format("line {}: unreadable record ignored ({})", line_number, e.what()));
    }
  }
  if (other_versions) {
    run.warnings.push_back(fmt::format("some records have a format_version other than {}", kFormatVersion));
  }
  return run;
}

std::string model_label(const TurnRecord &record) {
  std::string model = record.model.empty() && !record.has_identity ? std::string("?") : record.model;
  if (record.variant && !record.variant->empty()) model += "@" + *record.variant;
  return model;
}

}  // namespace ptxbench::traces
