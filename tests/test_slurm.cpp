// Scale-out: the shard split (deterministic, balanced, order-independent),
// sharded runs through the real loop (disjoint, together equal to one process,
// resumable per shard), reading shards back (merged, refused when mixed), and
// the Slurm side without a cluster: the sbatch script, squeue/sacct parsing and
// status from canned command output (the `slurm` label runs a real cluster).
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include <unistd.h>

#include <fstream>
#include <map>
#include <set>

#include <fmt/core.h>

#include "agent/run_config.hpp"
#include "agent/runner.hpp"
#include "agent/shard.hpp"
#include "agent/slurm.hpp"
#include "agent/slurm_serve.hpp"
#include "support/support.hpp"
#include "traces/record.hpp"
#include "traces/shards.hpp"
#include "util/files.hpp"
#include "util/subprocess.hpp"

using namespace ptxbench;
namespace fs = std::filesystem;
using Json = nlohmann::json;
namespace slurm = agent::slurm;

namespace {

using Scratch = test::ScratchDir;

/// Answers "turn <n>"; the CPU stages below turn the text into a verdict.
class EchoClient : public llm::ChatClient {
 public:
  util::Expected<llm::ChatResponse, llm::ChatError> complete(const llm::ChatRequest &r) override {
    llm::ChatResponse out;
    out.content = r.turn_index >= 1 && r.sample_index % 2 == 0 ? "GOOD" : "BAD";
    out.finish_reason = "stop";
    out.usage.prompt_tokens = 10;
    out.usage.completion_tokens = 5;
    return out;
  }
  void cancel() override {}
};

agent::RunServices echo_services() {
  agent::RunServices s = agent::RunServices::defaults();
  s.make_client = [](const llm::EndpointConfig &) -> util::Expected<std::unique_ptr<llm::ChatClient>> {
    return std::unique_ptr<llm::ChatClient>(new EchoClient());
  };
  s.cpu_stages = [](const tasks::Task &task, std::string_view response, evaluator::ParsedCandidate,
                    const evaluator::EvaluatorSettings &) {
    evaluator::CompiledCandidate c;
    auto &v = c.verdict;
    v.task_id = task.id;
    v.parse.status = evaluator::Status::ok;
    v.static_checks.status = evaluator::Status::ok;
    const bool good = response == "GOOD";
    v.compile.status = good ? evaluator::Status::ok : evaluator::Status::compile_error;
    if (good) {
      v.correctness.status = evaluator::Status::ok;
      v.execution.status = evaluator::Status::ok;
      v.timing.status = evaluator::Status::ok;
      v.axes.correct = true;
      v.axes.targets_executed = true;
      v.axes.speedup = 1.1;
    }
    v.finalize_status();
    return c;
  };
  return s;
}

agent::RunConfig small_config(const fs::path &out) {
  agent::RunConfig c;
  for (const char *name : {"alpha", "beta"}) {
    llm::EndpointConfig e;
    e.name = name;
    e.model = name;
    e.base_url = "http://127.0.0.1:9/v1";  // never contacted
    e.max_in_flight = 6;
    c.endpoints.push_back(e);
  }
  c.tasks = {"gemm_n7168_k5120", "gemm_n4096_k4096"};
  c.samples = 3;
  c.turns = 3;
  c.evaluator.run_gpu = false;
  c.concurrency.compile_workers = 2;
  c.out_dir = out;
  return c;
}

agent::RunOptions quiet() {
  agent::RunOptions o;
  o.progress = agent::ProgressMode::quiet;
  return o;
}

void run_to_end(agent::RunConfig c) {
  auto runner = agent::Runner::start(std::move(c), echo_services(), quiet());
  REQUIRE_MESSAGE(runner, (runner ? "" : runner.error()));
  auto result = (*runner)->run();
  REQUIRE(result.end == agent::RunEnd::completed);
}

/// (trajectory, turn) -> verdict status
std::map<std::pair<std::string, int>, std::string> cells_of(const traces::LoadedRun &run) {
  std::map<std::pair<std::string, int>, std::string> out;
  for (const auto &r : run.turns) {
    auto key = std::make_pair(r.trajectory_id, r.turn);
    CHECK_MESSAGE(!out.count(key), key.first);
    out[key] = r.verdict_object() ? r.verdict["status"].get<std::string>() : "none";
  }
  return out;
}

std::vector<fs::path> paths(std::initializer_list<fs::path> list) {
  return std::vector<fs::path>(list);
}

}  // namespace

