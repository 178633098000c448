// The parse, static, compile, sanitizer and generalization stages' figures
// (evaluator/protocol/cpu_stages.hpp, sanitizer.hpp, generalization.hpp): each codec writes the former by-key
// JSON byte for byte, reads it back, reads older records with their defaults and refuses malformed fields,
// naming them.
#include <doctest/doctest.h>

#include <cmath>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "evaluator/protocol/cpu_stages.hpp"
#include "evaluator/protocol/error.hpp"
#include "evaluator/protocol/generalization.hpp"
#include "evaluator/protocol/sanitizer.hpp"

namespace p = ptxbench::protocol;
using nlohmann::json;

namespace {

// The field a reading of `j` as T refuses; "(read)" when it reads.
template <class T>
std::string refused_field(const json &j) {
  try {
    (void)j.get<T>();
  } catch (const p::ProtocolError &e) {
    return e.field();
  }
  return "(read)";
}

json with(json j, const char *key, const json &value) {
  j[key] = value;
  return j;
}

}  // namespace

TEST_CASE("parse figures: the former JSON, read back, older records, refusals") {
  p::ParseFigures f{.language = "ptx",
                    .kernel_first_line = 12,
                    .kernel_blocks_seen = 2,
                    .json_blocks_seen = 1,
                    .kernel_bytes = 4096,
                    .num_sms = 132,
                    .num_sms_source = "H200 SXM (arch table)",
                    .workspace_bytes = std::map<std::string, std::int64_t>{{"M=8192", 1 << 20}}};
  // cpu_stages.cpp's former writer, key by key.
  json former = {{"language", "ptx"},
                 {"kernel_first_line", 12},
                 {"kernel_blocks_seen", 2},
                 {"json_blocks_seen", 1},
                 {"kernel_bytes", 4096},
                 {"num_sms", 132},
                 {"num_sms_source", "H200 SXM (arch table)"},
                 {"workspace_bytes", {{"M=8192", 1 << 20}}}};
  CHECK(json(f).dump() == former.dump());
  CHECK(p::parse_figures_from_figures(former) == f);
  // No workspace: the key is left out; an unknown SM count is null.
  f.workspace_bytes.reset();
  f.num_sms.reset();
  former.erase("workspace_bytes");
  former["num_sms"] = nullptr;
  CHECK(json(f).dump() == former.dump());
  CHECK(p::parse_figures_from_figures(former) == f);
  // Before num_sms existed; nothing written (the response had no kernel block).
  const auto older = p::parse_figures_from_figures(json{{"language", "cuda"},
                                                        {"kernel_first_line", 3},
                                                        {"kernel_blocks_seen", 1},
                                                        {"json_blocks_seen", 1},
                                                        {"kernel_bytes", 10}});
  REQUIRE(older.has_value());
  CHECK_FALSE(older->num_sms.has_value());
  CHECK(older->num_sms_source.empty());
  CHECK_FALSE(older->workspace_bytes.has_value());
  CHECK_FALSE(p::parse_figures_from_figures(json::object()).has_value());
  CHECK_FALSE(p::parse_figures_from_figures(json()).has_value());
  CHECK(refused_field<p::ParseFigures>(with(former, "kernel_bytes", "many")) == "kernel_bytes");
  CHECK(refused_field<p::ParseFigures>(with(former, "num_sms", 0)) == "num_sms");
  CHECK(refused_field<p::ParseFigures>(with(former, "workspace_bytes", json::array())) == "workspace_bytes");
  CHECK(refused_field<p::ParseFigures>(with(former, "surprise", 1)) == "surprise");
}

TEST_CASE("static figures: the former JSON, read back, older records, refusals") {
  const p::StaticFigures f{.entry = "gemm",
                           .ptx_version = "8.5",
                           .ptx_target = "sm_90a",
                           .instruction_count = 812,
                           .entries = {"gemm"},
                           .targets_in_ptx = {{"wgmma", true}, {"tma_load", false}},
                           .module_globals = {"lut", "launches"},
                           .module_globals_written = std::vector<std::string>{"launches"}};
  const json former = {{"entry", "gemm"},
                       {"ptx_version", "8.5"},
                       {"ptx_target", "sm_90a"},
                       {"instruction_count", 812},
                       {"entries", {"gemm"}},
                       {"targets_in_ptx", {{"wgmma", true}, {"tma_load", false}}},
                       {"module_globals", {"lut", "launches"}},
                       {"module_globals_written", {"launches"}}};
  CHECK(json(f).dump() == former.dump());
  const auto back = p::static_figures_from_figures(former);
  REQUIRE(back == f);
  CHECK(back->target_in_ptx("wgmma") == true);
  CHECK(back->target_in_ptx("tma_load") == false);
  CHECK_FALSE(back->target_in_ptx("tcgen05").has_value());
  CHECK(back->stateful_globals() == std::vector<std::string>{"launches"});
  // Before module_globals_written: every .global counts, and writing it back leaves the key out.
  json older = former;
  older.erase("module_globals_written");
  const auto o = p::static_figures_from_figures(older);
  REQUIRE(o.has_value());
  CHECK_FALSE(o->module_globals_written.has_value());
  CHECK(o->stateful_globals() == std::vector<std::string>{"lut", "launches"});
  CHECK(json(*o).dump() == older.dump());
  CHECK(refused_field<p::StaticFigures>(with(former, "targets_in_ptx", {{"wgmma", "yes"}})) ==
        "targets_in_ptx");
  CHECK(refused_field<p::StaticFigures>(with(former, "instruction_count", -1)) == "instruction_count");
  CHECK(refused_field<p::StaticFigures>(with(former, "entires", json::array())) == "entires");
}

