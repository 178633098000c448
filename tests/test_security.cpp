// Security limits of the evaluator and the loaders, CPU only:
// - model output never reaches a shell (shell syntax in every part of a response is inert);
// - sizes are bounded end to end (response, kernel block, PTX bytes, instruction count);
// - ptxas runs under a wall-clock and an address-space limit, both becoming compile_error verdicts;
// - names that could become paths are constrained (task ids must equal their file name);
// - the adversarial corpus passes the CPU stages (so the GPU test measures what it means to);
// - fuzz regressions (fuzz/regressions/<target>/) and seeds go through the fuzzed entry points.
// Covered elsewhere, not repeated here: API keys never reach a run directory (test_agent.cpp, "real
// client, unreachable endpoint ... the API key never reaches the run dir"), children get a scrubbed
// environment and argv without a shell (test_util.cpp, "subprocess: ..."), a 50 MB response is rejected
// without scanning (test_evaluator.cpp).
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "agent/run_config.hpp"
#include "evaluator/evaluator.hpp"
#include "evaluator/ptx.hpp"
#include "support/support.hpp"
#include "tasks/task.hpp"
#include "util/files.hpp"
#include "util/int_expr.hpp"

namespace ev = ptxbench::evaluator;
namespace tasks = ptxbench::tasks;
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

using ptxbench::test::cpu_settings;
using ptxbench::test::replaced;
std::string read(const fs::path &p) {
  return ptxbench::test::read_required(p);
}
const tasks::Task &gemm4096() {
  return ptxbench::test::repo_task("gemm_n4096_k4096");
}

const fs::path kSource = fs::path(PTXBENCH_TEST_DATA).parent_path().parent_path();
const fs::path kCorpus = kSource / "tests" / "adversarial";

/// The PTX of a response (between ```ptx and the next fence).
std::string ptx_of(const std::string &response) {
  const auto begin = response.find("```ptx\n");
  REQUIRE(begin != std::string::npos);
  const auto end = response.find("\n```", begin + 7);
  return response.substr(begin + 7, end - begin - 7);
}

/// A file name no earlier run can have created.
fs::path canary(const std::string &what) {
  return fs::temp_directory_path() /
         ("ptxbench-pwned-" + what + "-" + std::to_string(getpid()) + "-" +
          std::to_string(std::chrono::steady_clock::now().time_since_epoch().count()));
}

}  // namespace

TEST_CASE("shell syntax anywhere in a response is inert: no command runs") {
  const fs::path in_comment = canary("comment"), in_entry = canary("entry"), in_expr = canary("expr"),
                 in_prose = canary("prose"), in_cuda = canary("cuda");
  std::string response = read(kCorpus / "control_ok" / "response.md");
  // In the prose, a PTX comment, a block comment and the manifest's entry name and expressions.
  response =
      "Run `touch " + in_prose.string() + "` and $(touch " + in_prose.string() + ") first.\n" + response;
  response = replaced(response, ".address_size 64\n",
                      ".address_size 64\n// $(touch " + in_comment.string() + ") `touch " +
                          in_comment.string() + "`\n/* ; touch " + in_comment.string() + " | sh */\n");
  const ev::Verdict compiled = ev::evaluate(gemm4096(), response, cpu_settings());
  CHECK_MESSAGE(compiled.compile.status == ev::Status::ok, compiled.compile.summary);

  const std::string entry_injection = replaced(response, "\"entry\": \"adv_gemm\"",
                                               "\"entry\": \"adv_gemm; touch " + in_entry.string() + "\"");
  const ev::Verdict bad_entry = ev::evaluate(gemm4096(), entry_injection, cpu_settings());
  CHECK(bad_entry.status != ev::Status::ok);
  const std::string expr_injection =
      replaced(response, "\"ceil_div(N, 64)\"", "\"$(touch " + in_expr.string() + ")\"");
  const ev::Verdict bad_expr = ev::evaluate(gemm4096(), expr_injection, cpu_settings());
  CHECK(bad_expr.status == ev::Status::bad_manifest);

  // CUDA source goes through NVRTC in the ptxbench-nvrtc child.
  REQUIRE_MESSAGE(ev::find_nvrtc_child(cpu_settings()).has_value(), "build the ptxbench-nvrtc child first");
  const std::string cuda =
      "```cuda\n#include \"$(touch " + in_cuda.string() + ")\"\n// `touch " + in_cuda.string() +
      "`\nextern \"C\" __global__ void adv_gemm() {}\n```\n```json\n" +
      "{\"entry\": \"adv_gemm\", \"grid\": [1, 1, 1], \"block\": [32, 1, 1], \"params\": []}\n```\n";
  const ev::Verdict v = ev::evaluate(gemm4096(), cuda, cpu_settings());
  CHECK(v.status == ev::Status::compile_error);  // the include does not exist
  for (const auto &p : {in_comment, in_entry, in_expr, in_prose, in_cuda})
    CHECK_MESSAGE(!fs::exists(p), "a command from the response ran: " << p.string());
}

