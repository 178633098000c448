#include "evaluator/worker/detail/speed_of_light.hpp"

#include <algorithm>

namespace ptxbench::worker::detail {

PeakRates peak_rates(const DeviceRates &device, ElemType input) {
  double per_clock = 4096;
  if (input == ElemType::e4m3 || input == ElemType::e5m2) per_clock = 8192;
  if (input == ElemType::f32) per_clock = 1024;  // tf32 tensor cores
  if (device.cc_major < 9) per_clock /= 2;
  PeakRates p;
  p.flops_per_s = per_clock * device.sm_count * device.clock_khz * 1e3;
  p.bytes_per_s = 2.0 * device.mem_clock_khz * 1e3 * device.bus_width_bits / 8.0;  // double data rate
  return p;
}

double sol_floor_ms(double flops, double bytes, const PeakRates &peak) {
  return 1e3 * std::max(flops / peak.flops_per_s, bytes / peak.bytes_per_s);
}

}  // namespace ptxbench::worker::detail
