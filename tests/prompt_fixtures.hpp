// What the prompt-builder tests share: the builder over the repository's prompts, task loading, a text
// check that prints what it missed, and hand-made verdicts of a compiled and of a measured GEMM candidate.
#pragma once

#include <filesystem>
#include <string>

#include <doctest/doctest.h>

#include "agent/prompt_builder.hpp"
#include "evaluator/evaluator.hpp"
#include "tasks/task.hpp"

namespace ptxbench::test {

using evaluator::Status;
using evaluator::Verdict;
using nlohmann::json;

inline const std::filesystem::path kPrompts = std::filesystem::path(PTXBENCH_SOURCE_DIR) / "prompts";
inline const std::filesystem::path kTasks = std::filesystem::path(PTXBENCH_SOURCE_DIR) / "tasks";
inline const agent::PromptBuilder &builder() {
  static const agent::PromptBuilder b = [] {
    auto loaded = agent::PromptBuilder::load(kPrompts);
    if (!loaded) FAIL(loaded.error());
    return std::move(loaded).value();
  }();
  return b;
}

inline tasks::Task load_task(const std::string &id) {
  auto t = tasks::load_task_file(kTasks / (id + ".json"));
  REQUIRE_MESSAGE(t.has_value(), (t ? "" : t.error()));
  return std::move(t).value();
}

inline bool has(const std::string &text, const std::string &needle) {
  return text.find(needle) != std::string::npos;
}

/// A verdict whose CPU stages passed (wgmma + TMA present in PTX and SASS).
inline Verdict compiled_verdict() {
  Verdict v;
  v.task_id = "gemm_n7168_k5120";
  v.parse.status = Status::ok;
  v.static_checks.status = Status::ok;
  v.static_checks.figures = {{"entry", "gemm"}, {"targets_in_ptx", {{"wgmma", true}, {"tma_load", true}}}};
  v.compile.status = Status::ok;
  v.compile.figures = {{"registers", 168},       {"spill_store_bytes", 16},
                       {"spill_load_bytes", 24}, {"shared_bytes", 0},
                       {"stack_bytes", 0},       {"warnings", json::array()},
                       {"sass_available", true}, {"targets_in_sass", {{"wgmma", true}, {"tma_load", true}}}};
  return v;
}

inline Verdict with_gpu_results(double speedup, double wgmma_runs) {
  Verdict v = compiled_verdict();
  v.correctness.status = Status::ok;
  v.correctness.figures = {{"workloads", json::array({{{"name", "M=8192"}, {"trials", 3}, {"passed", 3}}})}};
  v.execution.status = Status::ok;
  const auto runs = static_cast<std::uint64_t>(wgmma_runs);  // a count, as the worker writes it
  v.execution.figures = {{"targets", json::array({{{"name", "wgmma"},
                                                   {"sass_families", {"HGMMA"}},
                                                   {"present_in_sass", true},
                                                   {"warp_executions", runs},
                                                   {"executed", wgmma_runs > 0}},
                                                  {{"name", "tma_load"},
                                                   {"sass_families", {"UTMALDG"}},
                                                   {"present_in_sass", true},
                                                   {"warp_executions", 4096},
                                                   {"executed", true}}})},
                         {"top_opcodes", json::array({{{"family", "HGMMA"}, {"warp_executions", 1200000}},
                                                      {{"family", "LDS"}, {"warp_executions", 30000}}})},
                         {"tensor_core_share", 0.42}};
  v.timing.status = Status::ok;
  v.timing.figures = {{"workloads", json::array({{{"name", "M=8192"},
                                                  {"candidate_ms", 0.9},
                                                  {"library_ms", 0.9 * speedup},
                                                  {"speedup", speedup},
                                                  {"candidate_tflops", 668.1},
                                                  {"library_tflops", 668.1 * speedup},
                                                  {"sol_floor_ms", 0.608},
                                                  {"peak_tflops", 989.4}}})},
                      {"sm_clock_mhz", 1980},
                      {"geomean_speedup", speedup},
                      {"min_speedup", speedup}};
  v.axes.correct = true;
  v.axes.targets_executed = wgmma_runs > 0;
  v.axes.speedup = speedup;
  v.finalize_status();
  return v;
}

/// The correctness figures of a GEMM workload (M=3000) that failed every trial, with a first mismatch at
/// C[2944, 17]; `extra` adds or replaces fields.
inline json failing_gemm_workload(const json &extra = json::object()) {
  json w = {{"name", "M=3000"},
            {"trials", 3},
            {"passed", 0},
            {"max_abs_error", 41.5},
            {"max_rel_error", 1.0},
            {"mismatches", 1234},
            {"first_mismatch", {{"tensor", "C"}, {"index", {2944, 17}}, {"got", 1.5}, {"expected", 2.25}}},
            {"deterministic", true}};
  w.update(extra);
  return w;
}

}  // namespace ptxbench::test

#define CHECK_HAS(text, needle) \
  CHECK_MESSAGE(has(text, needle), "missing: " << (needle) << "\n--- in:\n" << (text))
