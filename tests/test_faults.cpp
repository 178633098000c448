// Endpoint faults during a whole run: the real OpenAI client against the fake server
// (tests/fake_openai_server.py) and a socket that resets every connection, driven by the agent's
// Runner. Each fault is retried or recorded per turn and the run completes.
//
// Faults already covered elsewhere (not repeated):
// - client level: 5xx burst retried, hang -> timeout, stalled / trickling stream -> timeout with the
//   partial text, stream cut short -> bad_response, unreachable endpoint -> network error
//   (test_llm_clients.cpp);
// - run level: unreachable endpoint recorded per turn and the run completes, API key never in the run
//   dir; SIGINT then resume with no turn lost or duplicated; SIGKILL then resume; trace disk full
//   (RLIMIT_FSIZE) -> clear message, valid trace, resume works (test_agent.cpp);
// - trace writer: EFBIG leaves only complete records (test_traces.cpp);
// - GPU: worker killed from outside, sticky CUDA errors, hangs, then the next candidate evaluates
//   (test_adversarial.cpp, label gpu).
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "agent/run_config.hpp"
#include "agent/runner.hpp"
#include "support/support.hpp"
#include "traces/record.hpp"

using namespace ptxbench;
namespace fs = std::filesystem;
using Json = nlohmann::json;

namespace {

using test::Clock;
using test::ScratchDir;
using test::seconds_since;
using FakeServer = test::FakeOpenAiServer;

/// A TCP listener that resets every connection it accepts (SO_LINGER 0, then close): "connection reset
/// by peer" for the client, on every attempt.
class ResettingServer {
 public:
  ResettingServer() {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    REQUIRE(fd_ >= 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = 0;
    REQUIRE(bind(fd_, reinterpret_cast<sockaddr *>(&addr), sizeof addr) == 0);
    REQUIRE(listen(fd_, 16) == 0);
    socklen_t len = sizeof addr;
    REQUIRE(getsockname(fd_, reinterpret_cast<sockaddr *>(&addr), &len) == 0);
    port_ = ntohs(addr.sin_port);
    thread_ = std::thread([this] {
      while (!stop_) {
        pollfd p{fd_, POLLIN, 0};
        if (poll(&p, 1, 50) <= 0) continue;
        const int c = accept(fd_, nullptr, nullptr);
        if (c < 0) continue;
        ++accepted_;
        char buffer[4096];
        (void)recv(c, buffer, sizeof buffer, MSG_DONTWAIT);  // let the request arrive, then reset
        linger l{1, 0};
        setsockopt(c, SOL_SOCKET, SO_LINGER, &l, sizeof l);
        close(c);
      }
    });
  }
  ~ResettingServer() {
    stop_ = true;
    thread_.join();
    close(fd_);
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_) + "/v1"; }
  int accepted() const { return accepted_; }

 private:
  int fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<int> accepted_{0};
  std::thread thread_;
};

/// CPU stages stand-in: every response is a compile error, so each trajectory runs all its turns.
evaluator::CompiledCandidate compile_error_stages(const tasks::Task &task, std::string_view response,
                                                  evaluator::ParsedCandidate,
                                                  const evaluator::EvaluatorSettings &) {
  evaluator::CompiledCandidate c;
  auto &v = c.verdict;
  v.task_id = task.id;
  v.kernel_hash = "h" + std::to_string(response.size());
  v.parse.status = evaluator::Status::ok;
  v.static_checks.status = evaluator::Status::ok;
  v.compile.status = evaluator::Status::compile_error;
  v.compile.summary = "ptxas: syntax error";
  v.finalize_status();
  return c;
}

llm::EndpointConfig endpoint(const std::string &name, const std::string &url, const std::string &model) {
  llm::EndpointConfig e;
  e.name = name;
  e.model = model;
  e.base_url = url;
  e.max_in_flight = 2;
  e.max_retries = 3;
  e.backoff_initial = std::chrono::milliseconds(50);
  e.backoff_max = std::chrono::milliseconds(200);
  e.request_timeout = std::chrono::milliseconds(1500);
  e.stream_idle_timeout = std::chrono::milliseconds(1000);
  e.connect_timeout = std::chrono::milliseconds(1000);
  return e;
}

}  // namespace

TEST_CASE(
    "endpoint faults during a run (5xx burst, reset, cut stream, hang) are retried or recorded; the run "
    "completes") {
  FakeServer server;
  ResettingServer resetting;
  ScratchDir tmp;

  agent::RunConfig c;
  c.endpoints.push_back(endpoint("burst", server.url(), "burst500#faults"));
  auto cut = endpoint("cut", server.url(), "stream-cut#faults");
  cut.stream = true;
  c.endpoints.push_back(cut);
  auto hang = endpoint("hang", server.url(), "hang#faults");
  hang.max_retries = 0;
  c.endpoints.push_back(hang);
  c.endpoints.push_back(endpoint("reset", resetting.url(), "reset"));
  c.tasks = {"gemm_n4096_k4096"};
  c.samples = 1;
  c.turns = 2;
  c.evaluator.run_gpu = false;
  c.concurrency.compile_workers = 1;
  c.out_dir = tmp.dir / "run";

  agent::RunServices services = agent::RunServices::defaults();
  services.cpu_stages = compile_error_stages;
  services.gpu_stages = [](evaluator::CompiledCandidate &, const tasks::Task &,
                           const evaluator::EvaluatorSettings &) { FAIL("GPU stages must not run here"); };
  agent::RunOptions options;
  options.progress = agent::ProgressMode::quiet;
  auto runner = agent::Runner::start(c, services, options);
  REQUIRE_MESSAGE(runner, (runner ? "" : runner.error()));
  const auto start = Clock::now();
  const agent::RunResult result = (*runner)->run();
  INFO("run message: " << result.message);
  CHECK(result.end == agent::RunEnd::completed);
  CHECK(seconds_since(start) < 60);

  auto run = traces::load_run(tmp.dir / "run");
  REQUIRE(run);
  CHECK(run->skipped_partial_lines == 0);
  std::map<std::string, std::vector<traces::TurnRecord>> by_endpoint;  // record model = the endpoint's name
  for (const auto &r : run->turns) by_endpoint[r.model].push_back(r);
  // 5xx burst: retried inside the client; both turns got an answer and were evaluated.
  REQUIRE(by_endpoint["burst"].size() == 2);
  for (const auto &r : by_endpoint["burst"]) CHECK(r.stop_reason != "request_failed");
  CHECK(server.requests("burst500#faults").size() >= 5);  // 3 failures + 2 answers
  // Cut stream, hang past the timeout, connection reset: recorded on the trajectory's turn, with a message.
  for (const char *name : {"cut", "hang", "reset"}) {
    INFO(name);
    REQUIRE(by_endpoint[name].size() >= 1);
    const traces::TurnRecord &last = by_endpoint[name].back();
    CHECK(last.stop_reason == "request_failed");
    REQUIRE(last.request_error);
    CHECK_FALSE(last.request_error->message.empty());
  }
  CHECK(resetting.accepted() >= 1);
}