// ---------------------------------------------------------------- the split

TEST_CASE("shard spec: I/N parses, errors say what is wrong") {
  auto ok = agent::parse_shard_spec("2/8");
  REQUIRE(ok);
  CHECK(ok->index == 2);
  CHECK(ok->count == 8);
  CHECK(agent::to_string(*ok) == "2/8");
  for (const char *bad : {"8/8", "-1/4", "1", "a/4", "1/0", "1/4x", "/4"}) {
    INFO(bad);
    CHECK_FALSE(agent::parse_shard_spec(bad));
  }
  CHECK(agent::parse_shard_spec("4/4").error().find("N-1 = 3") != std::string::npos);
}

TEST_CASE("shard split: every cell in exactly one shard, sizes within one, independent of order") {
  std::vector<agent::CellIdentity> cells;
  for (const char *m : {"a", "b", "c"})
    for (const char *t : {"gemm", "mha_fwd", "mha_bwd", "fp8"})
      for (int s = 0; s < 7; ++s) cells.push_back(agent::trajectory_cell(m, t, s));
  for (int n : {1, 2, 3, 5, 8, 84, 100}) {
    INFO(n);
    const auto shard = agent::assign_shards(cells, n);
    std::map<int, int> sizes;
    for (int s : shard) {
      CHECK(s >= 0);
      CHECK(s < n);
      sizes[s] += 1;
    }
    int lo = 1 << 30, hi = 0;
    for (int i = 0; i < n; ++i) {
      lo = std::min(lo, sizes[i]);
      hi = std::max(hi, sizes[i]);
    }
    CHECK(hi - lo <= 1);
    // Reversed input order: each cell keeps its shard.
    std::vector<agent::CellIdentity> reversed(cells.rbegin(), cells.rend());
    const auto again = agent::assign_shards(reversed, n);
    for (std::size_t i = 0; i < cells.size(); ++i) CHECK(again[cells.size() - 1 - i] == shard[i]);
  }
  // The identity is its named dimensions: a new one changes the key, the order of names does not.
  agent::CellIdentity a = agent::trajectory_cell("m", "t", 1);
  agent::CellIdentity b = a;
  b.dimensions["prompt_variant"] = "2";
  CHECK(a.key() == "model=m;sample=1;task=t");
  CHECK(b.key() == "model=m;prompt_variant=2;sample=1;task=t");
  CHECK(agent::trajectory_cell("a;b", "t", 0).key() != agent::trajectory_cell("a", "b;t", 0).key());
}

TEST_CASE("config hash: ignores per-process settings, sees what the cells compute") {
  agent::RunConfig c = small_config("run-dir-never-written");
  const std::string h = agent::config_hash(c);
  agent::RunConfig other = c;
  other.out_dir = "/elsewhere";
  other.concurrency.compile_workers = 17;
  other.concurrency.gpus = {3};
  other.endpoints[0].max_in_flight = 1;
  other.concurrency.in_flight_scope = agent::InFlightScope::run;
  CHECK(agent::config_hash(other) == h);
  other.turns = 4;
  CHECK(agent::config_hash(other) != h);
  agent::RunConfig sampling = c;
  sampling.sampling.temperature = 0.7;
  CHECK(agent::config_hash(sampling) != h);
}

