// The repair loop: run config, history policies, stop conditions, endpoint
// failures, Ctrl-C / SIGKILL / disk-full then resume, keys never in traces.
// The chat client and CPU stages are fakes (fast, deterministic); prompts and
// tasks are the real ones; GPU stages are off.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>

#include "agent/shard.hpp"
#include "agent_fixture.hpp"

using namespace ptxbench;
namespace fs = std::filesystem;
using Json = nlohmann::json;

using namespace agent_test;

// ---------------------------------------------------------------- config

TEST_CASE("loop: stop at the target, at the turn limit, at the token budget") {
  ScratchDir tmp;
  auto script = std::make_shared<Script>();
  script->answer = [](const llm::ChatRequest &r) -> util::Expected<llm::ChatResponse, llm::ChatError> {
    // gemm_n7168_k5120 fixes itself at turn 1; gemm_n4096_k4096 never does.
    if (r.task_id == "gemm_n7168_k5120" && r.turn_index >= 1) return text("CORRECT kernel");
    return text("BROKEN kernel");
  };
  auto c = base_config(tmp.dir / "run", 1, 2, 4);
  auto result = run_config(c, script);
  CHECK(result.end == agent::RunEnd::completed);
  CHECK(result.turns_recorded == 2 * 2 + 2 * 4);
  CHECK(script->calls == 12);
  auto all = by_trajectory(tmp.dir / "run");
  REQUIRE(all.size() == 4);
  const auto &fixed = all["m0/gemm_n7168_k5120/0"];
  REQUIRE(fixed.size() == 2);
  CHECK(fixed[0].stop_reason == "");
  CHECK(fixed[0].verdict["status"] == "compile_error");
  CHECK_FALSE(fixed[0].feedback.empty());
  CHECK(fixed[1].stop_reason == "target_reached");
  CHECK(fixed[1].feedback == "");
  // The feedback of turn 0 is the last user message of turn 1's request.
  CHECK(fixed[1].messages->back().content == fixed[0].feedback);
  CHECK(fixed[1].messages->size() == 4);
  const auto &stuck = all["m0/gemm_n4096_k4096/1"];
  REQUIRE(stuck.size() == 4);
  CHECK(stuck[3].stop_reason == "turn_limit");
  CHECK(stuck[3].messages->size() == 8);  // full history
  // Record shape (traces/record.hpp).
  for (const char *key : {"format_version", "run_id", "model", "task_id", "sample", "turn", "trajectory_id",
                          "messages", "response", "request_error", "candidate", "verdict", "feedback",
                          "stop_reason", "timings", "started_at", "finished_at"}) {
    CHECK_MESSAGE(stuck[0].to_json().contains(key), key);  // the line as written (see by_trajectory)
  }
  CHECK(stuck[0].timings->orchestrator_cpu_ms.value_or(0) > 0);
  CHECK(stuck[0].candidate->kernel_source == "BROKEN kernel");
  // run.json
  const Json run = Json::parse(slurp(tmp.dir / "run" / "run.json"));
  CHECK(run["config"]["turns"] == 4);
  CHECK(run["gpu_stages"]["enabled"] == false);
  CHECK(run["program"]["git_revision"].get<std::string>().size() >= 7);
  CHECK(run["tasks"].size() == 2);
  // Summary
  REQUIRE(result.summary.rows.size() == 2);
  CHECK(result.summary.finished_trajectories == 4);
  const auto &row =
      result.summary.rows[0].task_id == "gemm_n7168_k5120" ? result.summary.rows[0] : result.summary.rows[1];
  CHECK(row.correct == 2);
  CHECK(row.best_speedup == doctest::Approx(1.5));
  CHECK(result.summary.table().find("gemm_n4096_k4096") != std::string::npos);

  SUBCASE("token budget per trajectory") {
    auto c2 = base_config(tmp.dir / "budget", 1, 1, 6);
    c2.budgets.per_trajectory = 250;  // 100 tokens per turn: stop after the third turn
    auto r2 = run_config(c2, script);
    CHECK(r2.end == agent::RunEnd::completed);
    auto t = by_trajectory(tmp.dir / "budget")["m0/gemm_n4096_k4096/0"];
    REQUIRE(t.size() == 3);
    CHECK(t[2].stop_reason == "token_budget");
  }
  SUBCASE("history policies in the recorded requests") {
    for (auto [policy, expected] :
         {std::pair{agent::HistoryPolicy::last_attempt, 4}, std::pair{agent::HistoryPolicy::none, 2}}) {
      const fs::path out = tmp.dir / ("h" + agent::to_string(policy));
      auto c3 = base_config(out, 1, 1, 3);
      c3.tasks = {"gemm_n4096_k4096"};
      c3.history = policy;
      run_config(c3, script);
      auto t = by_trajectory(out)["m0/gemm_n4096_k4096/0"];
      REQUIRE(t.size() == 3);
      CHECK(t[2].messages->size() == static_cast<std::size_t>(expected));
    }
  }
}

