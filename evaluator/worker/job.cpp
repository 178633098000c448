#include "evaluator/worker/job.hpp"

#include <algorithm>

namespace ptxbench::worker {
namespace {

using nlohmann::json;

template <class T>
T field(const json &j, const char *key, const char *where) {
  if (!j.contains(key))
    throw WorkerError("internal", std::string("job: ") + where + ": missing '" + key + "'");
  try {
    return j.at(key).get<T>();
  } catch (const json::exception &e) {
    throw WorkerError("internal", std::string("job: ") + where + ": '" + key + "': " + e.what());
  }
}

std::array<std::int64_t, 3> dim3_of(const json &j, const char *key) {
  auto v = field<std::vector<std::int64_t>>(j, key, "launch");
  if (v.size() != 3) throw WorkerError("internal", std::string("job: launch: '") + key + "' needs 3 values");
  return {v[0], v[1], v[2]};
}

}  // namespace

bool Job::wants(const std::string &stage) const {
  return std::find(stages.begin(), stages.end(), stage) != stages.end();
}

std::string opcode_family(const std::string &opcode) {
  return opcode.substr(0, opcode.find('.'));
}

std::vector<SassInstruction> parse_sass_entries(const json &array) {
  std::vector<SassInstruction> out;
  for (const auto &i : array) {
    SassInstruction si;
    si.function = field<std::string>(i, "function", "sass");
    si.offset = field<std::uint32_t>(i, "offset", "sass");
    si.opcode = field<std::string>(i, "opcode", "sass");
    si.family = i.value("family", opcode_family(si.opcode));
    out.push_back(si);
  }
  return out;
}

Job parse_job(const json &j) {
  Job job;
  job.task_id = field<std::string>(j, "task_id", "job");
  job.family = field<std::string>(j, "family", "job");
  job.reference = field<std::string>(j, "reference", "job");
  job.mode = j.value("mode", "full");
  job.device = j.value("device", 0);
  job.cubin_path = field<std::string>(j, "cubin_path", "job");
  job.entry = field<std::string>(j, "entry", "job");
  job.stages = field<std::vector<std::string>>(j, "stages", "job");
  job.kernel_hang_ms = j.value("kernel_hang_ms", 10'000.0);
  for (const auto &w : field<json>(j, "workloads", "job")) {
    JobWorkload jw;
    WorkloadSpec &s = jw.spec;
    s.name = field<std::string>(w, "name", "workload");
    s.symbols = w.value("symbols", std::map<std::string, std::int64_t>{});
    s.flops = w.value("flops", 0.0);
    s.bytes = w.value("bytes", 0.0);
    s.causal = w.value("causal", false);
    for (const auto &t : field<json>(w, "tensors", "workload")) {
      TensorSpec ts;
      ts.name = field<std::string>(t, "name", "tensor");
      ts.type = elem_type_from_string(field<std::string>(t, "dtype", "tensor"));
      ts.shape = field<std::vector<std::int64_t>>(t, "shape", "tensor");
      ts.is_output = field<std::string>(t, "role", "tensor") == "output";
      ts.distribution = distribution_from_string(t.value("distribution", "normal"));
      ts.atol = t.value("atol", 0.0);
      ts.rtol = t.value("rtol", 0.0);
      s.tensors.push_back(ts);
    }
    for (const auto &sc : w.value("scalars", json::array()))
      s.scalars.push_back({field<std::string>(sc, "name", "scalar"), sc.value("type", "f32"),
                           field<double>(sc, "value", "scalar")});
    const json &l = field<json>(w, "launch", "workload");
    jw.launch.grid = dim3_of(l, "grid");
    jw.launch.block = dim3_of(l, "block");
    jw.launch.cluster = dim3_of(l, "cluster");
    jw.launch.shared_bytes = l.value("shared_bytes", std::int64_t{0});
    for (const auto &p : field<json>(l, "params", "launch")) {
      LaunchParam lp;
      lp.kind = field<std::string>(p, "kind", "param");
      lp.name = field<std::string>(p, "name", "param");
      lp.ptx_type = p.value("ptx_type", "");
      lp.dims = p.value("dims", std::vector<std::int64_t>{});
      lp.strides_bytes = p.value("strides_bytes", std::vector<std::int64_t>{});
      lp.box = p.value("box", std::vector<std::int64_t>{});
      lp.swizzle = p.value("swizzle", "none");
      lp.l2_promotion = p.value("l2_promotion", "none");
      lp.oob_fill = p.value("oob_fill", "zero");
      lp.interleave = p.value("interleave", "none");
      jw.launch.params.push_back(lp);
    }
    job.workloads.push_back(std::move(jw));
  }
  for (const auto &t : j.value("targets", json::array()))
    job.targets.push_back(
        {field<std::string>(t, "name", "target"), t.value("sass_families", std::vector<std::string>{})});
  job.sass = parse_sass_entries(j.value("sass", json::array()));
  job.sass_path = j.value("sass_path", std::string());
  const json c = j.value("correctness", json::object());
  job.correctness.trials = std::max(1, c.value("trials", 3));
  job.correctness.base_seed = c.value("base_seed", std::uint64_t{0});
  job.correctness.guard_bytes = c.value("guard_bytes", std::size_t{4096});
  job.correctness.check_determinism = c.value("check_determinism", true);
  job.correctness.all_trials = c.value("all_trials", false);
  job.incorrect_execution_budget_ms = j.value("incorrect_execution_budget_ms", 250.0);
  job.cache_dir = j.value("cache_dir", std::string());
  const json t = j.value("timing", json::object());
  TimingSettings &ts = job.timing;
  ts.warmup_launches = t.value("warmup_launches", ts.warmup_launches);
  ts.min_samples = t.value("min_samples", ts.min_samples);
  ts.target_rel_spread = t.value("target_rel_spread", ts.target_rel_spread);
  ts.min_seconds = t.value("min_seconds", ts.min_seconds);
  ts.max_seconds = t.value("max_seconds", ts.max_seconds);
  ts.l2_flush_factor = t.value("l2_flush_factor", ts.l2_flush_factor);
  ts.input_sets = std::max(1, t.value("input_sets", ts.input_sets));
  ts.reverify_random_launch = t.value("reverify_random_launch", ts.reverify_random_launch);
  ts.sol_slack = t.value("sol_slack", ts.sol_slack);
  ts.cooldown_ratio = std::max(0.0, t.value("cooldown_ratio", ts.cooldown_ratio));
  ts.cooldown_max_ms = std::max(0.0, t.value("cooldown_max_ms", ts.cooldown_max_ms));
  ts.library_preroll = t.value("library_preroll", ts.library_preroll);
  ts.reuse_correctness_inputs = t.value("reuse_correctness_inputs", ts.reuse_correctness_inputs);
  return job;
}

}  // namespace ptxbench::worker