TEST_CASE("endpoint limits: per shard by default, divided by the shard count with in_flight_scope run") {
  agent::RunConfig c = small_config("run-dir-never-written");
  CHECK(agent::effective_max_in_flight(c, 16) == 16);
  c.shard = agent::ShardSpec{0, 4};
  CHECK(agent::effective_max_in_flight(c, 16) == 16);
  c.concurrency.in_flight_scope = agent::InFlightScope::run;
  CHECK(agent::effective_max_in_flight(c, 16) == 4);
  CHECK(agent::effective_max_in_flight(c, 3) == 1);  // never 0
  // The config option round-trips.
  auto parsed = agent::parse_run_config(c.to_json(), "cfg", "/");
  REQUIRE(parsed);
  CHECK(parsed->concurrency.in_flight_scope == agent::InFlightScope::run);
  Json bad = c.to_json();
  bad["concurrency"]["in_flight_scope"] = "global";
  auto refused = agent::parse_run_config(bad, "cfg", "/");
  REQUIRE_FALSE(refused);
  CHECK(refused.error().find("concurrency.in_flight_scope") != std::string::npos);
}

// ---------------------------------------------------------------- sharded runs

TEST_CASE("sharded run: three shards do disjoint work that together equals one process; resume per shard") {
  Scratch tmp;
  run_to_end(small_config(tmp.dir / "single"));
  auto single = traces::load_run(tmp.dir / "single");
  REQUIRE(single);
  const auto expected = cells_of(*single);
  // 2 models x 2 tasks x 3 samples; even samples reach the target at turn 1, odd ones run 3 turns.
  CHECK(expected.size() == 2u * 2 * (2 * 2 + 3));

  const fs::path top = tmp.dir / "top";
  std::set<std::string> run_ids;
  std::size_t cells = 0;
  for (int i = 0; i < 3; ++i) {
    agent::RunConfig c = small_config(top);
    c.shard = agent::ShardSpec{i, 3};
    c.run_id = agent::default_shard_run_id(c);
    c.concurrency.compile_workers = 1 + i;  // per-process settings may differ between shards
    run_to_end(c);
    auto shard = traces::load_run(top / fmt::format("shard-{}", i));
    REQUIRE(shard);
    REQUIRE(shard->run.shard);
    CHECK(shard->run.shard->index == i);
    CHECK(shard->run.shard->count == 3);
    CHECK(shard->run.shard->config_hash == agent::config_hash(small_config(top)));
    CHECK(shard->run.shard->cells_total == 12);
    cells += static_cast<std::size_t>(shard->run.shard->cells.value_or(0));
    for (const auto &r : shard->turns) run_ids.insert(r.run_id);
  }
  CHECK(cells == 12);
  CHECK(run_ids.size() == 1);  // every record of every shard carries the run's one id

  auto loaded = traces::load_runs(paths({top}));
  REQUIRE_MESSAGE(loaded, (loaded ? "" : loaded.error()));
  CHECK(loaded->warnings.empty());
  REQUIRE(loaded->runs.size() == 1);
  CHECK(cells_of(loaded->runs[0]) == expected);
  CHECK_FALSE(loaded->runs[0].run.shard);
  REQUIRE(loaded->runs[0].run.shards);
  CHECK(loaded->runs[0].run.shards->present.size() == 3);

  // A shard cut short resumes on its own cells only and ends equal.
  const fs::path shard1 = top / "shard-1";
  auto full = traces::load_run(shard1);
  REQUIRE(full);
  std::string kept;
  for (std::size_t i = 0; i + 2 < full->turns.size(); ++i) kept += full->turns[i].to_json().dump() + "\n";
  REQUIRE(util::write_file_atomic(shard1 / "trajectories.jsonl", kept));
  auto resumed = agent::Runner::resume(shard1, echo_services(), quiet());
  REQUIRE_MESSAGE(resumed, (resumed ? "" : resumed.error()));
  CHECK((*resumed)->run().turns_recorded == 2);
  auto again = traces::load_runs(paths({top}));
  REQUIRE(again);
  CHECK(cells_of(again->runs[0]) == expected);

  // merge writes one run directory that reads the same and refuses to overwrite.
  REQUIRE(traces::write_run(again->runs[0], tmp.dir / "merged"));
  auto merged = traces::load_runs(paths({tmp.dir / "merged"}));
  REQUIRE(merged);
  CHECK(cells_of(merged->runs[0]) == expected);
  CHECK_FALSE(traces::write_run(again->runs[0], tmp.dir / "merged"));

  SUBCASE("a merged directory beside its shards is refused (cells would count twice)") {
    auto both = traces::load_runs(paths({top, tmp.dir / "merged"}));
    REQUIRE_FALSE(both);
    CHECK(both.error().find("count twice") != std::string::npos);
  }
  SUBCASE("the same directory twice is read once") {
    auto twice = traces::load_runs(paths({top, top / "shard-0"}));
    REQUIRE(twice);
    CHECK(cells_of(twice->runs[0]) == expected);
    CHECK_FALSE(twice->warnings.empty());
  }
  SUBCASE("a missing shard is a warning") {
    auto part = traces::load_runs(paths({top / "shard-0", top / "shard-2"}));
    REQUIRE(part);
    REQUIRE(part->warnings.size() == 1);
    CHECK(part->warnings[0].find("shards 1 of 3 are missing") != std::string::npos);
  }
}