TEST_CASE("loop: a dead endpoint is not hammered; other endpoints go on") {
  ScratchDir tmp;
  auto script = std::make_shared<Script>();
  std::atomic<int> dead_calls{0};
  script->answer = [&](const llm::ChatRequest &) -> util::Expected<llm::ChatResponse, llm::ChatError> {
    return text("BROKEN kernel");  // endpoint m1 answers; m0 (below) always fails with 401
  };
  auto c = base_config(tmp.dir / "run", 2, 3, 2);
  c.concurrency.endpoint_failures_before_dead = 2;
  c.endpoints[0].max_in_flight =
      1;  // sequential, so exactly two requests fail before the endpoint is given up
  auto services = fake_services(script);
  services.make_client =
      [&](const llm::EndpointConfig &e) -> util::Expected<std::unique_ptr<llm::ChatClient>> {
    if (e.name == "m0") {
      auto failing = std::make_shared<Script>();
      failing->answer = [&](const llm::ChatRequest &) -> util::Expected<llm::ChatResponse, llm::ChatError> {
        ++dead_calls;
        return util::unexpected(llm::ChatError{
            llm::ChatErrorKind::http_status, 401, "HTTP 401 Unauthorized: check the key in $MY_KEY", 1, {}});
      };
      return std::unique_ptr<llm::ChatClient>(new FakeClient(failing));
    }
    return std::unique_ptr<llm::ChatClient>(new FakeClient(script));
  };
  auto runner = agent::Runner::start(c, services, quiet());
  REQUIRE(runner);
  auto result = (*runner)->run();
  CHECK(result.end == agent::RunEnd::completed);
  CHECK(dead_calls == 2);
  auto all = by_trajectory(tmp.dir / "run");
  int sent_failures = 0, not_sent = 0, good = 0;
  for (const auto &[id, records] : all) {
    if (id.rfind("m0/", 0) == 0) {
      REQUIRE(records.size() == 1);  // a failed request ends the trajectory
      CHECK(records[0].stop_reason == "request_failed");
      CHECK_FALSE(records[0].response);
      REQUIRE(records[0].request_error);
      CHECK(records[0].request_error->http_status == 401);
      const std::string msg = records[0].request_error->message;
      if (msg.rfind("not sent", 0) == 0) {
        ++not_sent;
        CHECK(msg.find("failed 2 requests in a row") != std::string::npos);
        CHECK(msg.find("check the key") != std::string::npos);
      } else {
        ++sent_failures;
      }
    } else {
      ++good;
      REQUIRE(records.size() == 2);
    }
  }
  CHECK(sent_failures == 2);
  CHECK(not_sent == 4);
  CHECK(good == 6);
}

TEST_CASE("loop: Ctrl-C stops cleanly (resumable), then resume finishes with no turn lost or duplicated") {
  ScratchDir tmp;
  auto script = std::make_shared<Script>();
  std::atomic<int> interrupts{0};
  script->delay = std::chrono::milliseconds(5);
  script->answer = [&](const llm::ChatRequest &) -> util::Expected<llm::ChatResponse, llm::ChatError> {
    if (script->calls >= 10) interrupts = 1;  // "Ctrl-C" while requests are in flight
    return text("BROKEN");
  };
  auto c = base_config(tmp.dir / "run", 2, 3, 3);
  agent::RunOptions o = quiet();
  o.interrupts = &interrupts;
  auto first = run_config(c, script, o);
  CHECK(first.end == agent::RunEnd::interrupted);
  CHECK(first.turns_recorded >= 1);
  CHECK(first.turns_recorded < 2 * 2 * 3 * 3);
  auto partial = traces::load_run(tmp.dir / "run");
  REQUIRE(partial);
  CHECK(static_cast<int>(partial->turns.size()) == first.turns_recorded);

  std::atomic<int> no_interrupts{0};
  agent::RunOptions o2 = quiet();
  o2.interrupts = &no_interrupts;
  auto resumed = agent::Runner::resume(tmp.dir / "run", fake_services(script), o2);
  REQUIRE(resumed);
  auto second = (*resumed)->run();
  CHECK(second.end == agent::RunEnd::completed);
  CHECK(first.turns_recorded + second.turns_recorded == 2 * 2 * 3 * 3);
  check_exactly_once(tmp.dir / "run", 12, 3);
  const Json run = Json::parse(slurp(tmp.dir / "run" / "run.json"));
  CHECK(run["resumes"].size() == 1);

  // Resuming a finished run does nothing and succeeds.
  auto again = agent::Runner::resume(tmp.dir / "run", fake_services(script), quiet());
  REQUIRE(again);
  auto third = (*again)->run();
  CHECK(third.end == agent::RunEnd::completed);
  CHECK(third.turns_recorded == 0);
}

