// The repair loop's test fixtures, shared by test_agent.cpp and test_agent_config.cpp: a scripted fake
// chat client, CPU-stage fakes, a base run config, and readers of a run directory's records.
#pragma once

#include <doctest/doctest.h>

#include <atomic>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>

#include "agent/conversation.hpp"
#include "agent/run_config.hpp"
#include "agent/runner.hpp"
#include "support/support.hpp"
#include "traces/record.hpp"

namespace agent_test {
using namespace ptxbench;
namespace fs = std::filesystem;
using Json = nlohmann::json;
}  // namespace agent_test

namespace agent_test {

using test::ScratchDir;
using test::slurp;

/// Answers from a function of (task, sample, turn); counts calls.
struct Script {
  std::function<util::Expected<llm::ChatResponse, llm::ChatError>(const llm::ChatRequest &)> answer;
  std::atomic<int> calls{0};
  std::chrono::milliseconds delay{0};
};

class FakeClient : public llm::ChatClient {
 public:
  explicit FakeClient(std::shared_ptr<Script> s) : script_(std::move(s)) {}
  util::Expected<llm::ChatResponse, llm::ChatError> complete(const llm::ChatRequest &r) override {
    ++script_->calls;
    const auto until = std::chrono::steady_clock::now() + script_->delay;
    while (std::chrono::steady_clock::now() < until) {
      if (cancelled_)
        return util::unexpected(llm::ChatError{llm::ChatErrorKind::cancelled, 0, "cancelled", 1, {}});
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return script_->answer(r);
  }
  void cancel() override { cancelled_ = true; }

 private:
  std::shared_ptr<Script> script_;
  std::atomic<bool> cancelled_{false};
};

inline llm::ChatResponse text(const std::string &content, std::int64_t tokens = 100) {
  llm::ChatResponse r;
  r.content = content;
  r.finish_reason = "stop";
  r.usage.prompt_tokens = tokens / 2;
  r.usage.completion_tokens = tokens - tokens / 2;
  return r;
}

/// CPU stages keyed on the response text: "CORRECT" reaches the target, "SLOW" is correct at 0.5x, else
/// compile_error.
inline evaluator::CompiledCandidate fake_cpu_stages(const tasks::Task &task, std::string_view response,
                                                    evaluator::ParsedCandidate,
                                                    const evaluator::EvaluatorSettings &) {
  evaluator::CompiledCandidate c;
  auto &v = c.verdict;
  v.task_id = task.id;
  v.kernel_hash = "h" + std::to_string(response.size());
  v.parse.status = evaluator::Status::ok;
  c.response.kernel_source = std::string(response);
  c.response.manifest_text = "{}";
  v.static_checks.status = evaluator::Status::ok;
  if (response.find("CORRECT") != std::string_view::npos || response.find("SLOW") != std::string_view::npos) {
    v.compile.status = evaluator::Status::ok;
    v.correctness.status = evaluator::Status::ok;
    v.execution.status = evaluator::Status::ok;
    v.timing.status = evaluator::Status::ok;
    v.axes.correct = true;
    v.axes.targets_executed = true;
    v.axes.speedup = response.find("SLOW") != std::string_view::npos ? 0.5 : 1.5;
  } else if (response.find("CUTMANIFEST") != std::string_view::npos) {
    // An answer cut off inside its manifest block: the kernel parsed, the manifest did not.
    v.parse.status = evaluator::Status::bad_manifest;
    v.parse.summary = "the manifest block is not closed";
    v.static_checks.status = evaluator::Status::skipped;
    v.compile.status = evaluator::Status::skipped;
  } else {
    v.compile.status = evaluator::Status::compile_error;
    v.compile.summary = "ptxas: syntax error";
    v.compile.diagnostics.push_back({"error", "syntax error near 'fma'", 12});
  }
  v.finalize_status();
  return c;
}

inline agent::RunServices fake_services(std::shared_ptr<Script> script) {
  agent::RunServices s = agent::RunServices::defaults();
  s.make_client = [script](const llm::EndpointConfig &) -> util::Expected<std::unique_ptr<llm::ChatClient>> {
    return std::unique_ptr<llm::ChatClient>(new FakeClient(script));
  };
  s.cpu_stages = fake_cpu_stages;
  s.gpu_stages = [](evaluator::CompiledCandidate &, const tasks::Task &,
                    const evaluator::EvaluatorSettings &) { FAIL("GPU stages must not run in these tests"); };
  return s;
}

inline agent::RunConfig base_config(const fs::path &out, int models = 1, int samples = 2, int turns = 3) {
  agent::RunConfig c;
  for (int m = 0; m < models; ++m) {
    llm::EndpointConfig e;
    e.name = "m" + std::to_string(m);
    e.model = e.name;
    e.base_url = "http://127.0.0.1:9/v1";  // never contacted: the client is fake
    e.max_in_flight = 4;
    c.endpoints.push_back(e);
  }
  c.tasks = {"gemm_n7168_k5120", "gemm_n4096_k4096"};
  c.samples = samples;
  c.turns = turns;
  c.evaluator.run_gpu = false;
  c.concurrency.compile_workers = 2;
  c.out_dir = out;
  return c;
}

inline agent::RunOptions quiet() {
  agent::RunOptions o;
  o.progress = agent::ProgressMode::quiet;
  return o;
}

inline agent::RunResult run_config(agent::RunConfig c, std::shared_ptr<Script> script,
                                   agent::RunOptions o = quiet()) {
  auto runner = agent::Runner::start(std::move(c), fake_services(std::move(script)), o);
  if (!runner) FAIL(runner.error());
  return (*runner)->run();
}

inline std::map<std::string, std::vector<traces::TurnRecord>> by_trajectory(const fs::path &dir) {
  auto run = traces::load_run(dir);
  REQUIRE(run);
  CHECK(run->skipped_partial_lines == 0);
  // Each line the runner wrote reads into the typed record and writes back byte for byte.
  std::istringstream lines(slurp(dir / "trajectories.jsonl"));
  std::string line;
  while (std::getline(lines, line)) {
    const std::string again = traces::TurnRecord::from_json(Json::parse(line))
                                  .to_json()
                                  .dump(-1, ' ', false, Json::error_handler_t::replace);
    CHECK(again == line);
  }
  std::map<std::string, std::vector<traces::TurnRecord>> out;
  for (auto &r : run->turns) out[r.trajectory_id].push_back(r);
  for (auto &[id, v] : out) {
    std::sort(v.begin(), v.end(),
              [](const traces::TurnRecord &a, const traces::TurnRecord &b) { return a.turn < b.turn; });
  }
  return out;
}

/// Every trajectory has turns 0..n-1 exactly once, and its last record (only) carries a stop reason.
inline void check_exactly_once(const fs::path &dir, std::size_t trajectories, int turns_each) {
  auto all = by_trajectory(dir);
  CHECK(all.size() == trajectories);
  for (const auto &[id, records] : all) {
    INFO(id);
    REQUIRE(records.size() == static_cast<std::size_t>(turns_each));
    for (int i = 0; i < turns_each; ++i) {
      CHECK(records[static_cast<std::size_t>(i)].turn == i);
      CHECK((records[static_cast<std::size_t>(i)].stop_reason == "") == (i + 1 < turns_each));
    }
  }
}

}  // namespace agent_test