TEST_CASE("sizes are bounded end to end: response, kernel block, PTX bytes, instruction count") {
  const std::string response = read(kCorpus / "control_ok" / "response.md");
  const std::size_t ptx_bytes = ptx_of(response).size();
  REQUIRE(ptx_bytes > 10'000);

  ev::EvaluatorSettings s = cpu_settings();
  s.parse.max_response_bytes = response.size() - 1;
  ev::Verdict v = ev::evaluate(gemm4096(), response, s);
  CHECK(v.status == ev::Status::no_kernel);
  CHECK(v.parse.summary.find("more than the limit") != std::string::npos);

  s = cpu_settings();
  s.parse.max_kernel_bytes = ptx_bytes / 2;
  v = ev::evaluate(gemm4096(), response, s);
  CHECK(v.status == ev::Status::no_kernel);
  CHECK(v.compile.status == ev::Status::skipped);

  s = cpu_settings();
  s.compile.max_ptx_bytes = ptx_bytes / 2;
  v = ev::evaluate(gemm4096(), response, s);
  CHECK(v.status == ev::Status::static_error);
  CHECK(v.compile.status == ev::Status::skipped);  // ptxas never saw it

  s = cpu_settings();
  s.compile.max_ptx_instructions = 100;
  v = ev::evaluate(gemm4096(), response, s);
  CHECK(v.status == ev::Status::static_error);
  CHECK(v.static_checks.summary.find("more than the limit of 100") != std::string::npos);
  CHECK(v.compile.status == ev::Status::skipped);
}

TEST_CASE("ptxas runs under a wall-clock and an address-space limit; both are compile_error verdicts") {
  const std::string response = read(kCorpus / "control_ok" / "response.md");
  ev::EvaluatorSettings s = cpu_settings();
  s.compile.ptxas_wall = std::chrono::milliseconds(1);
  const auto t0 = std::chrono::steady_clock::now();
  ev::Verdict v = ev::evaluate(gemm4096(), response, s);
  CHECK(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() < 10.0);
  CHECK(v.status == ev::Status::compile_error);
  CHECK_FALSE(v.compile.summary.empty());

  s = cpu_settings();
  s.compile.ptxas_address_space_bytes = 8u << 20;  // far too little for ptxas to even load
  v = ev::evaluate(gemm4096(), response, s);
  CHECK(v.status == ev::Status::compile_error);
  CHECK_FALSE(v.compile.summary.empty());
  // The limits are recorded in the verdict.
  const json settings = s.to_json();
  CHECK(settings.dump().find("ptxas_address_space_bytes") != std::string::npos);
}

TEST_CASE("names that could become paths: a task id must equal its file name (no separators, no ..)") {
  ptxbench::util::TempDir dir("ptxbench-security");
  json task = json::parse(read(kSource / "tasks" / "gemm_n4096_k4096.json"));
  for (const std::string id : {"../../etc/passwd", "a/b", "gemm n4096", ""}) {
    task["id"] = id;
    const fs::path file = dir.path() / "gemm_n4096_k4096.json";
    std::ofstream(file) << task.dump();
    const auto loaded = tasks::load_task_file(file);
    CHECK_MESSAGE(!loaded.has_value(), "task id accepted: '" << id << "'");
  }
}

TEST_CASE("the adversarial corpus passes the CPU stages with the expected static figures") {
  int cases = 0;
  for (const auto &entry : fs::directory_iterator(kCorpus)) {
    if (!entry.is_directory()) continue;
    const json expected = json::parse(read(entry.path() / "expected.json"));
    const std::string from = expected.value("response_from", entry.path().filename().string());
    auto task = tasks::load_task_file(kSource / "tasks" / (expected["task"].get<std::string>() + ".json"));
    REQUIRE_MESSAGE(task.has_value(), task.error());
    const ev::Verdict v = ev::evaluate(*task, read(kCorpus / from / "response.md"), cpu_settings());
    INFO(entry.path().filename().string() << ": " << v.to_json().dump(1).substr(0, 3000));
    ++cases;
    if (expected["expected_status"] == "bad_manifest") {
      CHECK(v.status == ev::Status::bad_manifest);
      continue;
    }
    CHECK(v.compile.status == ev::Status::ok);
    CHECK(v.correctness.status == ev::Status::skipped);  // GPU stages off here
    if (expected.contains("expected_targets_in_ptx"))
      for (const auto &[name, value] : expected["expected_targets_in_ptx"].items())
        CHECK(v.static_checks.figures["targets_in_ptx"][name] == value);
    if (expected.contains("expected_targets"))
      for (const auto &[name, props] : expected["expected_targets"].items())
        CHECK(v.static_checks.figures["targets_in_ptx"][name] == props.value("present_in_sass", false));
  }
  CHECK(cases >= 20);
}

// fuzz_manifest finding (fuzz/regressions/manifest/number_overflow_*): a JSON number beyond the double
// range makes nlohmann::json::parse throw out_of_range (406), which the loaders do not catch (they catch
// parse_error only). Untrusted or user input must give an error value, never an exception.
TEST_CASE("numbers beyond the double range are error values, not exceptions (manifest, task, run config)") {
  const std::string overflow =
      read(kSource / "fuzz" / "regressions" / "manifest" / "number_overflow_min.json");
  CHECK_NOTHROW([&] {
    const auto m = ev::parse_manifest(overflow, gemm4096());
    CHECK_FALSE(m.has_value());
  }());
  std::string response = read(kCorpus / "control_ok" / "response.md");
  response = replaced(response, "\"ceil_div(N, 64)\"", "1e999");
  CHECK_NOTHROW([&] {
    const ev::Verdict v = ev::evaluate(gemm4096(), response, cpu_settings());
    CHECK(v.status == ev::Status::bad_manifest);
  }());

  ptxbench::util::TempDir dir("ptxbench-security");
  const fs::path task_file = dir.path() / "gemm_n4096_k4096.json";
  std::ofstream(task_file) << replaced(read(kSource / "tasks" / "gemm_n4096_k4096.json"), "\"M\": 4096",
                                       "\"M\": 1e999");
  CHECK_NOTHROW([&] { CHECK_FALSE(tasks::load_task_file(task_file).has_value()); }());
  const fs::path config_file = dir.path() / "run.json";
  std::ofstream(config_file) << "{\"samples\": 1e999}";
  CHECK_NOTHROW([&] { CHECK_FALSE(ptxbench::agent::load_run_config(config_file).has_value()); }());
}

TEST_CASE("fuzz regressions and seeds go through the fuzzed entry points without an exception") {
  const tasks::Task &task = gemm4096();
  int inputs = 0;
  for (const std::string root : {"regressions", "corpus"}) {
    const fs::path base = kSource / "fuzz" / root;
    REQUIRE_MESSAGE(fs::is_directory(base), base.string() << " is missing");  // never skipped unseen
    for (const auto &entry : fs::recursive_directory_iterator(base)) {
      if (!entry.is_regular_file()) continue;
      const std::string target = entry.path().parent_path().filename().string();
      const std::string data = read(entry.path());
      INFO(entry.path().string());
      ++inputs;
      if (target == "response") {
        CHECK_NOTHROW((void)ev::parse_response(data));
      } else if (target == "ptx") {
        CHECK_NOTHROW((void)ev::lex_ptx(data));
        CHECK_NOTHROW((void)ev::parse_ptx(data));
      } else if (target == "manifest") {
        CHECK_NOTHROW((void)ptxbench::util::evaluate_int_expression(data, task.workloads[0].symbols));
        CHECK_NOTHROW([&] {
          const auto m = ev::parse_manifest(data, task);
          if (m)
            for (const auto &w : task.workloads) (void)ev::resolve_launch(*m, task, w);
        }());
      } else if (target == "run_config") {
        const json j = json::parse(data, nullptr, false);
        if (!j.is_discarded())
          CHECK_NOTHROW((void)ptxbench::agent::parse_run_config(j, "fuzz.json", "/nonexistent"));
      } else if (target == "task") {
        ptxbench::util::TempDir dir("ptxbench-fuzz-task");
        const fs::path file = dir.path() / entry.path().filename();
        std::ofstream(file, std::ios::binary) << data;
        CHECK_NOTHROW((void)tasks::load_task_file(file));
      }
    }
  }
  CHECK(inputs >= 5);
}