TEST_CASE("reading shards refuses mixes: other config, same shard twice, a cell in two shards, two runs") {
  Scratch tmp;
  auto make = [&](const fs::path &top, int index, int count, const std::string &hash,
                  const std::string &run_id, const std::vector<std::string> &trajectories) {
    const fs::path dir = top / fmt::format("shard-{}", index);
    fs::create_directories(dir);
    Json run = {{"run_id", run_id}, {"shard", {{"index", index}, {"count", count}, {"config_hash", hash}}}};
    REQUIRE(util::write_file_atomic(dir / "run.json", run.dump()));
    std::string lines;
    for (const auto &t : trajectories)
      lines += Json{{"format_version", traces::kFormatVersion},
                    {"run_id", run_id},
                    {"trajectory_id", t},
                    {"turn", 0},
                    {"model", "m"},
                    {"task_id", "t"},
                    {"sample", 0},
                    {"stop_reason", "turn_limit"}}
                   .dump() +
               "\n";
    REQUIRE(util::write_file_atomic(dir / "trajectories.jsonl", lines));
    return dir;
  };
  const auto a0 = make(tmp.dir / "a", 0, 2, "h1", "run-a", {"m/t/0"});
  const auto a1 = make(tmp.dir / "a", 1, 2, "h1", "run-a", {"m/t/1"});
  REQUIRE(traces::load_runs(paths({tmp.dir / "a"})));

  const auto other_hash = make(tmp.dir / "b", 1, 2, "h2", "run-a", {"m/t/1"});
  auto r1 = traces::load_runs(paths({a0, other_hash}));
  REQUIRE_FALSE(r1);
  CHECK(r1.error().find("different configs") != std::string::npos);

  const auto same_index = make(tmp.dir / "c", 0, 2, "h1", "run-a", {"m/t/0"});
  auto r2 = traces::load_runs(paths({a0, a1, same_index}));
  REQUIRE_FALSE(r2);
  CHECK(r2.error().find("in two directories") != std::string::npos);

  const auto overlapping = make(tmp.dir / "d", 1, 2, "h1", "run-a", {"m/t/0"});
  auto r3 = traces::load_runs(paths({a0, overlapping}));
  REQUIRE_FALSE(r3);
  CHECK(r3.error().find("in two shards") != std::string::npos);

  const auto other_run = make(tmp.dir / "e", 1, 2, "h1", "run-b", {"m/t/1"});
  auto r4 = traces::load_runs(paths({a0, other_run}));
  REQUIRE_FALSE(r4);
  CHECK(r4.error().find("different runs of the same config") != std::string::npos);

  // A shard that has not written a record yet (or owns no cell) reads as empty, not as an error.
  const fs::path empty = tmp.dir / "f" / "shard-0";
  fs::create_directories(empty);
  REQUIRE(util::write_file_atomic(
      empty / "run.json",
      Json{{"run_id", "run-f"}, {"shard", {{"index", 0}, {"count", 1}, {"config_hash", "h9"}}}}.dump()));
  auto r5 = traces::load_runs(paths({tmp.dir / "f"}));
  REQUIRE(r5);
  CHECK(r5->runs.at(0).turns.empty());
  CHECK_FALSE(traces::load_runs(paths({tmp.dir / "nothing-here"})));
}

