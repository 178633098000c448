// Feedback states each fact once and stays bounded: compile errors listed once with their line quoted, a
// CUDA line quoted for NVRTC errors, a mismatch or a runtime error's summary not repeated, model and compiler
// text never expanded as placeholders.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include <string>

#include "tests/prompt_fixtures.hpp"
#include "tests/support/support.hpp"

using namespace ptxbench;
using namespace ptxbench::test;

TEST_CASE("feedback is bounded and never expands placeholders inside model or compiler text") {
  auto task = load_task("gemm_n7168_k5120");
  Verdict v = compiled_verdict();
  v.compile.status = Status::compile_error;
  v.compile.summary = "ptxas failed with 100 errors";
  for (int i = 0; i < 100; ++i)
    v.compile.diagnostics.push_back({"error", "ptxas: error {{summary}} " + std::string(2000, 'x'), i + 1});
  v.finalize_status();
  std::string f = builder().feedback(task, v);
  CHECK_HAS(f, "... 88 more");
  CHECK_HAS(f, "line 12: ptxas: error {{summary}} ");
  CHECK_FALSE(has(f, "line 13:"));
  CHECK_HAS(f, "more characters)");  // each 2000-char diagnostic is cut
  CHECK(f.size() < 12100);
}

namespace {
std::size_t occurrences(const std::string &text, const std::string &needle) {
  std::size_t n = 0;
  for (auto pos = text.find(needle); pos != std::string::npos; pos = text.find(needle, pos + needle.size()))
    ++n;
  return n;
}
}  // namespace

TEST_CASE("feedback states each fact once: compile errors listed once, each with its PTX line quoted") {
  auto task = load_task("gemm_n7168_k5120");
  const std::string ptx =
      ".version 8.5\n.target sm_90a\n.visible .entry gemm(.param .u64 a)\n{\n  add.f32 %f1, %f2, bogus;\n"
      "  wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 {%f1}, %rd1, %rd2;\n  ret;\n}\n";
  Verdict v = compiled_verdict();
  v.compile.status = Status::compile_error;
  // As the evaluator writes them: the first error is also the summary.
  const std::string e1 = "ptxas, line 5 of the PTX block (response line 7): Unknown symbol 'bogus'";
  const std::string e2 =
      "ptxas, line 6 of the PTX block (response line 8): Arguments mismatch for instruction 'wgmma'";
  v.compile.summary = e1 + " (and 1 more error(s))";
  v.compile.diagnostics.push_back({"error", e1, 5});
  v.compile.diagnostics.push_back({"error", e2, 6});
  v.finalize_status();
  const agent::FeedbackSources sources{ptx, ptx, false};
  std::string f = builder().feedback(task, v, &sources);
  CHECK_HAS(f, "Compilation failed: 2 errors");
  CHECK(occurrences(f, "Unknown symbol 'bogus'") == 1);
  CHECK(occurrences(f, "Arguments mismatch") == 1);
  CHECK(occurrences(f, "line 5") == 1);  // the line number is not prefixed a second time
  CHECK_HAS(f, "Unknown symbol 'bogus'\n    > add.f32 %f1, %f2, bogus;");
  CHECK_HAS(f, "> wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 {%f1}, %rd1, %rd2;");
  // Two errors on one line: the line is quoted once.
  Verdict same = v;
  same.compile.diagnostics[1] = {"error",
                                 "ptxas, line 5 of the PTX block (response line 7): Arguments mismatch", 5};
  std::string once = builder().feedback(task, same, &sources);
  CHECK(occurrences(once, "> add.f32 %f1, %f2, bogus;") == 1);
  CHECK(once.find("> add.f32") > once.find("Arguments mismatch"));
  // Without the sources the message is the same minus the quotes.
  std::string plain = builder().feedback(task, v);
  CHECK(occurrences(plain, "Unknown symbol 'bogus'") == 1);
  CHECK_FALSE(has(plain, "> add.f32"));
}

