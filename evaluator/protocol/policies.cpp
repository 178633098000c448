#include "evaluator/protocol/policies.hpp"

#include "evaluator/protocol/fields.hpp"
#include "util/enum_names.hpp"

namespace ptxbench::protocol {

using codec::Bounds;

namespace {

// Written verbatim as `metrics`: never rename one.
constexpr util::EnumName<ProfileMetricSet> kProfileMetricSetNames[] = {
    {ProfileMetricSet::standard, "standard"}, {ProfileMetricSet::full, "full"}};

}  // namespace

std::string_view to_string(ProfileMetricSet s) {
  return util::enum_to_string(kProfileMetricSetNames, s);
}

void to_json(nlohmann::json &j, ProfileMetricSet s) {
  j = std::string(to_string(s));
}

void from_json(const nlohmann::json &j, ProfileMetricSet &s) {
  codec::read_enum(j, s, kProfileMetricSetNames);
}

// The field lists: a name, the member, and what the reader accepts.
template <class IO>
void fields(IO &io, BorderlinePolicy &p) {
  io("low", p.low, Bounds{0});
  io("high", p.high, Bounds{0});
  io("extra_trials", p.extra_trials, Bounds{0, 1000});
  io("budget_seconds", p.budget);
}

template <class IO>
void fields(IO &io, CorrectnessPolicy &p) {
  io("trials", p.trials, Bounds{1, 1000});
  io("base_seed", p.base_seed);
  io("guard_bytes", p.guard_bytes, Bounds{0, 1 << 30});
  io("check_determinism", p.check_determinism);
  io("all_trials", p.all_trials);
  io("borderline", p.borderline);
}

template <class IO>
void fields(IO &io, TimingPolicy &p) {
  io("warmup_launches", p.warmup_launches, Bounds{0, 10000});
  io("min_samples", p.min_samples, Bounds{1, 1000000});
  io("target_rel_spread", p.target_rel_spread, Bounds{0});
  io("min_seconds", p.min_seconds, Bounds{0});
  io("max_seconds", p.max_seconds, Bounds{0});
  io("l2_flush_factor", p.l2_flush_factor, Bounds{0});
  io("input_sets", p.input_sets, Bounds{1, 16});
  io("reverify_random_launch", p.reverify_random_launch);
  io("sol_slack", p.sol_slack, Bounds{0});
  io("cooldown_ratio", p.cooldown_ratio, Bounds{0});
  io("cooldown_max_ms", p.cooldown_max_ms, Bounds{0});
  io("library_preroll", p.library_preroll);
  io("reuse_correctness_inputs", p.reuse_correctness_inputs);
  io("record_samples", p.record_samples);
  io("paired_min_samples", p.paired_min_samples, Bounds{0, 1000000});
  io("autocorrelated_ci", p.autocorrelated_ci);
  io("far_from_library_speedup", p.far_from_library_speedup, Bounds{0});
  io("far_min_samples", p.far_min_samples, Bounds{2, 1000000});
  io("warmup_budget_ms", p.warmup_budget_ms, Bounds{0});
}

template <class IO>
void fields(IO &io, WorkerLimits &p) {
  io("wall_seconds", p.wall);
  io("kernel_hang_seconds", p.kernel_hang);
  io("cpu_seconds", p.cpu_seconds);
  io("incorrect_execution_budget_seconds", p.incorrect_execution_budget);
  io("partial_targets_execution_budget_seconds", p.partial_targets_execution_budget);
  io("prestart", p.prestart);
  io("prestart_cupti", p.prestart_cupti);
  io("wait_for_exit", p.wait_for_exit);
  io("selection_cache_dir", p.selection_cache_dir);
}

template <class IO>
void fields(IO &io, ProfilePolicy &p) {
  io("enabled", p.enabled);
  io("metrics", p.metrics);
  io("budget_seconds", p.budget);
  io("library", p.library);
  io("pc_sampling", p.pc_sampling);
  io("pc_sampling_budget_seconds", p.pc_sampling_budget);
  io("pc_samples", p.pc_samples, codec::Bounds{1000, 1e7});
  io("pc_sampling_min_time_seconds", p.pc_sampling_min_time);
  io("pc_sampling_hardware_buffer_mib", p.pc_sampling_hardware_buffer_mib, codec::Bounds{0, 4096});
  io("pc_sampling_worker_sleep_ms", p.pc_sampling_worker_sleep_ms, codec::Bounds{0, 1000});
  io("pc_sampling_continuous_retry", p.pc_sampling_continuous_retry);
}

// The writer only reads the members; the field lists take them by reference for the reader's sake.
void to_json(nlohmann::json &j, const BorderlinePolicy &p) {
  j = codec::write_fields(const_cast<BorderlinePolicy &>(p));
}
void from_json(const nlohmann::json &j, BorderlinePolicy &p) {
  codec::read_fields(j, p);
  if (p.low > p.high) throw ProtocolError("low", "must not exceed high");
}
void to_json(nlohmann::json &j, const CorrectnessPolicy &p) {
  j = codec::write_fields(const_cast<CorrectnessPolicy &>(p));
}
void from_json(const nlohmann::json &j, CorrectnessPolicy &p) {
  codec::read_fields(j, p);
}
void to_json(nlohmann::json &j, const TimingPolicy &p) {
  j = codec::write_fields(const_cast<TimingPolicy &>(p));
}
void from_json(const nlohmann::json &j, TimingPolicy &p) {
  codec::read_fields(j, p);
}
void to_json(nlohmann::json &j, const WorkerLimits &p) {
  j = codec::write_fields(const_cast<WorkerLimits &>(p));
}
void from_json(const nlohmann::json &j, WorkerLimits &p) {
  codec::read_fields(j, p);
}

void to_json(nlohmann::json &j, const ProfilePolicy &p) {
  j = codec::write_fields(const_cast<ProfilePolicy &>(p));
}
void from_json(const nlohmann::json &j, ProfilePolicy &p) {
  codec::read_fields(j, p);
}

}  // namespace ptxbench::protocol