TEST_CASE("compile figures: each step's keys as the stage wrote them, read back, refusals") {
  // compile_stage.cpp's former writer: the keys appear step by step.
  p::CompileFigures f{.nvrtc_seconds = 0.29};
  json former = {{"nvrtc_seconds", 0.29}};  // NVRTC failed (or ptxas was not found)
  CHECK(json(f).dump() == former.dump());
  CHECK(p::compile_figures_from_figures(former) == f);
  f.ptxas_seconds = 0.41;
  f.warnings = std::vector<std::string>{"ptxas warning: 16 bytes stack frame"};
  former["ptxas_seconds"] = 0.41;
  former["warnings"] = {"ptxas warning: 16 bytes stack frame"};  // ptxas failed
  CHECK(json(f).dump() == former.dump());
  CHECK(p::compile_figures_from_figures(former) == f);
  f.registers = 168;
  f.spill_store_bytes = 16;
  f.spill_load_bytes = 24;
  f.shared_bytes = 0;
  f.stack_bytes = 16;
  f.barriers = 1;
  f.cubin_bytes = 38912;
  f.sass_available = false;
  f.targets_in_sass = std::map<std::string, bool>{};
  f.sass_families = std::map<std::string, std::uint64_t>{};
  for (const auto &[key, value] : std::map<std::string, json>{{"registers", 168},
                                                              {"spill_store_bytes", 16},
                                                              {"spill_load_bytes", 24},
                                                              {"shared_bytes", 0},
                                                              {"stack_bytes", 16},
                                                              {"barriers", 1},
                                                              {"cubin_bytes", 38912},
                                                              {"sass_available", false},
                                                              {"targets_in_sass", json::object()},
                                                              {"sass_families", json::object()}})
    former[key] = value;  // compiled, the listing still running
  CHECK(json(f).dump() == former.dump());
  CHECK(p::compile_figures_from_figures(former) == f);
  CHECK_FALSE(f.target_in_sass("wgmma").has_value());
  f.sass_available = true;
  f.sass_instruction_count = 1520;
  f.targets_in_sass = std::map<std::string, bool>{{"wgmma", true}, {"tma_load", false}};
  f.sass_families = std::map<std::string, std::uint64_t>{{"HGMMA", 8}, {"UTMALDG", 0}};
  f.sass_wait_seconds = 0.012;
  former["sass_available"] = true;
  former["sass_instruction_count"] = 1520;
  former["targets_in_sass"] = {{"wgmma", true}, {"tma_load", false}};
  former["sass_families"] = {{"HGMMA", 8}, {"UTMALDG", 0}};
  former["sass_wait_seconds"] = 0.012;
  CHECK(json(f).dump() == former.dump());
  const auto back = p::compile_figures_from_figures(former);
  REQUIRE(back == f);
  CHECK(back->target_in_sass("wgmma") == true);
  CHECK(back->target_in_sass("tma_load") == false);
  CHECK_FALSE(p::compile_figures_from_figures(json::object()).has_value());
  // Malformed: named.
  CHECK(refused_field<p::CompileFigures>(with(former, "registers", -1)) == "registers");
  CHECK(refused_field<p::CompileFigures>(with(former, "registers", 1.5)) == "registers");
  CHECK(refused_field<p::CompileFigures>(with(former, "warnings", "none")) == "warnings");
  CHECK(refused_field<p::CompileFigures>(with(former, "sass_families", {{"HGMMA", "8"}})) == "sass_families");
  CHECK(refused_field<p::CompileFigures>(with(former, "sass_avialable", true)) == "sass_avialable");
  // null is not written, and reads as none.
  const auto nulls = p::compile_figures_from_figures(json{{"registers", nullptr}, {"ptxas_seconds", 0.5}});
  REQUIRE(nulls.has_value());
  CHECK_FALSE(nulls->registers.has_value());
}