// ---------------------------------------------------------------- Slurm, without a cluster

TEST_CASE("children ignore SIGTERM/SIGINT sent to the whole job: a compile is not cut short by scancel") {
  // Slurm signals every process of a cancelled or timed-out job; the orchestrator finishes its
  // in-flight turns, so their compiles must finish too instead of dying as a bogus compile error.
  util::ProcessSpec spec;
  spec.argv = {"/bin/sh", "-c", "kill -TERM $$; kill -INT $$; echo alive"};
  spec.env = {{"PATH", "/usr/bin:/bin"}};
  auto r = util::run_process(spec);
  REQUIRE(r);
  CHECK(r->ok());
  CHECK(r->stdout_text == "alive\n");
}

TEST_CASE("sbatch script: array over the shards, GPUs from the allocation, keys by name only") {
  slurm::SubmitOptions o;
  o.run_id = "20260101T000000Z-abcd";
  o.shards = 4;
  o.gpus_per_shard = 2;
  o.cpus_per_shard = 8;
  o.partition = "gpu";
  o.time_limit = "4:00:00";
  o.account = "lab";
  o.sbatch_args = {"--qos=high"};
  o.top_dir = "/shared/runs/x";
  o.ptxbench = "/opt/ptx bench/it's/ptxbench";
  o.key_env_names = {"OPENAI_API_KEY"};
  REQUIRE(slurm::check_submit_options(o));
  const std::string s = slurm::sbatch_script(o);
  for (const char *line :
       {"#SBATCH --job-name=ptxbench-20260101T000000Z-abcd\n", "#SBATCH --array=0-3\n",
        "#SBATCH --gres=gpu:2\n", "#SBATCH --cpus-per-task=8\n", "#SBATCH --partition=gpu\n",
        "#SBATCH --time=4:00:00\n", "#SBATCH --account=lab\n", "#SBATCH --qos=high\n",
        "#SBATCH --output=/shared/runs/x/logs/shard-%a.%A.out\n", "--shard \"$shard/4\"",
        "--compile-workers 8", "resume \"$dir\"", "for name in OPENAI_API_KEY; do",
        "ptxbench='/opt/ptx bench/it'\\''s/ptxbench'\n"}) {
    INFO(line);
    CHECK(s.find(line) != std::string::npos);
  }
  // A key's value never reaches the script, even when it is set here.
  ::setenv("OPENAI_API_KEY", "sk-test-must-not-leak", 1);
  CHECK(slurm::sbatch_script(o).find("sk-test") == std::string::npos);
  ::unsetenv("OPENAI_API_KEY");
  CHECK(s.find("CUDA_VISIBLE_DEVICES") != std::string::npos);

  slurm::SubmitOptions bad = o;
  bad.sbatch_args = {"--comment=a\n#SBATCH --array=0-99"};
  CHECK_FALSE(slurm::check_submit_options(bad));
  bad = o;
  bad.sbatch_args = {"--array=1-2"};
  CHECK_FALSE(slurm::check_submit_options(bad));
  bad = o;
  bad.top_dir = "/shared/my runs";
  CHECK_FALSE(slurm::check_submit_options(bad));
  bad = o;
  bad.key_env_names = {"KEY; rm -rf /"};
  CHECK_FALSE(slurm::check_submit_options(bad));
}