TEST_CASE(
    "loop: a stop ends with the GPU stage in progress; the turns queued for the GPU are redone on resume") {
  ScratchDir tmp;
  auto script = std::make_shared<Script>();
  script->answer = [](const llm::ChatRequest &) -> util::Expected<llm::ChatResponse, llm::ChatError> {
    return text("CORRECT");
  };
  std::atomic<int> interrupts{0}, gpu_runs{0};
  agent::RunServices s = fake_services(script);
  s.gpu_unavailable_reason = [](const evaluator::EvaluatorSettings &) { return std::string(); };
  s.probe_environment = [](const evaluator::EvaluatorSettings &) { return Json{{"device_count", 1}}; };
  s.cpu_stages = [](const tasks::Task &task, std::string_view response, evaluator::ParsedCandidate,
                    const evaluator::EvaluatorSettings &e) {
    evaluator::CompiledCandidate c = fake_cpu_stages(task, response, {}, e);
    c.cubin = "cubin";
    c.plans.resize(1);  // ready for the GPU stages
    return c;
  };
  s.gpu_stages = [&](evaluator::CompiledCandidate &, const tasks::Task &,
                     const evaluator::EvaluatorSettings &) {
    if (++gpu_runs == 2) interrupts = 1;  // "Ctrl-C" during the second GPU stage
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
  };
  auto c = base_config(tmp.dir / "run", 1, 4, 1);  // 2 tasks x 4 samples x 1 turn: 8 GPU stages
  c.evaluator.run_gpu = true;
  c.stop = agent::StopTarget{false, false, std::nullopt};
  agent::RunOptions o = quiet();
  o.interrupts = &interrupts;
  const auto t0 = std::chrono::steady_clock::now();
  auto first = agent::Runner::start(c, s, o);
  REQUIRE(first);
  const agent::RunResult r = (*first)->run();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  CHECK(r.end == agent::RunEnd::interrupted);
  // The stop is seen within 0.1 s, while the second stage runs: no third one starts (one more at most
  // on a slow machine), and the queue (up to 6 stages, 1.8 s) is not drained.
  CHECK(gpu_runs.load() <= 3);
  CHECK(r.turns_recorded == gpu_runs.load());
  CHECK(r.turns_abandoned >= 1);
  CHECK(seconds < 0.3 * 6);

  std::atomic<int> none{0};
  agent::RunOptions o2 = quiet();
  o2.interrupts = &none;
  auto resumed = agent::Runner::resume(tmp.dir / "run", s, o2);
  REQUIRE(resumed);
  const agent::RunResult second = (*resumed)->run();
  CHECK(second.end == agent::RunEnd::completed);
  CHECK(r.turns_recorded + second.turns_recorded == 8);
  check_exactly_once(tmp.dir / "run", 8, 1);
}