TEST_CASE("sanitizer figures: the former JSON, read back, older records, refusals") {
  // gpu_stage.cpp's former writer: {tool, exit, reports, workload} updated with the line-info keys.
  p::SanitizerFigures f{.tool = "memcheck",
                        .exit = "exit 0",
                        .reports = 2,
                        .workload = "M=128",
                        .line_info = true,
                        .line_info_file = "kernel.ptx",
                        .line_info_ptxas_seconds = 0.31,
                        .line_info_sass_error = "nvdisasm: not found"};
  json former = {{"tool", "memcheck"}, {"exit", "exit 0"}, {"reports", 2}, {"workload", "M=128"}};
  former.update(json{{"line_info", true},
                     {"line_info_file", "kernel.ptx"},
                     {"line_info_ptxas_seconds", 0.31},
                     {"line_info_sass_error", "nvdisasm: not found"}});
  CHECK(json(f).dump() == former.dump());
  CHECK(p::sanitizer_figures_from_figures(former) == f);
  // No line info: why, and nothing else about lines.
  const p::SanitizerFigures offsets{.tool = "racecheck",
                                    .exit = "exit 1",
                                    .reports = 1,
                                    .workload = "M=128",
                                    .line_info = false,
                                    .line_info_error = "ptxas not found (reports name SASS offsets only)"};
  const json offsets_former = {
      {"tool", "racecheck"}, {"exit", "exit 1"},
      {"reports", 1},        {"workload", "M=128"},
      {"line_info", false},  {"line_info_error", "ptxas not found (reports name SASS offsets only)"}};
  CHECK(json(offsets).dump() == offsets_former.dump());
  CHECK(p::sanitizer_figures_from_figures(offsets_former) == offsets);
  // Before line info.
  const auto older = p::sanitizer_figures_from_figures(
      json{{"tool", "memcheck"}, {"exit", "exit 0"}, {"reports", 0}, {"workload", "a"}});
  REQUIRE(older.has_value());
  CHECK_FALSE(older->line_info.has_value());
  CHECK_FALSE(p::sanitizer_figures_from_figures(json::object()).has_value());
  CHECK(refused_field<p::SanitizerFigures>(with(former, "reports", "2")) == "reports");
  CHECK(refused_field<p::SanitizerFigures>(with(former, "line_info", "yes")) == "line_info");
  CHECK(refused_field<p::SanitizerFigures>(with(former, "lines", 3)) == "lines");
}

namespace {

p::CorrectnessWorkload hidden_check(const char *name, int passed, std::uint64_t mismatches) {
  p::CorrectnessWorkload c;
  c.name = name;
  c.trials = 3;
  c.trials_planned = 3;
  c.passed = passed;
  c.mismatches = mismatches;
  c.output_elements = 8200ull * 7168;
  if (mismatches > 0) {
    c.first_mismatch = p::FirstMismatch{"C", {8192, 0}, 1.5, 2.25, 1, false};
    p::MismatchPattern coarse;
    coarse.trial = 1;
    coarse.coarse = true;
    c.mismatch_pattern = coarse;
  }
  c.margin = p::WorkloadMargin{};
  return c;
}

// generalization_stage.cpp's former writer of a checked row: the correctness row, then correct, kind, timing.
json former_checked_row(const p::CorrectnessWorkload &c, const char *kind, const json &timing) {
  json row = c;
  row["correct"] = std::string(kind) == "ok";
  row["kind"] = kind;
  if (!timing.is_null()) row["timing"] = timing;
  return row;
}

}  // namespace

