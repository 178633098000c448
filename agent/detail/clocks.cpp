#include "agent/detail/clocks.hpp"

#include <fmt/core.h>

namespace ptxbench::agent::detail {

namespace {
std::tm utc_now(long &millis) {
  const auto now = std::chrono::system_clock::now();
  const std::time_t t = std::chrono::system_clock::to_time_t(now);
  millis = static_cast<long>(
      std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000);
  std::tm tm{};
  gmtime_r(&t, &tm);
  return tm;
}
}  // namespace

std::string iso8601_utc_now() {
  long ms = 0;
  const std::tm tm = utc_now(ms);
  return fmt::format("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z", tm.tm_year + 1900, tm.tm_mon + 1,
                     tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, ms);
}

std::string compact_utc_now() {
  long ms = 0;
  const std::tm tm = utc_now(ms);
  return fmt::format("{:04}{:02}{:02}T{:02}{:02}{:02}Z", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
                     tm.tm_hour, tm.tm_min, tm.tm_sec);
}

std::string build_git_revision() {
#ifdef PTXBENCH_GIT_REVISION
  return PTXBENCH_GIT_REVISION;
#else
  return "unknown";
#endif
}

}  // namespace ptxbench::agent::detail
