// Run-directory writer and reader: append + fsync, partial tails, disk full.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

#include "support/support.hpp"
#include "traces/record.hpp"

using namespace ptxbench;
namespace fs = std::filesystem;

namespace {

using test::ScratchDir;
using test::slurp;

nlohmann::json make_record(int turn, std::size_t payload_bytes = 10) {
  return {{"format_version", traces::kFormatVersion},
          {"trajectory_id", "m/t/0"},
          {"turn", turn},
          {"payload", std::string(payload_bytes, 'x')}};
}

}  // namespace

TEST_CASE("appended records load back in order") {
  ScratchDir dir("traces-test");
  traces::TrajectoryWriter writer(dir.path());
  for (int i = 0; i < 5; ++i) REQUIRE(writer.append(make_record(i)));
  { std::ofstream(dir.path() / "run.json") << R"({"run_id": "r1"})"; }
  auto run = traces::load_run(dir.path());
  REQUIRE(run);
  CHECK(run->run["run_id"] == "r1");
  REQUIRE(run->turns.size() == 5);
  for (int i = 0; i < 5; ++i) CHECK(run->turns[static_cast<std::size_t>(i)]["turn"] == i);
  CHECK(run->skipped_partial_lines == 0);
  CHECK(run->warnings.empty());
  // One line per record.
  const std::string text = slurp(writer.path());
  CHECK(std::count(text.begin(), text.end(), '\n') == 5);
}

TEST_CASE("invalid UTF-8 from a model is replaced, not fatal") {
  ScratchDir dir("traces-test");
  traces::TrajectoryWriter writer(dir.path());
  nlohmann::json r = make_record(0);
  r["response"] = std::string("ok \xff\xfe bytes");
  REQUIRE(writer.append(r));
  auto run = traces::load_run(dir.path());
  REQUIRE(run);
  REQUIRE(run->turns.size() == 1);
  const std::string got = run->turns[0]["response"];
  CHECK(got.find("\xEF\xBF\xBD") != std::string::npos);  // U+FFFD
}

TEST_CASE("a cut-short last line is reported and can be truncated before appending") {
  ScratchDir dir("traces-test");
  traces::TrajectoryWriter writer(dir.path());
  REQUIRE(writer.append(make_record(0)));
  REQUIRE(writer.append(make_record(1)));
  {
    std::ofstream out(writer.path(), std::ios::app | std::ios::binary);
    out << R"({"format_version": 1, "turn": 2, "payl)";
  }
  auto run = traces::load_run(dir.path());
  REQUIRE(run);
  CHECK(run->turns.size() == 2);
  CHECK(run->skipped_partial_lines == 1);
  CHECK_FALSE(run->warnings.empty());  // also: run.json missing

  auto removed = traces::truncate_partial_tail(writer.path());
  REQUIRE(removed);
  CHECK(*removed == std::string(R"({"format_version": 1, "turn": 2, "payl)").size());
  REQUIRE(writer.append(make_record(2)));
  run = traces::load_run(dir.path());
  REQUIRE(run);
  REQUIRE(run->turns.size() == 3);
  CHECK(run->turns[2]["turn"] == 2);
  CHECK(run->skipped_partial_lines == 0);

  auto again = traces::truncate_partial_tail(writer.path());
  REQUIRE(again);
  CHECK(*again == 0);
  auto missing = traces::truncate_partial_tail(dir.path() / "nope.jsonl");
  REQUIRE(missing);
  CHECK(*missing == 0);
}

TEST_CASE("a garbled line in the middle is skipped with a warning naming the line") {
  ScratchDir dir("traces-test");
  traces::TrajectoryWriter writer(dir.path());
  REQUIRE(writer.append(make_record(0)));
  {
    std::ofstream out(writer.path(), std::ios::app | std::ios::binary);
    out << "{not json\n";
  }
  REQUIRE(writer.append(make_record(1)));
  auto run = traces::load_run(dir.path());
  REQUIRE(run);
  CHECK(run->turns.size() == 2);
  CHECK(run->skipped_partial_lines == 1);
  bool named = false;
  for (const auto &w : run->warnings) named = named || w.find("line 2") != std::string::npos;
  CHECK(named);
}

TEST_CASE("missing directory or trace file is an error with the path") {
  auto missing = traces::load_run("/nonexistent/ptxbench-run");
  REQUIRE_FALSE(missing);
  CHECK(missing.error().find("/nonexistent/ptxbench-run") != std::string::npos);
  ScratchDir dir("traces-test");
  auto empty = traces::load_run(dir.path());
  REQUIRE_FALSE(empty);
  CHECK(empty.error().find("trajectories.jsonl") != std::string::npos);
}

TEST_CASE("file size limit (EFBIG): append fails cleanly and the file keeps only complete records") {
  ScratchDir dir("traces-test");
  const fs::path run_dir = dir.path();
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    ::signal(SIGXFSZ, SIG_IGN);
    rlimit lim{};
    lim.rlim_cur = lim.rlim_max = 10'000;  // bytes
    ::setrlimit(RLIMIT_FSIZE, &lim);
    traces::TrajectoryWriter writer(run_dir);
    for (int i = 0; i < 1000; ++i) {
      auto r = writer.append(make_record(i, 700));
      if (!r) {
        const bool mentions = r.error().find("file size limit") != std::string::npos ||
                              r.error().find("disk full") != std::string::npos;
        ::_exit(mentions ? 42 : 43);
      }
    }
    ::_exit(44);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 42);
  const std::string text = slurp(run_dir / "trajectories.jsonl");
  REQUIRE_FALSE(text.empty());
  CHECK(text.back() == '\n');
  CHECK(text.size() <= 10'000);
  auto run = traces::load_run(run_dir);
  REQUIRE(run);
  CHECK(run->skipped_partial_lines == 0);
  CHECK(run->turns.size() >= 10);  // 10 kB / ~780-byte records
  for (std::size_t i = 0; i < run->turns.size(); ++i) CHECK(run->turns[i]["turn"] == static_cast<int>(i));
}