TEST_CASE(
    "loop: SIGKILL mid-run (child process), then resume: every trajectory has turns 0..n-1 exactly once") {
  ScratchDir tmp;
  const fs::path dir = tmp.dir / "run";
  auto c = base_config(dir, 2, 4, 4);
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    auto script = std::make_shared<Script>();
    script->delay = std::chrono::milliseconds(100);
    script->answer = [](const llm::ChatRequest &) -> util::Expected<llm::ChatResponse, llm::ChatError> {
      return text(std::string(2000, 'B'));  // BROKEN-like: never correct
    };
    auto runner = agent::Runner::start(c, fake_services(script), quiet());
    if (!runner) ::_exit(3);
    (*runner)->run();
    ::_exit(0);
  }
  // Wait until some turns are recorded, then kill without warning.
  const fs::path trace = dir / "trajectories.jsonl";
  for (int i = 0; i < 500; ++i) {
    std::error_code ec;
    if (fs::exists(trace, ec) && fs::file_size(trace, ec) > 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ::kill(pid, SIGKILL);
  int status = 0;
  ::waitpid(pid, &status, 0);
  REQUIRE(WIFSIGNALED(status));
  // Simulate the kill landing mid-write: a partial record at the end.
  {
    std::ofstream out(trace, std::ios::app | std::ios::binary);
    out << R"({"format_version":1,"trajectory_id":"m0/gemm_n7168_k5120/0","turn":3,"mess)";
  }
  auto before = traces::load_run(dir);
  REQUIRE(before);
  CHECK(before->skipped_partial_lines == 1);
  const std::size_t kept = before->turns.size();
  CHECK(kept > 0);
  CHECK(kept < 64);

  auto script = std::make_shared<Script>();
  script->answer = [](const llm::ChatRequest &) -> util::Expected<llm::ChatResponse, llm::ChatError> {
    return text(std::string(2000, 'B'));
  };
  auto resumed = agent::Runner::resume(dir, fake_services(script), quiet());
  REQUIRE(resumed);
  auto result = (*resumed)->run();
  CHECK(result.end == agent::RunEnd::completed);
  CHECK(kept + static_cast<std::size_t>(result.turns_recorded) == 64);
  CHECK(script->calls == result.turns_recorded);
  check_exactly_once(dir, 16, 4);
}

TEST_CASE(
    "loop: disk full (RLIMIT_FSIZE) stops the run with a clear message; the trace stays valid; resume "
    "works") {
  ScratchDir tmp;
  const fs::path dir = tmp.dir / "run";
  auto c = base_config(dir, 1, 3, 3);
  int pipefd[2];
  REQUIRE(::pipe(pipefd) == 0);
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    ::close(pipefd[0]);
    rlimit lim{};
    lim.rlim_cur = lim.rlim_max = 60'000;  // bytes: run.json fits, a few records fit
    ::setrlimit(RLIMIT_FSIZE, &lim);
    auto script = std::make_shared<Script>();
    script->answer = [](const llm::ChatRequest &) -> util::Expected<llm::ChatResponse, llm::ChatError> {
      return text(std::string(8000, 'B'));
    };
    auto runner = agent::Runner::start(c, fake_services(script), quiet());
    if (!runner) ::_exit(3);
    auto r = (*runner)->run();
    (void)!::write(pipefd[1], r.message.data(), r.message.size());
    ::_exit(r.end == agent::RunEnd::write_failed ? 42 : 43);
  }
  ::close(pipefd[1]);
  std::string message;
  char buf[4096];
  for (ssize_t n; (n = ::read(pipefd[0], buf, sizeof buf)) > 0;)
    message.append(buf, static_cast<std::size_t>(n));
  ::close(pipefd[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 42);
  CHECK(message.find("file size limit") != std::string::npos);
  CHECK(message.find("ptxbench resume") != std::string::npos);
  const std::string text_before = slurp(dir / "trajectories.jsonl");
  REQUIRE_FALSE(text_before.empty());
  CHECK(text_before.back() == '\n');
  auto before = traces::load_run(dir);
  REQUIRE(before);
  CHECK(before->skipped_partial_lines == 0);
  CHECK(before->turns.size() < 18);

  auto script = std::make_shared<Script>();
  script->answer = [](const llm::ChatRequest &) -> util::Expected<llm::ChatResponse, llm::ChatError> {
    return text(std::string(8000, 'B'));
  };
  auto resumed = agent::Runner::resume(dir, fake_services(script), quiet());
  REQUIRE(resumed);
  CHECK((*resumed)->run().end == agent::RunEnd::completed);
  check_exactly_once(dir, 6, 3);
}

