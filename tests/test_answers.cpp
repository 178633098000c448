// The model-answer corpus (tests/data/answers/): answers written the way models write them (includes,
// macros, several blocks, reasoning tags left in, CRLF, manifests with comments or trailing commas, PTX
// labelled asm or unlabelled, answers cut mid-block, host code), each with its expected parse and compile
// outcome in expected.json. The CPU stages run for real: the parser, NVRTC (in its child) and ptxas.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include <chrono>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "evaluator/compile.hpp"
#include "evaluator/evaluator.hpp"
#include "support/support.hpp"
#include "tasks/task.hpp"
#include "util/files.hpp"

using namespace ptxbench;
using namespace ptxbench::evaluator;
namespace fs = std::filesystem;

namespace {

using test::cpu_settings;
const tasks::Task &gemm_task() {
  return test::repo_task("gemm_n7168_k5120");
}

const fs::path kAnswers = fs::path(PTXBENCH_TEST_DATA) / "answers";

std::string all_messages(const Verdict &v) {
  std::string text;
  for (const StageResult *s : {&v.parse, &v.static_checks, &v.compile}) {
    text += s->summary + "\n";
    for (const auto &d : s->diagnostics) text += d.text + "\n";
  }
  return text;
}

}  // namespace

TEST_CASE("answer corpus: every answer parses and compiles as expected.json says") {
  REQUIRE_MESSAGE(find_ptxas().has_value(), "ptxas is needed (the CUDA toolkit)");
  REQUIRE_MESSAGE(find_nvrtc_child(cpu_settings()).has_value(), "build the ptxbench-nvrtc child first");
  auto text = util::read_file(kAnswers / "expected.json");
  REQUIRE_MESSAGE(text.has_value(), text.error());
  const auto expected = nlohmann::json::parse(*text, nullptr, true, /*ignore_comments=*/true);
  REQUIRE(expected.size() >= 20);
  int cuda = 0;
  for (const auto &[name, want] : expected.items()) {
    CAPTURE(name);
    auto answer = util::read_file(kAnswers / (name + ".md"));
    REQUIRE_MESSAGE(answer.has_value(), answer.error());
    const auto t0 = std::chrono::steady_clock::now();
    Verdict v = evaluate(gemm_task(), *answer, cpu_settings());
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    MESSAGE(name << ": parse " << to_string(v.parse.status) << ", compile " << to_string(v.compile.status)
                 << ", " << seconds << " s");
    const std::string messages = all_messages(v);
    CAPTURE(messages);
    CHECK(std::string(to_string(v.parse.status)) == want.at("parse").get<std::string>());
    if (want.contains("language")) {
      CHECK(v.parse.figures.value("language", "") == want["language"].get<std::string>());
      cuda += want["language"] == "cuda";
    }
    if (want.contains("compile")) {
      const std::string compile = want["compile"];
      if (compile == "not_ok")
        CHECK(v.status != Status::ok);
      else
        CHECK(std::string(to_string(v.compile.status)) == compile);
    }
    if (want.contains("message"))
      CHECK_MESSAGE(messages.find(want["message"].get<std::string>()) != std::string::npos, messages);
  }
  CHECK(cuda >= 10);
}
