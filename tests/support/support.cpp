#include "support/support.hpp"

#include <doctest/doctest.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <map>
#include <mutex>

#include "util/files.hpp"

namespace ptxbench::test {
namespace fs = std::filesystem;

ScratchDir::ScratchDir(std::string_view prefix) {
  std::string pattern = (fs::temp_directory_path() / (std::string(prefix) + "-XXXXXX")).string();
  REQUIRE(::mkdtemp(pattern.data()) != nullptr);
  dir = pattern;
}

ScratchDir::~ScratchDir() {
  std::error_code ec;
  fs::remove_all(dir, ec);
}

std::string slurp(const fs::path &path) {
  auto text = util::read_file(path, std::size_t{1} << 30);
  return text ? std::move(*text) : std::string();
}

std::string read_required(const fs::path &path) {
  auto text = util::read_file(path, std::size_t{1} << 30);
  REQUIRE_MESSAGE(text.has_value(), text.error());
  return *text;
}

std::string replaced(std::string text, std::string_view from, std::string_view to) {
  const auto at = text.find(from);
  REQUIRE_MESSAGE(at != std::string::npos, "fixture text not found: " << std::string(from));
  return text.replace(at, from.size(), to);
}

std::string test_data(const fs::path &relative) {
  return read_required(fs::path(PTXBENCH_TEST_DATA) / relative);
}

const tasks::Task &repo_task(const std::string &id) {
  static std::mutex mutex;
  static std::map<std::string, tasks::Task> loaded;  // node-based: references stay valid
  const std::lock_guard lock(mutex);
  if (auto it = loaded.find(id); it != loaded.end()) return it->second;
  auto task = tasks::load_task_file(fs::path(PTXBENCH_SOURCE_DIR) / "tasks" / (id + ".json"));
  REQUIRE_MESSAGE(task.has_value(), task.error());
  return loaded.emplace(id, std::move(*task)).first->second;
}

evaluator::EvaluatorSettings cpu_settings() {
  evaluator::EvaluatorSettings s;
  s.run_gpu = false;
  return s;
}

FakeOpenAiServer::FakeOpenAiServer(std::vector<std::string> extra_args) {
  for (const char *proxy :
       {"http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"})
    ::unsetenv(proxy);
  std::vector<std::string> args{"python3",
                                (fs::path(PTXBENCH_SOURCE_DIR) / "tests" / "fake_openai_server.py").string(),
                                "--log", log().string()};
  args.insert(args.end(), extra_args.begin(), extra_args.end());
  std::vector<char *> argv;
  for (auto &a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  int fds[2];
  REQUIRE(::pipe(fds) == 0);
  pid_ = ::fork();
  REQUIRE(pid_ >= 0);
  if (pid_ == 0) {
    ::dup2(fds[1], STDOUT_FILENO);
    ::close(fds[0]);
    ::close(fds[1]);
    ::execvp("python3", argv.data());
    ::_exit(127);
  }
  ::close(fds[1]);
  std::string line;
  const auto start = Clock::now();
  while (line.find('\n') == std::string::npos && seconds_since(start) < 20) {
    pollfd p{fds[0], POLLIN, 0};
    if (::poll(&p, 1, 200) <= 0) continue;
    char buffer[64];
    const ssize_t n = ::read(fds[0], buffer, sizeof buffer);
    if (n <= 0) break;
    line.append(buffer, static_cast<std::size_t>(n));
  }
  ::close(fds[0]);
  port_ = std::atoi(line.c_str());
  if (port_ <= 0) {
    ::kill(pid_, SIGTERM);
    ::waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }
  REQUIRE_MESSAGE(port_ > 0, "the fake server did not print its port (python3 missing?)");
}

FakeOpenAiServer::~FakeOpenAiServer() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGTERM);
  ::waitpid(pid_, nullptr, 0);
}

std::string FakeOpenAiServer::url() const {
  return "http://127.0.0.1:" + std::to_string(port_) + "/v1";
}

std::vector<nlohmann::json> FakeOpenAiServer::requests(const std::string &model) const {
  std::vector<nlohmann::json> out;
  std::ifstream in(log());
  for (std::string line; std::getline(in, line);) {
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (!j.is_discarded() && j.value("model", "") == model) out.push_back(std::move(j));
  }
  return out;
}

}  // namespace ptxbench::test
