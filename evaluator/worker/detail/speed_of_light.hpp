// The speed-of-light floor of the timing stage: the least time a launch can take given the workload's
// FLOPs and bytes and the device's peak rates. A measured time under sol_slack x this floor is
// `suspicious`. Pure functions (no CUDA calls), so CPU tests cover them.
#pragma once

#include <nlohmann/json.hpp>

#include "evaluator/worker/detail/protocol_names.hpp"

namespace ptxbench::worker::detail {

/// What the peak rates are computed from (device attributes).
struct DeviceRates {
  int cc_major = 0;
  int sm_count = 0;
  double clock_khz = 0;      ///< maximum SM clock, kHz
  double mem_clock_khz = 0;  ///< memory clock, kHz
  int bus_width_bits = 0;    ///< memory bus width, bits
};

/// Peak rates the speed-of-light floor uses (recorded in the timing figures: TimingWorkload::peak_tflops,
/// peak_bandwidth_gbs, evaluator/protocol/timing.hpp).
struct PeakRates {
  double flops_per_s = 0;  ///< dense tensor-core FLOP/s for the input type at the maximum SM clock
  double bytes_per_s = 0;  ///< DRAM bytes/s (double data rate x bus width)
};

/// Dense (not sparse) tensor-core peak: per clock per SM 4096 FLOPs for 16-bit inputs on sm_90, 8192
/// for fp8, 1024 for tf32 (f32 inputs), half of each before sm_90.
PeakRates peak_rates(const DeviceRates &device, ElemType input);

/// Milliseconds: max(flops / peak FLOP/s, bytes / peak bytes/s). `flops` is the task's real work (the
/// causal attention formulas are already half of the square).
double sol_floor_ms(double flops, double bytes, const PeakRates &peak);

}  // namespace ptxbench::worker::detail
