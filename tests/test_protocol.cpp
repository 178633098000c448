// The GPU job protocol (evaluator/protocol/): every type the evaluator and the worker exchange survives
// to_json -> from_json unchanged, and what does not have the documented form is refused with the field.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "evaluator/protocol/error.hpp"
#include "evaluator/protocol/job.hpp"
#include "evaluator/protocol/margin.hpp"
#include "evaluator/protocol/matrix_work.hpp"
#include "evaluator/protocol/policies.hpp"
#include "evaluator/protocol/profile.hpp"
#include "evaluator/protocol/result.hpp"
#include "evaluator/protocol/verdict.hpp"
#include "evaluator/protocol/worker_output.hpp"

namespace p = ptxbench::protocol;
using nlohmann::json;

namespace {

/// value -> JSON -> text -> JSON -> value, as between the two processes.
template <class T>
T round_trip(const T &value) {
  const std::string text = json(value).dump();
  return json::parse(text).get<T>();
}

p::ResolvedParam tensor_map_param() {
  p::ResolvedParam m;
  m.kind = p::ParamKind::tensor_map;
  m.name = "A";
  m.ptx_type = ".b64";
  m.dims = {4096, 2048};
  m.strides_bytes = {8192};
  m.box = {64, 128};
  m.swizzle = p::Swizzle::b128;
  m.l2_promotion = "256B";
  m.oob_fill = "nan";
  m.interleave = "16B";
  return m;
}

p::Job full_job() {
  p::Job job;
  job.task_id = "gemm_bf16";
  job.family = "gemm";
  job.reference = "cublaslt";
  job.mode = p::JobMode::sanitize;
  job.device = 1;
  job.cubin_path = "kernel.cubin";
  job.entry = "gemm_tma_wgmma";
  job.stages = {"correctness", "timing"};
  p::JobWorkload w;
  w.spec.name = "m2048";
  w.spec.symbols = {{"M", 2048}, {"N", 1024}, {"K", 512}};
  w.spec.tensors = {
      p::TensorSpec{"A", p::ElemType::e4m3, {2048, 512}, false, p::InputDistribution::spiky, 0, 0},
      p::TensorSpec{"C", p::ElemType::bf16, {2048, 1024}, true, p::InputDistribution::normal, 0.01, 0.008}};
  w.spec.scalars = {p::ScalarSpec{"scale_a", "f32", 0.5}};
  w.spec.flops = 2.0 * 2048 * 1024 * 512;
  w.spec.bytes = 3.5e6;
  w.spec.causal = true;
  w.launch.workload = "m2048";
  w.launch.symbols = {{"M", 2048}};
  w.launch.grid = {16, 8, 1};
  w.launch.block = {384, 1, 1};
  w.launch.cluster = {2, 1, 1};
  w.launch.shared_bytes = 200 * 1024;
  p::ResolvedParam scalar;
  scalar.kind = p::ParamKind::scalar;
  scalar.name = "scale_a";
  scalar.ptx_type = ".f32";
  scalar.scalar_value = 0.5;
  w.launch.params = {tensor_map_param(), scalar};
  job.workloads = {w};
  job.targets = {p::TargetSpec{"wgmma", {"HGMMA"}}, p::TargetSpec{"tma_load", {"UTMALDG"}}};
  job.sass = {p::SassInstruction{"gemm_tma_wgmma", 0x2f0, "HGMMA.64x128x16.F32.BF16", "HGMMA", "@P0"}};
  job.sass_path = "sass.json";
  job.correctness = {7, 123456789012345ull, 512, false, true};
  job.timing.min_samples = 25;
  job.timing.cooldown_max_ms = 0.25;
  job.timing.library_preroll = false;
  job.limits.kernel_hang = std::chrono::milliseconds(3'000);
  job.limits.incorrect_execution_budget = std::chrono::milliseconds(123);
  job.limits.selection_cache_dir = "cache";
  job.cache_dir = "cache";
  job.task = {{"id", "gemm_bf16"}};
  return job;
}

}  // namespace

TEST_CASE("protocol: every policy survives to_json -> from_json, guard_bytes included") {
  p::CorrectnessPolicy c{5, 42, 1024, false, true};
  CHECK(round_trip(c) == c);
  CHECK(json(c)["guard_bytes"] == 1024);

  p::TimingPolicy t;
  t.warmup_launches = 1;
  t.min_samples = 40;
  t.target_rel_spread = 0.01;
  t.min_seconds = 0.25;
  t.max_seconds = 3;
  t.l2_flush_factor = 4;
  t.input_sets = 3;
  t.reverify_random_launch = false;
  t.sol_slack = 0.8;
  t.cooldown_ratio = 0.5;
  t.cooldown_max_ms = 2;
  t.library_preroll = false;
  t.reuse_correctness_inputs = false;
  t.record_samples = true;
  t.paired_min_samples = 7;
  t.autocorrelated_ci = false;
  CHECK(round_trip(t) == t);
  CHECK_FALSE(round_trip(p::TimingPolicy{}) == t);

  p::WorkerLimits l;
  l.wall = std::chrono::milliseconds(61'234);
  l.kernel_hang = std::chrono::milliseconds(1);
  l.cpu_seconds = 17;
  l.incorrect_execution_budget = std::chrono::milliseconds(999);
  l.prestart = false;
  l.prestart_cupti = false;
  l.wait_for_exit = true;
  l.selection_cache_dir = "sel";
  CHECK(round_trip(l) == l);
  CHECK(json(l)["kernel_hang_seconds"] == 0.001);
}

TEST_CASE("protocol: a policy's absent fields are the defaults; wrong ones name the field") {
  CHECK(json::parse(R"({"trials": 2})").get<p::CorrectnessPolicy>().guard_bytes == 4096);
  CHECK(json::object().get<p::TimingPolicy>() == p::TimingPolicy{});
  auto error_of = [](const char *text) {
    try {
      (void)json::parse(text).get<p::TimingPolicy>();
    } catch (const p::ProtocolError &e) {
      return e.field() + " | " + e.message();
    }
    return std::string("no error");
  };
  CHECK(error_of(R"({"min_samples": 0})").find("min_samples | must be within [1") == 0);
  CHECK(error_of(R"({"max_seconds": "long"})") == "max_seconds | expected a number");
  CHECK(error_of(R"({"input_sets": 1.5})") == "input_sets | expected an integer");
  CHECK(error_of(R"({"library_preroll": 1})") == "library_preroll | expected true or false");
  CHECK(error_of(R"({"min_sampels": 3})") == "min_sampels | unknown field");
  CHECK_THROWS_AS((void)json::parse(R"({"guard_bytes": -1})").get<p::CorrectnessPolicy>(), p::ProtocolError);
}

TEST_CASE("protocol: the job, its workloads, launch plans, tensor maps and SASS survive a round trip") {
  const p::Job job = full_job();
  const p::Job back = round_trip(job);
  CHECK(back.workloads == job.workloads);
  CHECK(back.sass == job.sass);
  CHECK(back.correctness == job.correctness);
  CHECK(back.timing == job.timing);
  CHECK(back.limits == job.limits);
  CHECK(back == job);
  CHECK(round_trip(tensor_map_param()) == tensor_map_param());
  CHECK(round_trip(job.workloads[0].launch) == job.workloads[0].launch);
  CHECK(json(job)["workloads"][0]["tensors"][1]["role"] == "output");
  CHECK(json(job)["workloads"][0]["launch"]["params"][0]["swizzle"] == "128B");
  // A listing entry without its family gets it from the opcode.
  const auto i =
      json::parse(R"({"function": "f", "offset": 16, "opcode": "UTMALDG.2D"})").get<p::SassInstruction>();
  CHECK(i.family == "UTMALDG");

  p::SassHandover listing{job.sass, std::nullopt};
  CHECK(round_trip(listing) == listing);
  p::SassHandover failed{{}, std::string("nvdisasm timed out")};
  CHECK(round_trip(failed) == failed);
}

TEST_CASE("protocol: workspace_bytes, num_sms and the workspace parameter survive a round trip") {
  p::Job job = full_job();
  p::LaunchPlan &plan = job.workloads[0].launch;
  plan.workspace_bytes = 132 * 4096;
  plan.num_sms = 132;
  p::ResolvedParam ws;
  ws.kind = p::ParamKind::workspace;
  ws.name = p::kWorkspaceName;
  ws.ptx_type = ".u64";
  plan.params.push_back(ws);
  CHECK(round_trip(plan) == plan);
  CHECK(round_trip(job) == job);
  const json j = plan;
  CHECK(j["workspace_bytes"] == 132 * 4096);
  CHECK(j["num_sms"] == 132);
  CHECK(j["params"][2]["kind"] == "workspace");
  CHECK(p::param_kind_from_string("workspace") == p::ParamKind::workspace);
  CHECK(p::to_string(p::ParamKind::workspace) == "workspace");

  // A plan written before these fields existed still loads: no workspace, num_sms not recorded.
  json old = j;
  old.erase("workspace_bytes");
  old.erase("num_sms");
  const p::LaunchPlan back = old.get<p::LaunchPlan>();
  CHECK(back.workspace_bytes == 0);
  CHECK(back.num_sms == 0);
  json old_job = json(full_job());
  old_job["workloads"][0]["launch"].erase("workspace_bytes");
  old_job["workloads"][0]["launch"].erase("num_sms");
  CHECK(old_job.get<p::Job>() == full_job());

  // Bounds: a negative size, one past the limit, a fraction.
  auto error_of = [](const json &launch) {
    try {
      (void)launch.get<p::LaunchPlan>();
    } catch (const p::ProtocolError &e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  json bad = j;
  bad["workspace_bytes"] = -1;
  CHECK(error_of(bad).find("workspace_bytes: must be within [0.0, 4294967296.0], got -1") == 0);
  bad["workspace_bytes"] = p::kMaxWorkspaceBytes + 1;
  CHECK(error_of(bad).find("workspace_bytes: must be within") == 0);
  bad["workspace_bytes"] = 1.5;
  CHECK(error_of(bad) == "workspace_bytes: expected an integer");
  bad = j;
  bad["num_sms"] = -4;
  CHECK(error_of(bad).find("num_sms: must be within") == 0);
  bad = j;
  bad["params"][2]["kind"] = "scratch";
  CHECK(error_of(bad).find("params.kind") == 0);
}

TEST_CASE("protocol: a malformed job is a ProtocolError naming the field") {
  const json good = full_job();
  auto error_of = [](const json &j) {
    try {
      (void)j.get<p::Job>();
    } catch (const p::ProtocolError &e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  CHECK(error_of(good) == "no error");
  json no_version = good;
  no_version.erase("version");
  CHECK(error_of(no_version).find("version") == 0);
  json old = good;
  old["version"] = 1;
  CHECK(error_of(old).find("version: this worker reads job version") == 0);
  json no_entry = good;
  no_entry.erase("entry");
  CHECK(error_of(no_entry) == "entry: missing");
  json bad_stage = good;
  bad_stage["stages"] = {"correctness", "profiling"};
  CHECK(error_of(bad_stage) == "stages: unknown stage 'profiling'");
  json bad_dtype = good;
  bad_dtype["workloads"][0]["tensors"][0]["dtype"] = "fp4";
  CHECK(error_of(bad_dtype).find("workloads.tensors.dtype") == 0);
  CHECK(error_of(bad_dtype).find("unknown element type \"fp4\"") != std::string::npos);
  json bad_swizzle = good;
  bad_swizzle["workloads"][0]["launch"]["params"][0]["swizzle"] = "256B";
  CHECK(error_of(bad_swizzle).find("workloads.launch.params.swizzle") == 0);
  json no_workloads = good;
  no_workloads["workloads"] = json::array();
  CHECK(error_of(no_workloads) == "workloads: a job needs at least one workload");
  json extra = good;
  extra["kernel_hang_ms"] = 10'000;
  CHECK(error_of(extra) == "kernel_hang_ms: unknown field");
  CHECK(error_of(json::array()).find("version") == 0);
}

TEST_CASE("protocol: stage results and the worker's result survive a round trip") {
  p::WorkerResult r;
  r.environment = {{"gpu_name", "H200"}, {"sm_count", 132}};
  r.base_seed = 987654321;
  r.stages["correctness"] = p::StageResult{
      p::Status::incorrect,
      "workload m: 0 of 1 trials passed",
      {p::Diagnostic{"error", "first at C[0, 1]", std::nullopt}, p::Diagnostic{"note", "line info", 12}},
      {{"workloads", json::array()}},
      0.25};
  r.stages["timing"] = p::StageResult{p::Status::skipped, "not timed", {}, json::object(), 0};
  r.finished = false;
  r.fatal = p::FatalStage{"correctness", p::Status::timeout};
  r.worker = {{"prestarted", true}};
  CHECK(round_trip(r) == r);
  for (p::Status s : p::kAllStatuses) {
    p::StageResult one{s, "x", {}, json::object(), 1.5};
    CHECK(round_trip(one) == one);
  }
}

TEST_CASE("protocol: an unknown status read back is a runtime_error stage that names it") {
  const auto s = json::parse(R"({"status": "exploded", "summary": "it blew up", "diagnostics": [],
                                 "figures": {"n": 1}, "wall_seconds": 2})")
                     .get<p::StageResult>();
  CHECK(s.status == p::Status::runtime_error);
  CHECK(s.summary == "unknown stage status \"exploded\" (summary was: it blew up)");
  REQUIRE(s.diagnostics.size() == 1);
  CHECK(s.diagnostics[0].text == s.summary);
  CHECK(s.figures["n"] == 1);
  // The enum itself refuses the name.
  CHECK_THROWS_AS((void)json("exploded").get<p::Status>(), p::ProtocolError);
  // In a whole result: the other stages are kept.
  const auto r = json::parse(R"({"stages": {"correctness": {"status": "ok", "summary": ""},
                                            "timing": {"status": 7}}})")
                     .get<p::WorkerResult>();
  CHECK(r.stages.at("correctness").status == p::Status::ok);
  CHECK(r.stages.at("timing").status == p::Status::runtime_error);
  CHECK_THROWS_AS((void)json::parse(R"({"stages": []})").get<p::WorkerResult>(), p::ProtocolError);
}

TEST_CASE("protocol: exit codes are distinct") {
  namespace e = p::exit_code;
  const int codes[] = {e::kFinished, e::kBadJob, e::kStopped, e::kNoDevice, e::kInternal};
  for (std::size_t i = 0; i < std::size(codes); ++i)
    for (std::size_t k = i + 1; k < std::size(codes); ++k) CHECK(codes[i] != codes[k]);
}

TEST_CASE("crashed_stage: a crash is charged to the stage the worker was in") {
  using ptxbench::protocol::crashed_stage;
  using ptxbench::protocol::StageResult;
  const std::vector<std::string> shown = {"correctness", "execution", "timing"};
  std::vector<std::string> with_hidden = shown;
  with_hidden.push_back("generalization");
  std::map<std::string, StageResult> written;
  CHECK(crashed_stage(written, shown) == "correctness");
  written["correctness"] = StageResult{};
  CHECK(crashed_stage(written, shown) == "timing");  // the running order, not the job's list order
  written["timing"] = StageResult{};
  written["execution"] = StageResult{};
  // Every stage written (the worker died after them, e.g. in teardown): charged to execution, as before,
  // also when the job has no hidden workloads to check.
  CHECK(crashed_stage(written, shown) == "execution");
  CHECK(crashed_stage(written, with_hidden) == "generalization");  // asked for and not written
  // Killed while checking a hidden workload: the generalization stage, never a shown one.
  StageResult partial;
  partial.figures = {{"workloads", nlohmann::json::array()}, {"in_progress", "M=8200"}};
  written["generalization"] = partial;
  CHECK(crashed_stage(written, with_hidden) == "generalization");
  written["generalization"].figures.erase("in_progress");
  CHECK(crashed_stage(written, with_hidden) == "execution");
}

TEST_CASE("worker output: finished_code reads the first complete `finished N` line of the channel") {
  using ptxbench::protocol::finished_code;
  CHECK(ptxbench::protocol::finished_line(3) == "finished 3");
  CHECK(finished_code("ready\nfinished 0\n") == 0);
  CHECK(finished_code("ready\nfinished 3\nfinished 0\n") == 3);
  CHECK_FALSE(finished_code("ready\nfinished 3").has_value());  // not a complete line yet
  CHECK_FALSE(finished_code("ready\n").has_value());
  CHECK_FALSE(finished_code("finished x\n").has_value());
  CHECK_FALSE(finished_code("finished \n").has_value());
  CHECK_FALSE(finished_code("").has_value());
}

TEST_CASE("worker output: the kernel's printf is reported bounded: bytes, first lines, truncated") {
  using ptxbench::protocol::kernel_output_from;
  using ptxbench::protocol::KernelOutput;
  const KernelOutput none = kernel_output_from("", 0);
  CHECK(none.bytes == 0);
  CHECK(none.first_lines.empty());
  CHECK_FALSE(none.truncated);

  const KernelOutput two = kernel_output_from("ready\nfinished 0", 0);  // the last line need not end
  CHECK(two.bytes == 16);
  CHECK(two.first_lines == std::vector<std::string>{"ready", "finished 0"});
  CHECK_FALSE(two.truncated);

  std::string many;
  for (int i = 0; i < 50; ++i) many += "line " + std::to_string(i) + "\n";
  const KernelOutput capped = kernel_output_from(many, 1000);  // 1000 bytes past the capture
  CHECK(capped.bytes == many.size() + 1000);
  CHECK(capped.first_lines.size() == KernelOutput::kMaxLines);
  CHECK(capped.first_lines.front() == "line 0");
  CHECK(capped.truncated);

  const KernelOutput dropped_only = kernel_output_from("a\n", 5);
  CHECK(dropped_only.truncated);  // kept whole, but more was printed

  const KernelOutput wide = kernel_output_from(std::string(1000, 'x'), 0);
  REQUIRE(wide.first_lines.size() == 1);
  CHECK(wide.first_lines[0].size() == KernelOutput::kMaxLineChars);
  CHECK(wide.truncated);

  // One codec: a round trip; unknown fields and too many lines are refused, naming the field.
  const nlohmann::json j = two;
  CHECK(j.get<KernelOutput>() == two);
  nlohmann::json extra = j;
  extra["stdout"] = "x";
  CHECK_THROWS_AS(extra.get<KernelOutput>(), ptxbench::protocol::ProtocolError);
  nlohmann::json long_list = j;
  long_list["first_lines"] = std::vector<std::string>(KernelOutput::kMaxLines + 1, "x");
  CHECK_THROWS_AS(long_list.get<KernelOutput>(), ptxbench::protocol::ProtocolError);
  nlohmann::json bad = j;
  bad["bytes"] = -1;
  CHECK_THROWS_AS(bad.get<KernelOutput>(), ptxbench::protocol::ProtocolError);
}

TEST_CASE("worker output: the worker's end of the channel comes from the environment") {
  using ptxbench::protocol::kChannelFdEnv;
  using ptxbench::protocol::WorkerChannel;
  std::string error;
  ::unsetenv(kChannelFdEnv);
  const WorkerChannel closed = WorkerChannel::from_environment(error);
  CHECK(error.empty());
  CHECK_FALSE(closed.open());
  CHECK_FALSE(closed.say("ready"));  // nowhere to say it: never stdout

  int fds[2];
  REQUIRE(::pipe(fds) == 0);
  ::setenv(kChannelFdEnv, std::to_string(fds[1]).c_str(), 1);
  const WorkerChannel channel = WorkerChannel::from_environment(error);
  CHECK(error.empty());
  REQUIRE(channel.open());
  CHECK((::fcntl(fds[1], F_GETFD) & FD_CLOEXEC) != 0);  // not for what the worker might start
  CHECK(channel.say("ready"));
  CHECK(channel.say(ptxbench::protocol::finished_line(0)));
  char buffer[64] = {};
  const ssize_t n = ::read(fds[0], buffer, sizeof buffer - 1);
  CHECK(std::string(buffer, n > 0 ? static_cast<std::size_t>(n) : 0) == "ready\nfinished 0\n");
  ::close(fds[0]);
  ::close(fds[1]);

  ::setenv(kChannelFdEnv, "seven", 1);
  CHECK_FALSE(WorkerChannel::from_environment(error).open());
  CHECK(error.find("not a file descriptor number") != std::string::npos);
  ::setenv(kChannelFdEnv, "999999", 1);
  CHECK_FALSE(WorkerChannel::from_environment(error).open());
  CHECK(error.find("no open file descriptor") != std::string::npos);
  ::unsetenv(kChannelFdEnv);
}

TEST_CASE(
    "protocol: the kernel profile survives a round trip; the bound unit is the throughput closest to peak") {
  using ptxbench::protocol::KernelProfile;
  KernelProfile p;
  p.workload = "M=8192";
  p.passes = 9;
  p.library_source = "measured";
  p.unavailable = {"sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active"};
  p.metrics = {{"gpu__time_duration.sum", "duration under the profiler", "ns", 1.0e6, 8.9e5, false},
               {"sm__throughput.avg.pct_of_peak_sustained_elapsed", "SM throughput", "%", 64.4, 77.4, true},
               {"sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active", "tensor pipe", "%", 87.2,
                std::nullopt, true},
               {"lts__t_sector_hit_rate.pct", "L2 hit rate", "%", 99.0, 66.3, false}};
  p.occupancy.block_threads = 384;
  p.occupancy.limiter = "registers";
  p.occupancy.cluster_size = 2;
  p.occupancy.active_clusters = 66;
  const nlohmann::json j = p;
  CHECK(j["metrics"][2]["library"].is_null());
  const auto back = j.get<KernelProfile>();
  CHECK(back == p);
  // The L2 hit rate is higher but is not a share of a unit's peak throughput.
  REQUIRE(back.bound_unit() != nullptr);
  CHECK(back.bound_unit()->label == "tensor pipe");
  const auto from_stage = ptxbench::protocol::kernel_profile_from_figures({{"kernel_profile", j}});
  REQUIRE(from_stage.has_value());
  CHECK(*from_stage == p);
  CHECK_FALSE(ptxbench::protocol::kernel_profile_from_figures(nlohmann::json::object()).has_value());
  nlohmann::json bad = j;
  bad["occupancy"]["theoretical_pct"] = 150;
  try {
    (void)ptxbench::protocol::kernel_profile_from_figures({{"kernel_profile", bad}});
    FAIL("an occupancy over 100% must be refused");
  } catch (const ptxbench::protocol::ProtocolError &e) {
    CHECK(e.field() == "kernel_profile.occupancy.theoretical_pct");
  }
  bad = j;
  bad["metrics"][0]["colour"] = "red";
  CHECK_THROWS_AS((void)bad.get<KernelProfile>(), ptxbench::protocol::ProtocolError);
}

TEST_CASE(
    "protocol: the profile stage's figures are typed: profile and phase seconds; a skipped stage has none") {
  namespace p = ptxbench::protocol;
  p::ProfileFigures f;
  f.kernel_profile = p::KernelProfile{};
  f.kernel_profile->workload = "M=4096";
  f.kernel_profile->passes = 7;
  f.phase_seconds = {{"candidate", 0.21}, {"candidate_cupti_config", 0.05}, {"pc_sampling", 0.3}};
  const nlohmann::json j = f;
  CHECK(j["phase_seconds"]["candidate_cupti_config"] == 0.05);
  CHECK(j.get<p::ProfileFigures>() == f);
  const auto read = p::profile_figures_from_figures(j);
  REQUIRE(read.has_value());
  CHECK(read->kernel_profile->passes == 7);
  // A skipped profile stage writes {}: no figures, not an empty profile.
  CHECK_FALSE(p::profile_figures_from_figures(nlohmann::json::object()).has_value());
  // Only phase seconds (a stage stopped before measuring): no profile.
  CHECK_FALSE(
      nlohmann::json{{"phase_seconds", {{"candidate", 0.1}}}}.get<p::ProfileFigures>().kernel_profile);
  nlohmann::json bad = j;
  bad["phase_seconds"]["pc_sampling"] = -1;
  try {
    (void)bad.get<p::ProfileFigures>();
    FAIL("negative seconds must be refused");
  } catch (const p::ProtocolError &e) {
    CHECK(e.field() == "phase_seconds.pc_sampling");
  }
  bad = j;
  bad["kernel_profile"]["passes"] = -3;
  try {
    (void)bad.get<p::ProfileFigures>();
    FAIL("negative passes must be refused");
  } catch (const p::ProtocolError &e) {
    CHECK(e.field() == "kernel_profile.passes");
  }
  bad = j;
  bad["extra"] = 1;
  CHECK_THROWS_AS((void)bad.get<p::ProfileFigures>(), p::ProtocolError);
}

TEST_CASE("protocol: the profile's PC samples and hot lines survive a round trip; old records read empty") {
  namespace p = ptxbench::protocol;
  p::KernelProfile k;
  k.workload = "M=8192";
  k.pc_sampling.samples = 97511;
  k.pc_sampling.dropped_samples = 3;
  k.pc_sampling.period_log2 = 12;
  k.pc_sampling.launches = 4;
  k.pc_sampling.reasons = {{"wait", 30000}, {"short_scoreboard", 20000}};
  k.pc_sampling.pcs = {{"gemm", 0x1a30, 5000, {{"short_scoreboard", 4900}, {"wait", 100}}}};
  k.pc_sampling.hot_lines = {{366, "@%p14 bra $L__BB0_4;", 4000, 0.041, {{"barrier", 3960}}, {"BRA"}}};
  k.pc_sampling.line_source = "kernel.ptx";
  const nlohmann::json j = k;
  CHECK(j["pc_sampling"]["hot_lines"][0]["line"] == 366);
  CHECK(j.get<p::KernelProfile>() == k);

  // A record written before PC sampling existed: nothing sampled, nothing mapped.
  nlohmann::json old = j;
  old.erase("pc_sampling");
  const auto back = old.get<p::KernelProfile>();
  CHECK(back.pc_sampling == p::PcSampling{});

  nlohmann::json bad = j;
  bad["pc_sampling"]["hot_lines"][0]["share"] = 1.5;
  try {
    (void)bad.get<p::KernelProfile>();
    FAIL("a line's share above 1 must be refused");
  } catch (const p::ProtocolError &e) {
    CHECK(std::string(e.field()).find("share") != std::string::npos);
  }
  bad = j;
  bad["pc_sampling"]["period_log2"] = 40;
  CHECK_THROWS_AS((void)bad.get<p::KernelProfile>(), p::ProtocolError);
  bad = j;
  bad["pc_sampling"]["launches"] = 0;
  CHECK_THROWS_AS((void)bad.get<p::KernelProfile>(), p::ProtocolError);
  // Records from before several launches could be sampled: one launch.
  old = j;
  old["pc_sampling"].erase("launches");
  CHECK(old.get<p::KernelProfile>().pc_sampling.launches == 1);

  p::ProfilePolicy policy;
  policy.pc_sampling = false;
  policy.pc_samples = 5000;
  policy.pc_sampling_budget = std::chrono::milliseconds(300);
  policy.pc_sampling_min_time = std::chrono::milliseconds(2);
  policy.pc_sampling_hardware_buffer_mib = 64;
  policy.pc_sampling_worker_sleep_ms = 5;
  CHECK(nlohmann::json(policy)["metrics"] == "standard");
  policy.metrics = p::ProfileMetricSet::full;
  CHECK(round_trip(policy) == policy);
  CHECK(nlohmann::json(policy)["metrics"] == "full");
  // A policy written before the metric sets reads as the standard set; an unknown set is refused by name.
  CHECK(nlohmann::json::parse(R"({"enabled": true})").get<p::ProfilePolicy>().metrics ==
        p::ProfileMetricSet::standard);
  try {
    (void)nlohmann::json::parse(R"({"metrics": "everything"})").get<p::ProfilePolicy>();
    FAIL("an unknown metric set was accepted");
  } catch (const p::ProtocolError &e) {
    CHECK(std::string(e.what()).find("known: standard, full") != std::string::npos);
  }
  CHECK(nlohmann::json(policy)["pc_sampling_worker_sleep_ms"] == 5);
  CHECK_THROWS_AS(
      (void)nlohmann::json::parse(R"({"pc_sampling_worker_sleep_ms": 5000})").get<p::ProfilePolicy>(),
      p::ProtocolError);
  CHECK(nlohmann::json(policy)["pc_sampling_min_time_seconds"] == 0.002);
  CHECK_THROWS_AS(
      (void)nlohmann::json::parse(R"({"pc_sampling_hardware_buffer_mib": 100000})").get<p::ProfilePolicy>(),
      p::ProtocolError);
  CHECK(nlohmann::json(policy)["pc_sampling_budget_seconds"] == 0.3);
  CHECK_THROWS_AS((void)nlohmann::json::parse(R"({"pc_samples": 10})").get<p::ProfilePolicy>(),
                  p::ProtocolError);
}

TEST_CASE("borderline: the policy's band and budget, the margin record and its codec") {
  namespace p = ptxbench::protocol;
  const p::BorderlinePolicy policy;  // [0.6, 2], 8 extra trials, 2 s
  p::CorrectnessPolicy c;
  c.borderline.low = 0.7;
  c.borderline.extra_trials = 3;
  c.borderline.budget = std::chrono::milliseconds(500);
  CHECK(round_trip(c) == c);
  CHECK(nlohmann::json(c)["borderline"]["budget_seconds"] == 0.5);
  // Older configs and verdict settings without the key read as the defaults.
  CHECK(nlohmann::json::parse(R"({"trials": 3})").get<p::CorrectnessPolicy>().borderline == policy);
  try {
    (void)nlohmann::json::parse(R"({"borderline": {"low": 3, "high": 2}})").get<p::CorrectnessPolicy>();
    FAIL("a band whose low end lies above its high end must be refused");
  } catch (const p::ProtocolError &e) {
    CHECK(e.field() == "borderline.low");
  }
  CHECK_THROWS_AS(
      (void)nlohmann::json::parse(R"({"borderline": {"extra_trials": -1}})").get<p::CorrectnessPolicy>(),
      p::ProtocolError);

  // The largest ratio per tensor over the trials, and the trial it came from.
  p::WorkloadMargin m;
  p::note_ratio(m, "C", 0.31, 1);
  p::note_ratio(m, "LSE", 0.02, 1);
  p::note_ratio(m, "C", 0.93, 2);
  p::note_ratio(m, "C", 0.40, 3);
  REQUIRE(m.tensors.size() == 2);
  CHECK(m.tensors[0].tensor == "C");
  CHECK(m.tensors[0].max_error_ratio == doctest::Approx(0.93));
  CHECK(m.tensors[0].trial == 2);
  CHECK(m.tensors[1].max_error_ratio == doctest::Approx(0.02));
  CHECK(m.max_error_ratio == doctest::Approx(0.93));

  // Both sides of the band, and another kind of failure.
  CHECK(p::is_borderline(m, false, policy));
  CHECK_FALSE(p::is_borderline(m, true, policy));  // a NaN or a guard hit is not near the edge
  p::WorkloadMargin below, above, at_low, at_high, none;
  p::note_ratio(below, "C", 0.59, 1);
  p::note_ratio(above, "C", 2.01, 1);
  p::note_ratio(at_low, "C", 0.6, 1);
  p::note_ratio(at_high, "C", 2.0, 1);
  CHECK_FALSE(p::is_borderline(below, false, policy));  // an honest bf16 rounding stays under 0.6
  CHECK_FALSE(p::is_borderline(above, false, policy));  // plainly wrong
  CHECK(p::is_borderline(at_low, false, policy));
  CHECK(p::is_borderline(at_high, false, policy));
  CHECK_FALSE(p::is_borderline(none, false, policy));  // nothing compared

  // Extra trials: up to the count, and not past the budget (spent + the next trial's expected time).
  p::WorkloadMargin e = m;
  CHECK(p::extra_trial_stop(e, 0.0, 0.1, policy) == "");
  CHECK(p::extra_trial_stop(e, 1.85, 0.1, policy) == "");
  CHECK(p::extra_trial_stop(e, 1.95, 0.1, policy) == "budget");
  CHECK(p::extra_trial_stop(e, 0.0, 2.5, policy) == "budget");  // one slow trial does not fit at all
  e.extra_trials = 8;
  CHECK(p::extra_trial_stop(e, 0.0, 0.1, policy) == "count");
  p::BorderlinePolicy flag_only = policy;
  flag_only.extra_trials = 0;
  CHECK(p::extra_trial_stop(m, 0.0, 0.1, flag_only) == "count");

  p::count_trials(e, 11, 9);
  CHECK(e.trials_failed == 2);
  CHECK(e.failure_rate == doctest::Approx(2.0 / 11));
  e.borderline = true;
  e.extra_stopped_by = "budget";
  CHECK(round_trip(e) == e);
  const nlohmann::json j = e;
  CHECK(j["tensors"][0]["tensor"] == "C");
  CHECK(j["failure_rate"].get<double>() == doctest::Approx(2.0 / 11));
  nlohmann::json bad = j;
  bad["extra_stopped_by"] = "tired";
  CHECK_THROWS_AS((void)bad.get<p::WorkloadMargin>(), p::ProtocolError);
  bad = j;
  bad["trials_failed"] = 12;
  CHECK_THROWS_AS((void)bad.get<p::WorkloadMargin>(), p::ProtocolError);
  bad = j;
  bad["failure_rate"] = 1.5;
  CHECK_THROWS_AS((void)bad.get<p::WorkloadMargin>(), p::ProtocolError);
}

TEST_CASE(
    "matrix work: the execution figures' multiply-add record and the redundant-work policy, one codec") {
  p::MatrixWork w;
  w.workload_flops = 1e12;
  w.target_flops = 1.02e12;
  w.target_share = 1.02;
  w.non_target_tensor_flops = 1.02e12;
  w.non_target_tensor_share = 1.02;
  w.fma_flops = 2e9;
  w.fma_share = 0.002;
  w.families = {{"HMMA", "tensor", 1.02e12, 1.02}, {"FFMA", "fma", 2e9, 0.002}};
  w.unknown_opcodes = {"UTCHMMA.2CTA"};
  CHECK(round_trip(w) == w);
  // In the stage figures, absent for a stage that did not count (and in older verdicts).
  CHECK_FALSE(p::matrix_work_from_figures(json::object()).has_value());
  CHECK_FALSE(p::matrix_work_from_figures(json{{"matrix_work", nullptr}}).has_value());
  CHECK(p::matrix_work_from_figures(json{{"matrix_work", w}}) == w);
  const auto error_of = [](const json &figures) {
    try {
      (void)p::matrix_work_from_figures(figures);
    } catch (const p::ProtocolError &e) {
      return e.field() + " | " + e.message();
    }
    return std::string("no error");
  };
  json bad = w;
  bad["fma_share"] = -0.5;
  CHECK(error_of({{"matrix_work", bad}}).find("matrix_work.fma_share | must be within [0") == 0);
  bad = w;
  bad["families"][0]["unit"] = "sfu";
  CHECK(error_of({{"matrix_work", bad}}).find("matrix_work.families") == 0);
  CHECK(error_of({{"matrix_work", bad}}).find("expected \"tensor\" or \"fma\"") != std::string::npos);
  bad = w;
  bad["families"] = std::vector<json>(p::MatrixWork::kMaxFamilies + 1, json(w.families[0]));
  CHECK(error_of({{"matrix_work", bad}}) == "matrix_work.families | more than 8 entries");
  bad = w;
  bad["decoy"] = true;
  CHECK(error_of({{"matrix_work", bad}}) == "matrix_work.decoy | unknown field");

  // The policy: defaults, a round trip, the share it judges and when it is exceeded.
  const p::RedundantWorkPolicy policy;
  CHECK(json::object().get<p::RedundantWorkPolicy>() == policy);
  CHECK(round_trip(p::RedundantWorkPolicy{0.4, false}) == p::RedundantWorkPolicy{0.4, false});
  CHECK(policy.non_target_share(w) == doctest::Approx(1.022));
  CHECK(p::RedundantWorkPolicy{0.25, false}.non_target_share(w) == doctest::Approx(1.02));
  CHECK(policy.exceeded(w));
  CHECK_FALSE(p::RedundantWorkPolicy{2.0, true}.exceeded(w));
  p::MatrixWork unknown = w;
  unknown.workload_flops = 0;  // shares unknown: never exceeded
  CHECK_FALSE(policy.exceeded(unknown));
  CHECK_THROWS_AS((void)json::parse(R"({"max_non_target_share": -1})").get<p::RedundantWorkPolicy>(),
                  p::ProtocolError);
}

TEST_CASE("the verdict's codec: a verdict read and written again keeps its stages, its axes and its fault") {
  namespace p = ptxbench::protocol;
  p::Verdict v;
  v.task_id = "t";
  v.kernel_hash = "h";
  v.parse.status = v.static_checks.status = v.compile.status = p::Status::ok;
  v.correctness.status = p::Status::incorrect;
  v.correctness.summary = "1 of 2 workloads failed";
  v.skip_from(p::Stage::correctness);
  v.axes = {false, std::nullopt, std::nullopt};
  v.machine_fault = p::MachineFault::worker_killed;
  v.finalize_status();
  const nlohmann::json written = v.to_json();
  CHECK(written.at("status") == "incorrect");
  CHECK(written.at("machine_fault") == "worker_killed");
  const p::Verdict again = p::Verdict::from_json(written);
  CHECK(again.to_json() == written);
  CHECK(again.status == p::Status::incorrect);
  CHECK(again.timing.status == p::Status::skipped);
  CHECK(again.timing.summary == "not run: an earlier stage ended with incorrect");
  CHECK(again.axes.correct == false);
  CHECK(again.machine_fault == p::MachineFault::worker_killed);

  // An older verdict without the sanitizer stage (and without a status) keeps to the stages it had.
  nlohmann::json older = written;
  older["stages"].erase("sanitizer");
  older.erase("status");
  older.erase("machine_fault");
  const p::Verdict old = p::Verdict::from_json(older);
  CHECK(old.status == p::Status::incorrect);  // recomputed from the stages
  CHECK_FALSE(old.written(p::Stage::sanitizer));
  CHECK_FALSE(old.to_json().at("stages").contains("sanitizer"));
  CHECK(old.to_json().at("stages").size() == older.at("stages").size());

  CHECK_THROWS_AS(p::Verdict::from_json(nlohmann::json::array()), p::ProtocolError);
  CHECK_THROWS_AS(p::Verdict::from_json({{"stages", 3}}), p::ProtocolError);
  for (auto f : {p::MachineFault::worker_not_started, p::MachineFault::no_device, p::MachineFault::gpu_lock,
                 p::MachineFault::worker_killed})
    CHECK(p::machine_fault_from_string(p::to_string(f)) == f);
  CHECK_FALSE(p::machine_fault_from_string("cosmic_ray").has_value());
}