TEST_CASE(
    "real client, unreachable endpoint: recorded per turn, run completes, the API key never reaches the run "
    "dir") {
  ScratchDir tmp;
  const std::string key = "sk-ptxbench-test-secret-8f3a1c";
  ::setenv("PTXBENCH_TEST_API_KEY", key.c_str(), 1);
  auto c = base_config(tmp.dir / "run", 1, 2, 2);
  c.endpoints[0].base_url = "http://127.0.0.1:1/v1";  // nothing listens on port 1
  c.endpoints[0].api_key_env = "PTXBENCH_TEST_API_KEY";
  c.endpoints[0].max_retries = 0;
  c.endpoints[0].request_timeout = std::chrono::milliseconds(3000);
  agent::RunServices services = agent::RunServices::defaults();
  services.cpu_stages = fake_cpu_stages;
  auto runner = agent::Runner::start(c, services, quiet());
  REQUIRE(runner);
  auto result = (*runner)->run();
  CHECK(result.end == agent::RunEnd::completed);
  auto all = by_trajectory(tmp.dir / "run");
  REQUIRE(all.size() == 4);
  for (const auto &[id, records] : all) {
    REQUIRE(records.size() == 1);
    CHECK(records[0].stop_reason == "request_failed");
    REQUIRE(records[0].request_error);
    CHECK_FALSE(records[0].request_error->message.empty());
  }
  for (const auto &entry : fs::recursive_directory_iterator(tmp.dir)) {
    if (entry.is_regular_file())
      CHECK_MESSAGE(slurp(entry.path()).find(key) == std::string::npos, entry.path());
  }
  const Json run = Json::parse(slurp(tmp.dir / "run" / "run.json"));
  CHECK(run["config"]["endpoints"][0]["api_key_env"] == "PTXBENCH_TEST_API_KEY");
  ::unsetenv("PTXBENCH_TEST_API_KEY");
}

TEST_CASE("setup errors are clear: unknown task, existing run directory") {
  ScratchDir tmp;
  auto script = std::make_shared<Script>();
  script->answer = [](const llm::ChatRequest &) -> util::Expected<llm::ChatResponse, llm::ChatError> {
    return text("x");
  };
  auto c = base_config(tmp.dir / "run");
  c.tasks = {"gemm_nope"};
  auto r = agent::Runner::start(c, fake_services(script), quiet());
  REQUIRE_FALSE(r);
  CHECK(r.error().find("unknown task 'gemm_nope'") != std::string::npos);
  CHECK(r.error().find("gemm_n7168_k5120") != std::string::npos);

  auto ok = base_config(tmp.dir / "run2", 1, 1, 1);
  run_config(ok, script);
  auto twice = agent::Runner::start(ok, fake_services(script), quiet());
  REQUIRE_FALSE(twice);
  CHECK(twice.error().find("ptxbench resume") != std::string::npos);
}

// ---------------------------------------------------------------- variants

TEST_CASE("loop: with reuse_verdicts false every resent kernel is evaluated afresh") {
  ScratchDir tmp;
  const std::string kernel = slurp(fs::path(PTXBENCH_SOURCE_DIR) / "tasks" / "solutions" /
                                   "gemm_n7168_k5120" / "wgmma_tma" / "response.md");
  REQUIRE_FALSE(kernel.empty());
  auto script = std::make_shared<Script>();
  script->answer = [&](const llm::ChatRequest &) -> util::Expected<llm::ChatResponse, llm::ChatError> {
    return text(kernel);
  };
  std::atomic<int> compiled{0};
  auto services = fake_services(script);
  services.cpu_stages = [&](const tasks::Task &task, std::string_view response, evaluator::ParsedCandidate,
                            const evaluator::EvaluatorSettings &s) {
    ++compiled;
    return fake_cpu_stages(task, response, {}, s);
  };
  auto c = base_config(tmp.dir / "run", 1, 1, 3);
  c.tasks = {"gemm_n7168_k5120"};
  c.reuse_verdicts = false;
  auto runner = agent::Runner::start(c, services, quiet());
  REQUIRE(runner);
  const auto result = (*runner)->run();
  CHECK(compiled == 3);
  CHECK(result.verdicts_reused == 0);
  auto turns = by_trajectory(tmp.dir / "run")["m0/gemm_n7168_k5120/0"];
  REQUIRE(turns.size() == 3);
  for (const auto &t : turns) CHECK(t.verdict["reused_from"].is_null());
  const Json saved = Json::parse(slurp(tmp.dir / "run" / "run.json"));
  CHECK(saved["config"]["reuse_verdicts"] == false);
}