TEST_CASE("squeue / sacct / sbatch output parsing") {
  const auto q =
      slurm::parse_squeue("12_0|RUNNING|node1\n12_[1-3,5%2]|PENDING|(Resources)\n13|RUNNING|node2\n\n");
  REQUIRE(q.size() == 5);
  CHECK(q[0].array_job_id == "12");
  CHECK(q[0].task == 0);
  CHECK(q[0].state == slurm::JobState::running);
  CHECK(q[0].detail == "node1");
  CHECK(q[4].task == 5);
  CHECK(q[4].state == slurm::JobState::pending);
  const auto a = slurm::parse_sacct(
      "12_0|COMPLETED|0:0\n12_1|CANCELLED by 0|0:15\n12_2|TIMEOUT|0:0\n12_3|OUT_OF_ME+|0:125\n");
  REQUIRE(a.size() == 4);
  CHECK(a[1].state == slurm::JobState::cancelled);
  CHECK(a[1].detail == "0:15");
  CHECK(a[2].state == slurm::JobState::timeout);
  CHECK(a[3].state == slurm::JobState::unknown);  // truncated name: not guessed
  CHECK(slurm::job_state_from_slurm("CD") == slurm::JobState::completed);
  CHECK(slurm::is_active(slurm::JobState::pending));
  CHECK_FALSE(slurm::is_active(slurm::JobState::failed));
  CHECK(slurm::parse_sbatch_job_id("4242\n").value() == "4242");
  CHECK(slurm::parse_sbatch_job_id("sbatch: warning: x\n4242;cluster\n").value() == "4242");
  CHECK_FALSE(slurm::parse_sbatch_job_id("sbatch: error: Batch job submission failed"));
  CHECK(slurm::array_spec({5, 0, 1, 2, 7, 8}) == "0-2,5,7-8");
}

TEST_CASE("status: squeue first, sacct for the rest, exit files without accounting; progress from records") {
  Scratch tmp;
  slurm::Layout layout;
  layout.run_id = "r1";
  layout.config_hash = "h";
  layout.shards = 3;
  layout.cells = {1, 1, 1};
  layout.submissions = {slurm::make_submission("40", {0, 1, 2}, "submit"),
                        slurm::make_submission("41", {2}, "resubmit")};
  REQUIRE(slurm::write_layout(tmp.dir, layout));
  // shard 0 finished its one trajectory; shard 1 has a turn without a stop reason.
  auto write_shard = [&](int i, const std::string &stop) {
    const fs::path d = tmp.dir / fmt::format("shard-{}", i);
    fs::create_directories(d);
    REQUIRE(util::write_file_atomic(d / "run.json", "{}"));
    REQUIRE(
        util::write_file_atomic(d / "trajectories.jsonl", Json{{"trajectory_id", "m/t/" + std::to_string(i)},
                                                               {"turn", 0},
                                                               {"stop_reason", stop},
                                                               {"verdict", {{"status", "compile_error"}}}}
                                                                  .dump() +
                                                              "\n"));
  };
  write_shard(0, "turn_limit");
  write_shard(1, "");
  fs::create_directories(tmp.dir / "logs");
  REQUIRE(util::write_file_atomic(tmp.dir / "logs" / "shard-0.40.exit", "0\n"));

  std::vector<std::vector<std::string>> calls;
  auto fake = [&](bool accounting) {
    return [&calls, accounting](const std::vector<std::string> &argv) -> util::Expected<util::ProcessResult> {
      calls.push_back(argv);
      util::ProcessResult r;
      r.exit_code = 0;
      if (argv[0] == "squeue") {
        r.stdout_text = "41_2|RUNNING|node3\n40_2|CANCELLED|node3\n";  // the old array task of shard 2 too
      } else if (argv[0] == "sacct" && accounting) {
        r.stdout_text = "40_0|COMPLETED|0:0\n40_1|CANCELLED by 0|0:15\n";
      } else {
        r.exit_code = 1;
        r.stderr_text = "Slurm accounting storage is disabled\n";
      }
      return r;
    };
  };

  auto with = slurm::run_status(tmp.dir, fake(true));
  REQUIRE_MESSAGE(with, (with ? "" : with.error()));
  CHECK(calls.at(0) == std::vector<std::string>{"squeue", "--noheader", "--array", "--states=all",
                                                "--name=ptxbench-r1", "--format=%i|%T|%R"});
  CHECK(calls.at(1).at(0) == "sacct");
  CHECK(calls.at(1).at(4) == "--jobs=40");
  const auto &s = with->shards;
  CHECK(s[2].job == "41_2");
  CHECK(s[2].state == slurm::JobState::running);  // the latest submission decides
  CHECK(s[2].state_source == "squeue");
  CHECK(s[0].state == slurm::JobState::completed);
  CHECK(s[0].state_source == "sacct");
  CHECK(s[1].state == slurm::JobState::cancelled);
  CHECK(s[1].needs_resubmit());
  CHECK_FALSE(s[0].needs_resubmit());
  CHECK_FALSE(s[2].needs_resubmit());
  CHECK(s[0].turns == 1);
  CHECK(s[0].finished == 1);
  CHECK(s[1].finished == 0);
  CHECK(s[0].verdicts.at("compile_error") == 1);
  CHECK(with->table().find("1 shard(s) to resubmit") != std::string::npos);

  calls.clear();
  auto without = slurm::run_status(tmp.dir, fake(false));
  REQUIRE(without);
  CHECK(without->shards[0].state == slurm::JobState::completed);
  CHECK(without->shards[0].state_source == "exit file");
  CHECK(without->shards[1].state == slurm::JobState::unknown);  // killed before writing an exit file
  CHECK(without->shards[1].needs_resubmit());                   // its records decide: unfinished
  REQUIRE(without->notes.size() == 1);
  CHECK(without->notes[0].find("accounting storage is disabled") != std::string::npos);
}

