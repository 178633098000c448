// Fixtures shared by the test executables: a scratch folder, file and text helpers, the repository's
// tasks and test data, and evaluator settings for CPU-only runs. Failures inside a helper fail the
// calling test (doctest REQUIRE), so a missing fixture never reads as an empty pass.
#pragma once

#include <chrono>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "evaluator/evaluator.hpp"
#include "tasks/task.hpp"

namespace ptxbench::test {

/// A private temporary folder (mkdtemp under the system temp dir), removed with everything in it at
/// scope exit.
struct ScratchDir {
  std::filesystem::path dir;
  explicit ScratchDir(std::string_view prefix = "ptxbench-test");
  ~ScratchDir();
  ScratchDir(const ScratchDir &) = delete;
  ScratchDir &operator=(const ScratchDir &) = delete;
  const std::filesystem::path &path() const { return dir; }
};

/// A file's bytes; "" when it is missing or unreadable (for files a test expects may be absent).
std::string slurp(const std::filesystem::path &path);

/// A file's bytes; the test fails when it cannot be read.
std::string read_required(const std::filesystem::path &path);

/// `text` with the first `from` replaced by `to`; the test fails when `from` is not there, so a fixture
/// that drifted from its source cannot turn a mutation test into a no-op.
std::string replaced(std::string text, std::string_view from, std::string_view to);

/// tests/data/<relative>, read (the test fails when it is missing).
std::string test_data(const std::filesystem::path &relative);

/// The repository's task `id` (tasks/<id>.json), loaded once per process.
const tasks::Task &repo_task(const std::string &id);

/// Evaluator settings for CPU-only tests: GPU stages off, everything else at its default.
evaluator::EvaluatorSettings cpu_settings();

/// tests/fake_openai_server.py as a child process on a free port (read from its first stdout line),
/// logging every request to log(); proxy variables are unset so that requests to 127.0.0.1 reach it.
/// Stopped (SIGTERM) at scope exit. The test fails when it does not start (python3 missing).
class FakeOpenAiServer {
 public:
  explicit FakeOpenAiServer(std::vector<std::string> extra_args = {});
  ~FakeOpenAiServer();
  FakeOpenAiServer(const FakeOpenAiServer &) = delete;
  FakeOpenAiServer &operator=(const FakeOpenAiServer &) = delete;
  int port() const { return port_; }
  std::string url() const;                                           ///< http://127.0.0.1:<port>/v1
  const std::filesystem::path &dir() const { return scratch_.dir; }  ///< a scratch folder it shares
  std::filesystem::path log() const { return scratch_.dir / "requests.jsonl"; }
  /// The requests the server logged for one model name, in arrival order.
  std::vector<nlohmann::json> requests(const std::string &model) const;

 private:
  ScratchDir scratch_{"ptxbench-fake-server"};
  int pid_ = -1;
  int port_ = 0;
};

using Clock = std::chrono::steady_clock;
inline double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

}  // namespace ptxbench::test
