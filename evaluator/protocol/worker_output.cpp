#include "evaluator/protocol/worker_output.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>

#include "evaluator/protocol/fields.hpp"
#include "evaluator/protocol/result.hpp"

namespace ptxbench::protocol {

using nlohmann::json;

std::string finished_line(int exit_code) {
  return std::string(kFinishedLinePrefix) + std::to_string(exit_code);
}

std::optional<int> finished_code(std::string_view channel_text) {
  const std::string_view prefix = kFinishedLinePrefix;
  std::size_t at = 0;
  while (at < channel_text.size()) {
    const std::size_t end = channel_text.find('\n', at);
    if (end == std::string_view::npos) return std::nullopt;  // not a complete line yet
    const std::string_view line = channel_text.substr(at, end - at);
    if (line.substr(0, prefix.size()) == prefix) {
      const std::string_view digits = line.substr(prefix.size());
      if (digits.empty() || digits.size() > 9) return std::nullopt;
      int code = 0;
      for (char c : digits) {
        if (c < '0' || c > '9') return std::nullopt;
        code = code * 10 + (c - '0');
      }
      return code;
    }
    at = end + 1;
  }
  return std::nullopt;
}

WorkerChannel WorkerChannel::from_environment(std::string &error) {
  error.clear();
  WorkerChannel channel;
  const char *value = std::getenv(kChannelFdEnv);
  if (!value || !*value) return channel;
  char *end = nullptr;
  errno = 0;
  const long fd = std::strtol(value, &end, 10);
  if (errno != 0 || *end != '\0' || fd < 0 || fd > 1'000'000) {
    error = std::string(kChannelFdEnv) + "=" + value + " is not a file descriptor number";
    return channel;
  }
  const int flags = ::fcntl(static_cast<int>(fd), F_GETFD);
  if (flags < 0) {
    error = std::string(kChannelFdEnv) + "=" + value + " names no open file descriptor";
    return channel;
  }
  ::fcntl(static_cast<int>(fd), F_SETFD, flags | FD_CLOEXEC);  // not for anything this process starts
  channel.fd_ = static_cast<int>(fd);
  return channel;
}

bool WorkerChannel::say(std::string_view line) const {
  std::fflush(stdout);
  if (fd_ < 0) return false;
  const std::string text = std::string(line) + "\n";
  std::size_t written = 0;
  while (written < text.size()) {
    const ssize_t n = ::write(fd_, text.data() + written, text.size() - written);
    if (n > 0) {
      written += static_cast<std::size_t>(n);
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else {
      return false;
    }
  }
  return true;
}

KernelOutput kernel_output_from(std::string_view kept, std::uint64_t dropped) {
  KernelOutput out;
  out.bytes = kept.size() + dropped;
  out.truncated = dropped > 0;
  std::size_t at = 0;
  while (at < kept.size()) {
    if (out.first_lines.size() == KernelOutput::kMaxLines) {
      out.truncated = true;
      break;
    }
    std::size_t end = kept.find('\n', at);
    if (end == std::string_view::npos) end = kept.size();
    std::string_view line = kept.substr(at, end - at);
    if (line.size() > KernelOutput::kMaxLineChars) {
      line = line.substr(0, KernelOutput::kMaxLineChars);
      out.truncated = true;
    }
    out.first_lines.emplace_back(line);
    at = end + 1;
  }
  return out;
}

template <class IO>
void fields(IO &io, KernelOutput &o) {
  io("bytes", o.bytes);
  io("first_lines", o.first_lines);
  io("truncated", o.truncated);
}

void to_json(json &j, const KernelOutput &o) {
  j = codec::write_fields(const_cast<KernelOutput &>(o));
}

void from_json(const json &j, KernelOutput &o) {
  o = KernelOutput{};
  codec::read_fields(j, o);
  if (o.first_lines.size() > KernelOutput::kMaxLines)
    throw ProtocolError("first_lines", "more than " + std::to_string(KernelOutput::kMaxLines) + " lines");
}

}  // namespace ptxbench::protocol