// ---------------------------------------------------------------- verdict services (slurm serve)

namespace {
slurm::ServeJobOptions serve_options() {
  slurm::ServeJobOptions o;
  o.nodes = 3;
  o.gpus_per_node = 2;
  o.port = 9100;
  o.partition = "gpu";
  o.time_limit = "8:00:00";
  o.sbatch_args = {"--qos=high"};
  o.serve_args = {"--workers=4", "--max-queue=512"};
  o.dir = "/shared/serve";
  o.ptxbench = "/opt/ptxbench/bin/ptxbench";
  o.token_env = "SERVE_TOKEN";
  return o;
}
}  // namespace

TEST_CASE(
    "slurm serve: the sbatch script starts one service per GPU and records each endpoint when it listens") {
  const auto o = serve_options();
  REQUIRE(slurm::check_serve_job_options(o));
  const std::string s = slurm::serve_sbatch_script(o);
  for (const char *line :
       {"#SBATCH --job-name=ptxbench-serve\n", "#SBATCH --nodes=3\n", "#SBATCH --ntasks-per-node=1\n",
        "#SBATCH --gres=gpu:2\n", "#SBATCH --output=/shared/serve/logs/serve.%j.out\n",
        "#SBATCH --partition=gpu\n", "#SBATCH --time=8:00:00\n", "#SBATCH --qos=high\n",
        "srun --nodes=3 --ntasks-per-node=1 --gres=gpu:2 --kill-on-bad-exit=0 bash \"$dir/serve.sbatch\" "
        "node\n",
        "for i in $(seq 0 1); do\n", "  port=$((9100 + i))\n", "  prefix=\"n${SLURM_NODEID:-0}g$i\"\n",
        "serve --host 0.0.0.0 --port \"$port\" --id-prefix \"$prefix\" --device \"$i\" '--workers=4' "
        "'--max-queue=512' >\"$log\" 2>&1 &\n",
        "if grep -q 'listening on' \"$log\"; then\n",
        "flock \"$endpoints.lock\" sh -c 'printf \"%s\\n\" \"$1\" >> \"$2\"' _ \"$host:$port $prefix $job\" "
        "\"$endpoints\"\n",
        "export PTXBENCH_SERVE_TOKEN=\"$SERVE_TOKEN\"\n"})
    CHECK_MESSAGE(s.find(line) != std::string::npos, line);
  CHECK(s.rfind("#!/bin/bash\n", 0) == 0);
  CHECK(s.find("endpoints=\"$dir/endpoints.txt\"") != std::string::npos);
  // The batch step hands over to srun before any service starts; the node part never calls srun.
  CHECK(s.find("srun") < s.find("\"$ptxbench\" serve"));

  auto cpu = serve_options();
  cpu.gpus_per_node = 0;
  const std::string c = slurm::serve_sbatch_script(cpu);
  CHECK(c.find("--gres") == std::string::npos);  // neither on #SBATCH nor on srun
  CHECK(c.find("for i in $(seq 0 0); do") != std::string::npos);
  CHECK(c.find("--no-gpu") != std::string::npos);

  auto bad = serve_options();
  bad.dir = "relative/dir";
  bad.serve_args = {"--port=1", "workers"};
  bad.sbatch_args = {"--nodes=4"};
  bad.token_env = "NOT A NAME";
  bad.port = 65535;
  auto problems = slurm::check_serve_job_options(bad);
  REQUIRE_FALSE(problems);
  for (const char *p : {"absolute", "--serve-arg '--port=1'", "--serve-arg 'workers'",
                        "--sbatch-arg '--nodes=4'", "'NOT A NAME'", "65535"})
    CHECK_MESSAGE(problems.error().find(p) != std::string::npos, problems.error());
}

