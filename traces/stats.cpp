#include "traces/stats.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

#include "util/files.hpp"

namespace ptxbench::traces {

std::optional<Interval> wilson_interval(int successes, int trials, double z) {
  if (trials <= 0 || successes < 0 || successes > trials) return std::nullopt;
  const double n = trials, p = successes / n, z2 = z * z;
  const double centre = (p + z2 / (2 * n)) / (1 + z2 / n);
  const double half = z / (1 + z2 / n) * std::sqrt(p * (1 - p) / n + z2 / (4 * n * n));
  // At 0 and n successes the bound is exactly 0 (1); rounding must not move it inside.
  return Interval{successes == 0 ? 0.0 : std::max(0.0, centre - half),
                  successes == trials ? 1.0 : std::min(1.0, centre + half)};
}

namespace {
std::uint64_t splitmix64(std::uint64_t &state) {
  std::uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}
}  // namespace

Resampler::Resampler(std::uint64_t seed, std::string_view stream) : state_(seed ^ util::fnv1a64(stream)) {}

std::size_t Resampler::index(std::size_t n) {
  // Multiply-shift on the top 32 bits: unbiased enough for n far below 2^32, and the same on every
  // platform (std::uniform_int_distribution is not).
  const std::uint64_t r = splitmix64(state_) >> 32;
  return static_cast<std::size_t>((r * static_cast<std::uint64_t>(n)) >> 32);
}

double quantile_sorted(const double *sorted, std::size_t n, double q) {
  if (n == 0) return std::nan("");
  const double pos = q * static_cast<double>(n - 1);
  const auto i = static_cast<std::size_t>(std::floor(pos));
  if (i + 1 >= n) return sorted[n - 1];
  const double frac = pos - static_cast<double>(i);
  return sorted[i] + frac * (sorted[i + 1] - sorted[i]);
}

std::optional<Interval> percentile_bootstrap(
    const BootstrapSettings &settings, std::string_view stream,
    const std::function<std::optional<double>(Resampler &)> &replicate) {
  if (settings.resamples <= 0) return std::nullopt;
  Resampler rng(settings.seed, stream);
  std::vector<double> values;
  values.reserve(static_cast<std::size_t>(settings.resamples));
  for (int b = 0; b < settings.resamples; ++b) {
    if (auto v = replicate(rng); v && std::isfinite(*v)) values.push_back(*v);
  }
  if (values.size() * 2 < static_cast<std::size_t>(settings.resamples)) return std::nullopt;
  std::sort(values.begin(), values.end());
  const double tail = (1 - settings.level) / 2;
  return Interval{quantile_sorted(values.data(), values.size(), tail),
                  quantile_sorted(values.data(), values.size(), 1 - tail)};
}

}  // namespace ptxbench::traces