TEST_CASE("loop: one run seed per run: drawn, recorded, in every evaluation's settings, kept on resume") {
  ScratchDir tmp;
  auto script = std::make_shared<Script>();
  std::atomic<int> interrupts{0};
  script->delay = std::chrono::milliseconds(5);
  script->answer = [&](const llm::ChatRequest &) -> util::Expected<llm::ChatResponse, llm::ChatError> {
    if (script->calls >= 4) interrupts = 1;  // stopped part-way, then resumed
    return text("BROKEN");
  };
  std::mutex mutex;
  std::set<std::uint64_t> seen;  // the run seeds the evaluations were given
  const auto services = [&] {
    auto s = fake_services(script);
    s.cpu_stages = [&](const tasks::Task &t, std::string_view r, evaluator::ParsedCandidate,
                       const evaluator::EvaluatorSettings &st) {
      {
        std::lock_guard lock(mutex);
        seen.insert(st.run_seed);
      }
      return fake_cpu_stages(t, r, {}, st);
    };
    return s;
  };
  agent::RunOptions o = quiet();
  o.interrupts = &interrupts;
  auto runner = agent::Runner::start(base_config(tmp.dir / "run", 1, 2, 3), services(), o);
  REQUIRE(runner);
  const auto first = (*runner)->run();
  CHECK(first.end == agent::RunEnd::interrupted);
  REQUIRE(first.turns_recorded >= 1);
  const Json run = Json::parse(slurp(tmp.dir / "run" / "run.json"));
  REQUIRE(run["run_seed"].is_number_unsigned());
  const auto seed = run["run_seed"].get<std::uint64_t>();
  CHECK(seed != 0);
  CHECK(run["evaluator_settings"]["run_seed"] == seed);
  CHECK_FALSE(run["config"]["evaluator"].contains("run_seed"));  // drawn, not configured: same config hash
  CHECK(seen == std::set<std::uint64_t>{seed});

  std::atomic<int> none{0};
  agent::RunOptions o2 = quiet();
  o2.interrupts = &none;
  auto resumed = agent::Runner::resume(tmp.dir / "run", services(), o2);
  REQUIRE(resumed);
  CHECK((*resumed)->run().end == agent::RunEnd::completed);
  CHECK(seen == std::set<std::uint64_t>{seed});  // the turns after the resume had the same inputs' seed
  CHECK(Json::parse(slurp(tmp.dir / "run" / "run.json"))["run_seed"] == seed);

  // Another run draws another; a configured seed is used as given and kept in the config.
  seen.clear();
  interrupts = 0;
  script->answer = [&](const llm::ChatRequest &) -> util::Expected<llm::ChatResponse, llm::ChatError> {
    return text("BROKEN");
  };
  auto other = agent::Runner::start(base_config(tmp.dir / "run2", 1, 1, 1), services(), quiet());
  REQUIRE(other);
  (*other)->run();
  REQUIRE(seen.size() == 1);
  CHECK(*seen.begin() != seed);
  seen.clear();
  auto configured = base_config(tmp.dir / "run3", 1, 1, 1);
  configured.evaluator.run_seed = 424242;
  auto given = agent::Runner::start(configured, services(), quiet());
  REQUIRE(given);
  (*given)->run();
  CHECK(seen == std::set<std::uint64_t>{424242});
  const Json run3 = Json::parse(slurp(tmp.dir / "run3" / "run.json"));
  CHECK(run3["run_seed"] == 424242);
  CHECK(run3["config"]["evaluator"]["run_seed"] == 424242);

  // Shards without a configured seed derive it from the shared run id: the same in every shard.
  CHECK(agent::shard_run_seed("cfg-0123") == agent::shard_run_seed("cfg-0123"));
  CHECK(agent::shard_run_seed("cfg-0123") != agent::shard_run_seed("cfg-0124"));
  CHECK(agent::shard_run_seed("cfg-0123") < (std::uint64_t{1} << 53));
}