TEST_CASE("slurm balancer: HAProxy config from an endpoints file; polls routed by id prefix") {
  const std::string file =
      "# written by the services\n"
      "gpu-a:9100 n0g0 4242\n"
      "gpu-a:9101 n0g1 4242\n"
      "\n"
      "10.1.2.3:9100 n1g0\n"
      "gpu-a-new:9200 n0g0 4300   # a resubmitted job: the later line wins\n";
  auto endpoints = slurm::parse_endpoints(file);
  REQUIRE_MESSAGE(endpoints, endpoints.error());
  REQUIRE(endpoints->size() == 3);
  CHECK(endpoints->at(0).id_prefix == "n0g1");
  CHECK(endpoints->at(1).host == "10.1.2.3");
  CHECK(endpoints->at(1).job_id.empty());
  CHECK(endpoints->at(2).host == "gpu-a-new");
  CHECK(endpoints->at(2).port == 9200);

  slurm::BalancerOptions options;
  options.bind = "0.0.0.0:8700";
  options.max_wait_s = 60;
  const std::string cfg = slurm::haproxy_config(*endpoints, options);
  for (const char *line :
       {"frontend ptxbench\n  bind 0.0.0.0:8700\n",
        "  use_backend poll_n0g1 if { path_beg /v1/verdicts/vn0g1. }\n",
        "  use_backend poll_n1g0 if { path_beg /v1/verdicts/vn1g0. }\n",
        "  use_backend poll_n0g0 if { path_beg /v1/verdicts/vn0g0. }\n", "  default_backend services\n",
        "backend services\n  balance leastconn\n  option httpchk GET /healthz\n",
        "  http-check expect string \\\"status\\\":\\\"ok\\\"\n", "  server n0g1 gpu-a:9101 check inter 5s\n",
        "  server n0g0 gpu-a-new:9200 check inter 5s\n",
        "backend poll_n1g0\n  server n1g0 10.1.2.3:9100 check inter 5s\n", "  timeout server 120s\n"})
    CHECK_MESSAGE(cfg.find(line) != std::string::npos, line);
  CHECK(cfg.find("gpu-a:9100") == std::string::npos);  // replaced by the resubmitted service

  // Nothing from the file reaches the configuration unchecked.
  auto bad = slurm::parse_endpoints(
      "gpu-a:9100 n0g0\nhost;rm:80 x\ngpu-b:99999 y\ngpu-c:80 bad-prefix\nonly-one-field\ngpu-d:80 z 1 "
      "extra\n");
  REQUIRE_FALSE(bad);
  for (const char *p : {"line 2: 'host;rm:80'", "line 3: port '99999'", "line 4: id prefix 'bad-prefix'",
                        "line 5: 1 fields", "line 6: 4 fields"})
    CHECK_MESSAGE(bad.error().find(p) != std::string::npos, bad.error());
  CHECK(bad.error().find("line 1") == std::string::npos);
  CHECK_FALSE(slurm::parse_endpoints("# nothing yet\n"));
}