TEST_CASE("feedback states each fact once: an incorrect output's mismatch appears once") {
  auto task = load_task("gemm_n4096_k4096");
  Verdict v = compiled_verdict();
  v.correctness.status = Status::incorrect;
  // As the worker writes it: the failing workload's text is the first diagnostic and the summary.
  const std::string text =
      "workload M=3000: 0 of 3 trials passed; 1234 mismatching elements over all trials (of 12288000 per "
      "trial); first at C[2944, 17]: got 1.5, expected 2.25 (tolerance 0.02 + 0.02·|expected|)";
  v.correctness.summary = text;
  v.correctness.diagnostics.push_back({"error", text, std::nullopt});
  v.correctness.figures = {
      {"workloads", json::array({{{"name", "M=4096"}, {"trials", 3}, {"passed", 3}, {"deterministic", true}},
                                 failing_gemm_workload()})}};
  v.finalize_status();
  std::string f = builder().feedback(task, v);
  CHECK(occurrences(f, "2944") == 1);
  CHECK(occurrences(f, "1234") == 1);
  CHECK_HAS(f, "The kernel ran but the results are wrong: 1 of 2 workloads failed");
  CHECK_HAS(f, "first mismatch C[2944, 17]: got 1.5, expected 2.25 (tolerance");
  // A worker diagnostic no row states (e.g. about another stage) is still listed.
  v.correctness.diagnostics.push_back(
      {"warning", "the SM clock fell to 1200 MHz during the check", std::nullopt});
  CHECK_HAS(builder().feedback(task, v), "the SM clock fell to 1200 MHz");
}

TEST_CASE("feedback states each fact once: a runtime error's summary is not repeated as a diagnostic") {
  auto task = load_task("gemm_n7168_k5120");
  Verdict v = compiled_verdict();
  v.correctness.status = Status::runtime_error;
  v.correctness.summary = "CUDA_ERROR_ILLEGAL_ADDRESS at workload M=8192";
  v.correctness.diagnostics.push_back({"error", v.correctness.summary, std::nullopt});
  v.sanitizer.status = Status::runtime_error;
  v.sanitizer.summary = "compute-sanitizer memcheck: Invalid __global__ write of size 2 bytes";
  v.sanitizer.diagnostics.push_back({"error", "Invalid __global__ write of size 2 bytes", 88});
  v.finalize_status();
  std::string f = builder().feedback(task, v);
  CHECK(occurrences(f, "CUDA_ERROR_ILLEGAL_ADDRESS") == 1);
  CHECK(occurrences(f, "Invalid __global__ write") == 1);
  CHECK_HAS(f, "compute-sanitizer memcheck\n");
  CHECK_HAS(f, "line 88: Invalid __global__ write of size 2 bytes");
}

TEST_CASE("feedback: an NVRTC error quotes the CUDA line; ptxas errors on NVRTC's PTX quote that PTX") {
  auto task = load_task("gemm_n7168_k5120");
  const std::string cuda =
      "#include <cstdint>\nextern \"C\" __global__ void gemm(float *c) {\n  c[0] = undefined_x;\n}\n";
  Verdict v = compiled_verdict();
  v.compile.status = Status::compile_error;
  const std::string text = "NVRTC: kernel.cu(3): error: identifier \"undefined_x\" is undefined";
  v.compile.summary = text;
  v.compile.diagnostics.push_back({"error", text, std::nullopt});
  v.finalize_status();
  const agent::FeedbackSources sources{cuda, "", true};
  std::string f = builder().feedback(task, v, &sources);
  CHECK(occurrences(f, "is undefined") == 1);
  CHECK_HAS(f, "kernel.cu(3): error: identifier \"undefined_x\" is undefined\n    > c[0] = undefined_x;");
  CHECK_HAS(f, "Compilation failed: 1 error");

  const std::string generated = ".version 8.5\n.target sm_90a\n  ld.global.f32 %f1, [%rd9];\n";
  Verdict p = compiled_verdict();
  p.compile.status = Status::compile_error;
  const std::string e = "ptxas, line 3 of the NVRTC-generated PTX: Unknown symbol '%rd9'";
  p.compile.summary = e;
  p.compile.diagnostics.push_back({"error", e, 3});
  p.finalize_status();
  const agent::FeedbackSources cuda_sources{cuda, generated, true};
  std::string g = builder().feedback(task, p, &cuda_sources);
  CHECK_HAS(g, "Unknown symbol '%rd9'\n    > ld.global.f32 %f1, [%rd9];");
  CHECK(occurrences(g, "Unknown symbol") == 1);
}