TEST_CASE("loop: resume keeps run.json's resumes history, its run seed and keys this version does not know") {
  ScratchDir tmp;
  auto script = std::make_shared<Script>();
  std::atomic<int> interrupts{0};
  script->delay = std::chrono::milliseconds(5);
  script->answer = [&](const llm::ChatRequest &) -> util::Expected<llm::ChatResponse, llm::ChatError> {
    if (script->calls >= 3) interrupts = 1;
    return text("BROKEN");
  };
  agent::RunOptions o = quiet();
  o.interrupts = &interrupts;
  auto runner = agent::Runner::start(base_config(tmp.dir / "run", 1, 2, 3), fake_services(script), o);
  REQUIRE(runner);
  CHECK((*runner)->run().end == agent::RunEnd::interrupted);
  const fs::path run_json = tmp.dir / "run" / "run.json";
  Json first = Json::parse(slurp(run_json));
  const auto seed = first["run_seed"].get<std::uint64_t>();
  first["from_a_later_version"] = {{"kept", true}};  // unknown keys survive a resume's rewrite
  first["program"]["build_host"] = "h1";
  const auto rewrite = [&](const Json &j) {
    std::ofstream out(run_json, std::ios::trunc);
    out << j.dump(2);
  };
  rewrite(first);

  std::atomic<int> none{0};
  agent::RunOptions o2 = quiet();
  o2.interrupts = &none;
  Json first_resume;
  for (int session = 1; session <= 2; ++session) {  // the second finds nothing left to do
    auto resumed = agent::Runner::resume(tmp.dir / "run", fake_services(script), o2);
    REQUIRE(resumed);
    CHECK((*resumed)->run().end == agent::RunEnd::completed);
    if (session == 1) first_resume = Json::parse(slurp(run_json))["resumes"][0];
  }
  auto run = traces::load_run(tmp.dir / "run");
  REQUIRE(run);
  REQUIRE(run->run_error.empty());
  const traces::RunRecord &r = run->run;
  CHECK(r.run_seed == seed);
  CHECK(r.created_at == first["created_at"].get<std::string>());
  REQUIRE(r.resumes.size() == 2);
  CHECK(r.resumes[0].at <= r.resumes[1].at);
  CHECK(r.resumes[0].gpu_stages->reason == "disabled by --no-gpu");
  CHECK(r.extra["from_a_later_version"]["kept"] == true);
  CHECK(r.program->extra["build_host"] == "h1");
  CHECK(r.throughput);
  CHECK(Json::parse(slurp(run_json))["resumes"][0] == first_resume);  // history is appended, never rewritten

  // A malformed field refuses the resume, naming it; the file is left as it was.
  Json bad = Json::parse(slurp(run_json));
  bad["run_seed"] = "seven";
  rewrite(bad);
  auto refused = agent::Runner::resume(tmp.dir / "run", fake_services(script), o2);
  REQUIRE_FALSE(refused);
  CHECK(refused.error().find("run.json: run_seed: ") != std::string::npos);
  CHECK(refused.error().find("cannot resume") != std::string::npos);
  CHECK(Json::parse(slurp(run_json))["run_seed"] == "seven");

  // A run.json made before run seeds were recorded gets the seed of the session that resumes it.
  bad.erase("run_seed");
  rewrite(bad);
  auto old = agent::Runner::resume(tmp.dir / "run", fake_services(script), o2);
  REQUIRE(old);
  (*old)->run();
  const Json after = Json::parse(slurp(run_json));
  CHECK(after["run_seed"].is_number_unsigned());
  CHECK(after["run_seed"] != 0);
  CHECK(after["resumes"].size() == 3);
}

TEST_CASE("loop: the sampling seed is seed + sample index, and each record says which it sent") {
  ScratchDir tmp;
  auto script = std::make_shared<Script>();
  std::mutex mutex;
  std::map<int, std::set<std::int64_t>> seeds;  // sample -> seeds sent
  script->answer = [&](const llm::ChatRequest &r) -> util::Expected<llm::ChatResponse, llm::ChatError> {
    std::lock_guard lock(mutex);
    seeds[r.sample_index].insert(r.sampling.seed.value_or(-1));
    return text("BROKEN");
  };
  auto c = base_config(tmp.dir / "run", 1, 3, 2);
  c.sampling.seed = 1000;
  run_config(c, script);
  REQUIRE(seeds.size() == 3);
  for (int s = 0; s < 3; ++s) CHECK(seeds[s] == std::set<std::int64_t>{1000 + s});
  for (const auto &[id, records] : by_trajectory(tmp.dir / "run"))
    for (const auto &r : records) CHECK(r.seed == 1000 + r.sample);

  auto unseeded = base_config(tmp.dir / "run2", 1, 1, 1);
  seeds.clear();
  run_config(unseeded, script);
  CHECK(seeds[0] == std::set<std::int64_t>{-1});  // no seed configured: none sent
  for (const auto &[id, records] : by_trajectory(tmp.dir / "run2")) CHECK_FALSE(records[0].seed);
}

