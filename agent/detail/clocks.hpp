// Small clock helpers: this thread's CPU time, wall time, ISO-8601 stamps.
#pragma once

#include <time.h>

#include <chrono>
#include <cstdint>
#include <string>

namespace ptxbench::agent::detail {

/// CPU time consumed by the calling thread, nanoseconds.
inline std::int64_t thread_cpu_ns() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

inline double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

/// "2026-12-02T15:43:45.123Z"
std::string iso8601_utc_now();
/// "20261202T154345Z" (for run ids)
std::string compact_utc_now();

/// The git revision ptxbench was configured from ("unknown" outside a checkout).
std::string build_git_revision();

}  // namespace ptxbench::agent::detail