TEST_CASE("generalization figures: in progress and final forms as the worker wrote them, read back") {
  p::TimingWorkload timed;
  timed.name = "M=77";
  timed.candidate_ms = 0.05;
  timed.library_ms = 0.04;
  timed.speedup = 0.8;
  p::GeneralizationFigures f;
  f.total = 4;
  f.workloads.push_back({.name = "M=1", .kind = p::HiddenKind::skipped, .reason = "shape too large here"});
  f.workloads.push_back(
      {.name = "M=77", .kind = p::HiddenKind::ok, .check = hidden_check("M=77", 3, 0), .timing = timed});
  f.in_progress = "M=8200";
  f.passed = 1;
  json former = {{"workloads",
                  {{{"name", "M=1"}, {"kind", "skipped"}, {"reason", "shape too large here"}},
                   former_checked_row(hidden_check("M=77", 3, 0), "ok", json(timed))}},
                 {"total", 4},
                 {"passed", 1},
                 {"in_progress", "M=8200"}};
  CHECK(json(f).dump() == former.dump());
  CHECK(p::generalization_figures_from_figures(former) == f);
  // Done: in_progress gone, the checked count and the phases.
  f.workloads.push_back({.name = "M=8200",
                         .kind = p::HiddenKind::incorrect,
                         .check = hidden_check("M=8200", 0, 57344),
                         .timing_skipped = std::nullopt});
  f.workloads.push_back({.name = "M=5",
                         .kind = p::HiddenKind::nondeterministic,
                         .check = hidden_check("M=5", 3, 0),
                         .timing_skipped = std::nullopt});
  f.in_progress.reset();
  f.total = 3;
  f.phase_seconds = std::map<std::string, double>{{"checks", 0.01}, {"candidate", 0.2}};
  former["workloads"].push_back(former_checked_row(hidden_check("M=8200", 0, 57344), "incorrect", nullptr));
  former["workloads"].push_back(former_checked_row(hidden_check("M=5", 3, 0), "nondeterministic", nullptr));
  former.erase("in_progress");
  former["total"] = 3;
  former["phase_seconds"] = {{"checks", 0.01}, {"candidate", 0.2}};
  CHECK(json(f).dump() == former.dump());
  const auto back = p::generalization_figures_from_figures(former);
  REQUIRE(back == f);
  CHECK(back->workloads[1].correct());
  CHECK_FALSE(back->workloads[2].correct());
  CHECK(back->workloads[2].check->first_mismatch->index == std::vector<std::int64_t>{8192, 0});
  CHECK(back->workloads[2].check->mismatch_pattern->coarse);
  CHECK_FALSE(back->workloads[0].check.has_value());
  // Timed but the library could not run: {timing: {skipped: why}}.
  p::HiddenWorkload untimed{.name = "M=77",
                            .kind = p::HiddenKind::ok,
                            .check = hidden_check("M=77", 3, 0),
                            .timing_skipped = "not timed"};
  const json untimed_former =
      former_checked_row(hidden_check("M=77", 3, 0), "ok", {{"skipped", "not timed"}});
  CHECK(json(untimed).dump() == untimed_former.dump());
  CHECK(untimed_former.get<p::HiddenWorkload>() == untimed);
  CHECK_FALSE(p::generalization_figures_from_figures(json::object()).has_value());
  for (const auto k :
       {p::HiddenKind::ok, p::HiddenKind::incorrect, p::HiddenKind::nondeterministic, p::HiddenKind::skipped})
    CHECK(p::hidden_kind_from_string(p::to_string(k)) == k);
}

TEST_CASE("generalization figures: an older record reads with defaults; malformed fields are named") {
  // Before margins and planned trials; a hand-made first mismatch without trial or unwritten.
  const json older = json::parse(R"({"workloads": [
      {"name": "M=77", "kind": "ok", "correct": true, "trials": 3, "passed": 3},
      {"name": "M=8200", "kind": "incorrect", "correct": false, "trials": 1, "passed": 0, "mismatches": 7,
       "output_elements": 100, "first_mismatch": {"tensor": "C", "index": [1, 2], "got": 1.5, "expected": 2.25}}],
      "total": 2, "passed": 1})");
  const auto f = p::generalization_figures_from_figures(older);
  REQUIRE(f.has_value());
  CHECK_FALSE(f->phase_seconds.has_value());
  CHECK_FALSE(f->workloads[0].check->margin.has_value());
  CHECK(f->workloads[1].check->mismatches == 7);
  CHECK(f->workloads[1].name == "M=8200");
  const json row = older["workloads"][1];
  const auto error_of = [&](const char *key, const json &value) {
    json bad = row;
    bad[key] = value;
    return refused_field<p::GeneralizationFigures>(json{{"workloads", {older["workloads"][0], bad}}});
  };
  CHECK(error_of("kind", "weird") == "workloads[1].kind");
  CHECK(error_of("correct", true) == "workloads[1].correct");  // says so for an incorrect kind
  CHECK(error_of("mismatches", "seven") == "workloads[1].mismatches");
  CHECK(error_of("timing", {{"candidate_ms", "fast"}}) == "workloads[1].timing.candidate_ms");
  CHECK(error_of("timing", {{"skipped", 3}}) == "workloads[1].timing.skipped");
  CHECK(error_of("surprise", 1) == "workloads[1].surprise");
  json no_kind = row;
  no_kind.erase("kind");
  CHECK(refused_field<p::GeneralizationFigures>(json{{"workloads", {no_kind}}}) == "workloads[0].kind");
  const json skipped_with_trials = {{"name", "M=1"}, {"kind", "skipped"}, {"reason", "r"}, {"trials", 3}};
  CHECK(refused_field<p::GeneralizationFigures>(json{{"workloads", {skipped_with_trials}}}) ==
        "workloads[0].trials");
  CHECK(refused_field<p::GeneralizationFigures>(json{{"workloads", json::array()}, {"in_progress", 3}}) ==
        "in_progress");
}