TEST_CASE("loop: an answer cut at max_tokens gets its own feedback; estimated usage is marked in the trace") {
  ScratchDir tmp;
  auto script = std::make_shared<Script>();
  script->answer = [](const llm::ChatRequest &r) -> util::Expected<llm::ChatResponse, llm::ChatError> {
    auto t = text(r.turn_index == 0 ? "kernel ... CUTMANIFEST {\"grid\": [" : "BROKEN");
    if (r.turn_index == 0) t.finish_reason = "length";
    t.usage.estimated = true;
    t.usage.estimate_reason = "the server sent no usage";
    return t;
  };
  auto c = base_config(tmp.dir / "run", 1, 1, 2);
  c.tasks = {"gemm_n4096_k4096"};
  c.sampling.max_tokens = 512;
  run_config(c, script);
  auto records = by_trajectory(tmp.dir / "run")["m0/gemm_n4096_k4096/0"];
  REQUIRE(records.size() == 2);
  REQUIRE(records[0].response);
  CHECK(records[0].response->finish_reason == "length");
  const std::string feedback = records[0].feedback;
  CHECK(feedback.find("cut off at max_tokens (512 tokens)") != std::string::npos);
  CHECK(feedback.find("send a shorter one") != std::string::npos);
  CHECK(records[0].response->usage.estimated == true);
  CHECK(records[0].response->usage.estimate_reason == "the server sent no usage");
}

TEST_CASE(
    "loop: request failures are counted for the exit code, each distinct error is shown once, and "
    "resume retries them") {
  ScratchDir tmp;
  const fs::path dir = tmp.dir / "run";
  auto script = std::make_shared<Script>();
  std::atomic<bool> outage{true};
  script->answer = [&](const llm::ChatRequest &r) -> util::Expected<llm::ChatResponse, llm::ChatError> {
    if (outage && r.sample_index == 1)
      return util::unexpected(llm::ChatError{llm::ChatErrorKind::network,
                                             0,
                                             "cannot reach http://127.0.0.1:9/v1/chat/completions: "
                                             "Connection refused after " +
                                                 std::to_string(r.turn_index + 7) + " ms",
                                             3,
                                             {}});
    return text("BROKEN");
  };
  auto c = base_config(dir, 1, 2, 2);
  c.concurrency.endpoint_failures_before_dead = 100;
  std::FILE *log = std::tmpfile();
  REQUIRE(log != nullptr);
  agent::RunOptions o;
  o.progress = agent::ProgressMode::lines;
  o.log = log;
  auto first = run_config(c, script, o);
  CHECK(first.end == agent::RunEnd::completed);
  CHECK(first.request_failures == 2);  // sample 1 of both tasks
  std::fflush(log);
  std::rewind(log);
  std::string printed;
  for (int ch; (ch = std::fgetc(log)) != EOF;) printed.push_back(static_cast<char>(ch));
  std::fclose(log);
  std::size_t shown = 0;
  for (auto pos = printed.find("Connection refused"); pos != std::string::npos;
       pos = printed.find("Connection refused", pos + 1))
    ++shown;
  CHECK(shown == 1);
  CHECK(printed.find("error: endpoint 'm0'") != std::string::npos);

  outage = false;
  auto resumed = agent::Runner::resume(dir, fake_services(script), quiet());
  REQUIRE(resumed);
  auto second = (*resumed)->run();
  CHECK(second.end == agent::RunEnd::completed);
  CHECK(second.retried_request_failures == 2);
  CHECK(second.request_failures == 0);
  CHECK(second.turns_recorded == 4);  // turns 0 and 1 of the two failed trajectories
  // The summary counts each turn once: the retried record replaces the failed one.
  CHECK(second.summary.turns == 8);
  auto loaded = traces::load_run(dir);
  REQUIRE(loaded);
  CHECK(loaded->turns.size() == 10);  // the two failure records stay in the file
  // A second resume has nothing left to do.
  auto again = agent::Runner::resume(dir, fake_services(script), quiet());
  REQUIRE(again);
  auto third = (*again)->run();
  CHECK(third.retried_request_failures == 0);
  CHECK(third.turns_recorded == 0);
}
