// Exports over hand-written fixture runs (tests/data/runs/make_fixtures.py holds the outcome table;
// expected counts below are worked out by hand from it).
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include <algorithm>
#include <fstream>
#include <set>

#include <nlohmann/json.hpp>

#include "traces/detail/run_view.hpp"
#include "traces/export.hpp"
#include "traces/outcome.hpp"
#include "traces/record.hpp"

using namespace ptxbench::traces;
using nlohmann::json;

namespace {

const std::filesystem::path kRuns = std::filesystem::path(PTXBENCH_TEST_DATA) / "runs";

std::vector<LoadedRun> runs(const std::vector<std::string> &names = {"two_models"}) {
  std::vector<LoadedRun> out;
  for (const auto &n : names) {
    auto run = load_run(kRuns / n);
    REQUIRE_MESSAGE(run.has_value(), (run ? "" : run.error()));
    out.push_back(std::move(*run));
  }
  return out;
}

ExportResult run_export(const ExportOptions &o, const std::vector<std::string> &names = {"two_models"}) {
  auto result = build_export(runs(names), o);
  REQUIRE_MESSAGE(result.has_value(), (result ? "" : result.error()));
  return std::move(*result);
}

std::vector<json> parse_lines(const ExportResult &r) {
  std::vector<json> out;
  for (const auto &line : r.lines) {
    REQUIRE(line.find('\n') == std::string::npos);
    out.push_back(json::parse(line));  // throws (fails the test) on an invalid line
  }
  return out;
}

/// system?, then user/assistant alternating from user, ending with assistant; every content a string.
bool messages_alternate(const json &messages) {
  if (!messages.is_array() || messages.empty()) return false;
  std::size_t i = messages[0].at("role") == "system" ? 1 : 0;
  if (i >= messages.size()) return false;
  for (std::size_t k = 0; i + k < messages.size(); ++k) {
    const json &m = messages[i + k];
    if (!m.at("content").is_string() || m.at("role") != (k % 2 == 0 ? "user" : "assistant")) return false;
  }
  return messages.back().at("role") == "assistant";
}

bool sharegpt_alternates(const json &line) {
  const json &c = line.at("conversations");
  if (!c.is_array() || c.empty() || c.size() % 2 != 0) return false;
  for (std::size_t k = 0; k < c.size(); ++k) {
    if (!c[k].at("value").is_string() || c[k].at("from") != (k % 2 == 0 ? "human" : "gpt")) return false;
  }
  return true;
}

std::string id_of(const json &line) {
  const json &m = line.at("metadata");
  return m.at("trajectory_id").get<std::string>() + "@" + std::to_string(m.at("turn").get<int>());
}

}  // namespace

TEST_CASE("kernel normalization ignores comments and whitespace, keeps literals") {
  using ptxbench::traces::detail::normalize_kernel_source;
  CHECK(normalize_kernel_source("// c\n.version 8.5\n  ret; /* x\ny */ exit;") == ".version8.5ret;exit;");
  CHECK(normalize_kernel_source("a \"// not a comment\" b") == "a\"// not a comment\"b");
  CHECK(normalize_kernel_source("x /* unterminated") == "x");
  CHECK(detail::normalized_kernel_hash("mov.u32 %r1, 1; // one") ==
        detail::normalized_kernel_hash("mov.u32 %r1,1;"));
  CHECK(detail::normalized_kernel_hash("mov.u32 %r1, 1;") !=
        detail::normalized_kernel_hash("mov.u32 %r1, 2;"));
}

TEST_CASE("messages, one example per turn: every line parses, roles alternate, counts add up") {
  ExportOptions o;
  o.all = true;  // every target turn: the default outcome filter has its own test
  ExportResult r = run_export(o);
  // 25 records: one failed request is unusable; alpha and beta mha_b/0 turn 0 are the same kernel up to
  // comments and whitespace -> 1 duplicate -> 23 written.
  CHECK(r.counts.candidates == 25);
  CHECK(r.counts.unusable.at("no model response (request failed)") == 1);
  CHECK(r.counts.duplicates == 1);
  CHECK(r.counts.written == 23);
  CHECK(r.lines.size() == 23);
  auto lines = parse_lines(r);
  for (const auto &line : lines) {
    CHECK(messages_alternate(line.at("messages")));
    CHECK(line.at("metadata").at("loss_on") == "last_message");
    CHECK(line.at("metadata").at("loss_message_indices") == json::array({line.at("messages").size() - 1}));
    // usage: prompt 1000 + completion 500, reasoning kept inline
    CHECK(line.at("metadata").at("token_count") == 1500);
    CHECK(line.at("metadata").at("token_count_exact") == true);
  }
  // Turn 2 of alpha/gemm_a/1 carries the full history: system, task, 2 × (attempt, feedback), answer.
  auto it =
      std::find_if(lines.begin(), lines.end(), [](const json &l) { return id_of(l) == "alpha/gemm_a/1@2"; });
  REQUIRE(it != lines.end());
  CHECK(it->at("messages").size() == 7);
  CHECK(it->at("metadata").at("source_category") == "ok");  // turn 1 was ok and executed
  CHECK(it->at("metadata").at("speedup") == 1.25);
  // Card: written beside the output by the CLI; counts printed here.
  CHECK(r.card_markdown.find("| **written** | **23** |") != std::string::npos);
  CHECK(r.card_markdown.find("| duplicates removed | 1 |") != std::string::npos);
  CHECK(r.card_markdown.find("| first_turn | 9 |") != std::string::npos);  // 10 turn-0 examples, 1 duplicate
  CHECK(r.card_markdown.find("| alpha | 14 |") != std::string::npos);      // 15 records - 1 failed request
  CHECK(r.card_markdown.find("| beta | 9 |") != std::string::npos);  // 10 records - 1 duplicate of alpha's

  o.deduplicate = false;
  CHECK(run_export(o).counts.written == 24);
}

TEST_CASE("reasoning: inline, separate field or dropped") {
  ExportOptions o;
  o.all = true;  // every target turn: the default outcome filter has its own test
  auto find = [](const ExportResult &r, const std::string &id) {
    for (const auto &l : parse_lines(r))
      if (id_of(l) == id) return l;
    FAIL("no line " << id);
    return json();
  };
  o.reasoning = ReasoningMode::inline_think;
  json inl = find(run_export(o), "alpha/gemm_a/0@0");
  CHECK(
      inl.at("messages")
          .back()
          .at("content")
          .get<std::string>()
          .rfind("<think>\nPlan for alpha gemm_a 0 turn 0: tile the problem.\n</think>\n\nHere is my kernel.",
                 0) == 0);
  CHECK_FALSE(inl.at("messages").back().contains("reasoning_content"));

  o.reasoning = ReasoningMode::field;
  ExportResult field = run_export(o);
  json f = find(field, "alpha/gemm_a/0@0");
  CHECK(f.at("messages").back().at("reasoning_content") ==
        "Plan for alpha gemm_a 0 turn 0: tile the problem.");
  CHECK(f.at("messages").back().at("content").get<std::string>().rfind("Here is my kernel.", 0) == 0);
  // A server that put <think> inline in the content: moved to the field.
  json moved = find(field, "beta/mha_b/1@1");
  CHECK(moved.at("messages").back().at("reasoning_content") ==
        "Plan for beta mha_b 1 turn 1: tile the problem.");
  CHECK(moved.at("messages").back().at("content").get<std::string>().find("<think>") == std::string::npos);

  o.reasoning = ReasoningMode::drop;
  for (const auto &l : parse_lines(run_export(o))) {
    const json &last = l.at("messages").back();
    CHECK_FALSE(last.contains("reasoning_content"));
    CHECK(last.at("content").get<std::string>().find("<think>") == std::string::npos);
    CHECK(last.at("content").get<std::string>().find("Plan for") == std::string::npos);
    CHECK(l.at("metadata").at("token_count") == 1300);  // 1500 - 200 reasoning tokens
  }
}

TEST_CASE("sharegpt: system column, human/gpt alternating") {
  ExportOptions o;
  o.all = true;  // every target turn: the default outcome filter has its own test
  o.format = ExportFormat::sharegpt;
  auto lines = parse_lines(run_export(o));
  CHECK(lines.size() == 23);
  for (const auto &l : lines) {
    CHECK(l.at("system") == "You write PTX kernels for sm_90a.");
    CHECK(sharegpt_alternates(l));
    CHECK_FALSE(l.contains("messages"));
  }
}

TEST_CASE("one example per trajectory: task, then attempt and feedback alternating") {
  ExportOptions o;
  o.all = true;  // every target turn: the default outcome filter has its own test
  o.unit = ExportUnit::trajectory;
  ExportResult r = run_export(o);
  // 10 trajectories; alpha/mha_b/0 and beta/mha_b/0 (one turn each, same kernel) are duplicates.
  CHECK(r.counts.candidates == 10);
  CHECK(r.counts.duplicates == 1);
  auto lines = parse_lines(r);
  REQUIRE(lines.size() == 9);
  for (const auto &l : lines) {
    CHECK(messages_alternate(l.at("messages")));
    CHECK(l.at("metadata").at("loss_on") == "all_assistant");
  }
  for (const auto &l : lines) {
    const std::string id = l.at("metadata").at("trajectory_id");
    if (id == "alpha/gemm_a/1") {
      CHECK(l.at("messages").size() == 2 + 3 + 2);  // system, task, 3 attempts, 2 feedbacks
      CHECK(l.at("messages")[3].at("content") == "Correct. Make it faster.");
      CHECK(l.at("metadata").at("turn") == 2);
      CHECK(l.at("metadata").at("loss_message_indices") == json::array({2, 4, 6}));
    }
    if (id == "alpha/gemm_a/2") {  // the request at turn 2 failed: the example stops at turn 1
      CHECK(l.at("messages").size() == 5);
      CHECK(l.at("metadata").at("turn") == 1);
      CHECK(l.at("metadata").at("source_category") == "no_kernel");
    }
  }
}

TEST_CASE("repair pairs: failed attempt, diagnostics, fixed attempt; loss on the last message") {
  ExportOptions o;
  o.all = true;  // every target turn: the default outcome filter has its own test
  o.format = ExportFormat::repair_pairs;
  ExportResult r = run_export(o);
  // By hand: alpha/gemm_a/0 t1 incorrect -> t2 ok; alpha/gemm_a/1 t0 correct but targets not executed ->
  // t1 executed; alpha/mha_b/2 t0 static_error -> t1 ok; beta/gemm_a/1 t0 incorrect -> t1 ok;
  // beta/mha_b/1 t0 bad_manifest -> t1 ok. (beta/gemm_a/1 t2 is suspicious: not a fix.)
  auto lines = parse_lines(r);
  REQUIRE(lines.size() == 5);
  std::set<std::string> ids;
  for (const auto &l : lines) {
    ids.insert(id_of(l));
    const json &m = l.at("messages");
    REQUIRE(m.size() == 5);
    CHECK(messages_alternate(m));
    CHECK(m[0].at("role") == "system");
    CHECK(m[1].at("content").get<std::string>().rfind("Write ", 0) == 0);  // the task
    CHECK(m[2].at("content").get<std::string>().find("<think>") ==
          std::string::npos);  // failed attempt: no reasoning
    const bool executed_repair = l.at("metadata").at("source_category") == "targets_not_executed";
    CHECK(m[3].at("content") ==
          (executed_repair ? "Correct. Make it faster."
                           : "Your kernel failed: " +
                                 l.at("metadata").at("source_category").get<std::string>() + ". Fix it."));
    CHECK(l.at("metadata").at("loss_message_indices") == json::array({4}));
    CHECK(l.at("metadata").at("correct") == true);
    CHECK(l.at("metadata").at("source_turn").get<int>() + 1 == l.at("metadata").at("turn").get<int>());
  }
  CHECK(ids == std::set<std::string>{"alpha/gemm_a/0@2", "alpha/gemm_a/1@1", "alpha/mha_b/2@1",
                                     "beta/gemm_a/1@1", "beta/mha_b/1@1"});
  CHECK(r.counts.by_source_category ==
        std::map<std::string, int>{
            {"bad_manifest", 1}, {"incorrect", 2}, {"static_error", 1}, {"targets_not_executed", 1}});
}

TEST_CASE("improve pairs: correct but slower -> faster") {
  ExportOptions o;
  o.all = true;  // every target turn: the default outcome filter has its own test
  o.format = ExportFormat::improve_pairs;
  auto lines = parse_lines(run_export(o));
  // alpha/gemm_a/1: 0.6 -> 0.9 and 0.9 -> 1.25. beta/gemm_a/1 0.8 -> suspicious 5.0 is not an improvement.
  REQUIRE(lines.size() == 2);
  CHECK(lines[0].at("metadata").at("source_speedup") == 0.6);
  CHECK(lines[0].at("metadata").at("speedup") == 0.9);
  CHECK(lines[1].at("metadata").at("source_speedup") == 0.9);
  CHECK(lines[1].at("metadata").at("speedup") == 1.25);
  for (const auto &l : lines) CHECK(messages_alternate(l.at("messages")));
  o.improve_min_gain = 1.45;  // 0.9/0.6 = 1.5 passes, 1.25/0.9 = 1.39 does not
  CHECK(run_export(o).lines.size() == 1);
}

TEST_CASE("filters on the target turn") {
  ExportOptions o;
  o.all = true;  // every target turn: the default outcome filter has its own test
  auto written = [&] { return run_export(o).counts.written; };
  o.filter.correct = true;  // 10 correct attempts (one is the duplicate pair) -> 9
  CHECK(written() == 9);
  CHECK(run_export(o).counts.filtered.at("correct") == 14);
  o.filter = {};
  o.filter.min_speedup = 1.2;  // 1.5, 1.25, 2.0; the suspicious 5.0 is excluded
  CHECK(written() == 3);
  o.filter = {};
  o.filter.targets_executed = false;
  CHECK(written() == 3);
  o.filter = {};
  o.filter.statuses = {"compile_error"};
  CHECK(written() == 5);
  o.filter = {};
  o.filter.tasks = {"mha_b"};
  o.filter.models = {"beta"};
  CHECK(written() == 4);
  o.filter = {};
  o.filter.turns = {2};
  ExportResult r = run_export(o);
  CHECK(r.counts.written == 6);
  CHECK(r.counts.by_turn == std::map<int, int>{{2, 6}});
  CHECK(r.card_markdown.find("| turn | 18 |") != std::string::npos);  // filtered by turn: 24 usable - 6
}

TEST_CASE("caps per task and per failure category: seeded, stratified by turn") {
  ExportOptions o;
  o.all = true;  // every target turn: the default outcome filter has its own test
  o.format = ExportFormat::repair_pairs;
  o.balance.cap_per_failure = 1;
  ExportResult r = run_export(o);
  CHECK(r.counts.written == 4);  // the two "incorrect" pairs -> 1
  CHECK(r.counts.capped_by_failure == 1);
  CHECK(r.counts.by_source_category.at("incorrect") == 1);

  o.balance = {};
  o.balance.cap_per_task = 2;
  // gemm_a has three pairs with target turns 2, 1, 1: round-robin over turns keeps the turn-2 pair and
  // one of the turn-1 pairs, whichever the seed picks.
  std::set<std::string> turn1_choices;
  for (std::uint64_t seed = 0; seed < 16; ++seed) {
    o.balance.seed = seed;
    ExportResult a = run_export(o), b = run_export(o);
    CHECK(a.lines == b.lines);  // same seed, same dataset
    CHECK(a.counts.capped_by_task == 1);
    std::set<std::string> ids;
    for (const auto &l : parse_lines(a)) ids.insert(id_of(l));
    CHECK(ids.count("alpha/gemm_a/0@2") == 1);
    CHECK(ids.count("alpha/mha_b/2@1") == 1);
    CHECK(ids.count("beta/mha_b/1@1") == 1);
    for (const auto &id : {"alpha/gemm_a/1@1", "beta/gemm_a/1@1"}) {
      if (ids.count(id)) turn1_choices.insert(id);
    }
  }
  CHECK(turn1_choices.size() == 2);  // the seed matters
}

TEST_CASE("length limits: characters and endpoint token counts") {
  ExportOptions o;
  o.all = true;                // every target turn: the default outcome filter has its own test
  o.limits.max_tokens = 1400;  // every example is 1500 tokens with reasoning, 1300 without
  ExportResult r = run_export(o);
  CHECK(r.counts.written == 0);
  CHECK(r.counts.too_long == 24);
  o.reasoning = ReasoningMode::drop;
  CHECK(run_export(o).counts.written == 23);

  ExportOptions all;
  all.all = true;
  auto unlimited = parse_lines(run_export(all));
  std::size_t limit = 0;
  for (const auto &l : unlimited) {
    // metadata.chars is the code points of all message text (reasoning is inline here)
    std::size_t chars = 0;
    for (const auto &m : l.at("messages")) chars += detail::utf8_length(m.at("content").get<std::string>());
    CHECK(l.at("metadata").at("chars") == chars);
    if (l.at("metadata").at("turn") == 0) limit = std::max(limit, chars);
  }
  ExportOptions limited;
  limited.all = true;
  limited.limits.max_chars = limit;  // every turn-0 example fits; later turns carry history and do not
  ExportResult lr = run_export(limited);
  auto kept = parse_lines(lr);
  CHECK(kept.size() == 9);
  for (const auto &l : kept) CHECK(l.at("metadata").at("chars").get<std::size_t>() <= limit);
  CHECK(lr.counts.too_long ==
        14);  // 24 usable - 10 turn-0 examples (the limit applies before de-duplication)
}

TEST_CASE("bad input") {
  SUBCASE("empty run: a clear error") {
    auto r = build_export(runs({"empty"}), {});
    REQUIRE_FALSE(r.has_value());
    CHECK(r.error().find("trajectories.jsonl is empty") != std::string::npos);
  }
  SUBCASE("a killed run: partial lines skipped and reported in the card") {
    ExportOptions every;
    every.all = true;
    ExportResult r = run_export(every, {"truncated"});
    CHECK(r.counts.written == 2);
    CHECK(r.card_markdown.find("2 partial or unreadable line(s) skipped") != std::string::npos);
  }
  SUBCASE("mixed versions: only the known version is exported, with a warning in the card") {
    ExportOptions every;
    every.all = true;
    ExportResult r = run_export(every, {"mixed_versions"});
    CHECK(r.counts.written == 1);
    CHECK(r.card_markdown.find("format_version other than 1") != std::string::npos);
  }
}

TEST_CASE("defaults: messages and sharegpt keep only correct, executed turns; --all keeps every turn") {
  // By hand from the outcome table: status ok, correct and executed are alpha/gemm_a/0@2, alpha/gemm_a/1@1,
  // alpha/gemm_a/1@2, alpha/mha_b/0@0 and beta/gemm_a/1@1, beta/mha_b/0@0 (a duplicate of alpha's
  // mha_b/0@0); beta/gemm_a/1@2 is correct and executed but suspicious.
  for (ExportFormat format : {ExportFormat::messages, ExportFormat::sharegpt}) {
    ExportOptions o;
    o.format = format;
    ExportResult r = run_export(o);
    auto lines = parse_lines(r);
    std::set<std::string> ids;
    for (const auto &l : lines) {
      ids.insert(id_of(l));
      CHECK(l.at("metadata").at("correct") == true);
      CHECK(l.at("metadata").at("targets_executed") == true);
    }
    CHECK(ids == std::set<std::string>{"alpha/gemm_a/0@2", "alpha/gemm_a/1@1", "alpha/gemm_a/1@2",
                                       "alpha/mha_b/0@0", "beta/gemm_a/1@1"});
    CHECK(r.counts.duplicates == 1);
    CHECK(
        r.card_markdown.find("Outcome filter: default: only target turns with status ok that are correct and "
                             "whose target instructions executed") != std::string::npos);
    CHECK(r.card_markdown.find("correct = true; targets executed = true") != std::string::npos);
  }
  // An explicit outcome filter replaces the default: --correct false keeps the wrong turns.
  ExportOptions wrong;
  wrong.filter.correct = false;
  ExportResult w = run_export(wrong);
  for (const auto &l : parse_lines(w)) CHECK(l.at("metadata").at("correct") == false);
  CHECK(w.counts.written > 0);
  CHECK(w.card_markdown.find("the default filter did not apply") != std::string::npos);
  // --all: every turn (23 of them, as in the shape test).
  ExportOptions all;
  all.all = true;
  ExportResult a = run_export(all);
  CHECK(a.counts.written == 23);
  CHECK(a.card_markdown.find("every target turn (--all)") != std::string::npos);
  CHECK(effective_filter(all).correct == std::nullopt);
}

TEST_CASE("defaults: repair pairs' fixed turns are correct and executed unless --all") {
  ExportOptions o;
  o.format = ExportFormat::repair_pairs;
  ExportResult r = run_export(o);
  // Of the five repairs (see the repair-pairs test), alpha/mha_b/2@1 and beta/mha_b/1@1 fixed the
  // outcome but their targets did not execute: left out by default.
  std::set<std::string> ids;
  for (const auto &l : parse_lines(r)) {
    ids.insert(id_of(l));
    CHECK(l.at("metadata").at("correct") == true);
    CHECK(l.at("metadata").at("targets_executed") == true);
  }
  CHECK(ids == std::set<std::string>{"alpha/gemm_a/0@2", "alpha/gemm_a/1@1", "beta/gemm_a/1@1"});
  CHECK(r.card_markdown.find("fixed turns correct and their target instructions executed") !=
        std::string::npos);
  o.all = true;
  CHECK(run_export(o).counts.written == 5);
}

TEST_CASE("de-duplication keys include the task: one kernel answered for two tasks is two examples") {
  auto loaded = runs();
  int moved = 0;
  for (auto &r : loaded[0].turns) {
    if (r.model == "beta" && r.task_id == "mha_b" && r.sample == 0) {
      r.task_id = "mha_c";  // same kernel as alpha/mha_b/0, another task
      r.trajectory_id = "beta/mha_c/0";
      ++moved;
    }
  }
  REQUIRE(moved > 0);
  ExportOptions every_turn;
  every_turn.all = true;  // the default keeps only correct, executed turns
  auto result = build_export(loaded, every_turn);
  REQUIRE(result);
  CHECK(result->counts.duplicates == 0);
  CHECK(result->counts.written == 24);
}

TEST_CASE("filter on generalization: only turns checked on the hidden workloads can match") {
  std::vector<LoadedRun> loaded = runs();
  // Mark the correct attempts alternately right / wrong on hidden workloads; the others stay unchecked.
  int correct = 0, marked_true = 0;
  for (auto &run : loaded)
    for (auto &t : run.turns)
      if (t.verdict.is_object() && t.verdict.contains("axes") && t.verdict["axes"]["correct"] == true) {
        const bool value = (correct++ % 2) == 0;
        marked_true += value;
        t.verdict["generalizes"] = {{"value", value}, {"passed", value ? 2 : 1}, {"total", 2}};
      }
  REQUIRE(correct > 2);
  ExportOptions o;
  o.all = true;
  o.deduplicate = false;
  o.filter.generalizes = true;
  auto result = build_export(loaded, o);
  REQUIRE(result.has_value());
  CHECK(result->counts.written == marked_true);
  for (const auto &line : parse_lines(*result)) CHECK(line["metadata"]["generalizes"] == true);
  CHECK(result->card_markdown.find("generalizes = true") != std::string::npos);
  o.filter.generalizes = false;
  auto wrong = build_export(loaded, o);
  REQUIRE(wrong.has_value());
  CHECK(wrong->counts.written == correct - marked_true);
  CHECK(wrong->counts.filtered.at("generalizes") > 0);
}

namespace {

/// The profile stage the H200 wrote for the wgmma+TMA GEMM (tests/data/profile): bound by the tensor pipe
/// at 87.18% of peak, the library's tensor pipe 99.28%.
json profile_stage_fixture() {
  std::ifstream in(std::filesystem::path(PTXBENCH_TEST_DATA) / "profile" / "gemm_wgmma_tma_stage.json");
  REQUIRE(in.good());
  return json::parse(in);
}

const std::string kTensor = "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active";
const std::string kDram = "dram__throughput.avg.pct_of_peak_sustained_elapsed";

}  // namespace

TEST_CASE("export metadata: the bound unit, its % of peak and the tensor pipe beside the library's") {
  std::vector<LoadedRun> loaded = runs();
  // alpha/gemm_a/1 improves 0.6 -> 0.9 -> 1.25: turn 2 gets the fixture's profile, turn 1 a DRAM-bound one
  // (DRAM 81%, tensor pipe 35%, no library figure), turn 0 none (an older verdict).
  json dram_bound = profile_stage_fixture();
  for (auto &m : dram_bound["figures"]["kernel_profile"]["metrics"]) {
    if (m["name"] == kDram) m["value"] = 81.0;
    if (m["name"] == kTensor) {
      m["value"] = 35.0;
      m["library"] = nullptr;
    }
  }
  int marked = 0;
  for (auto &run : loaded)
    for (auto &t : run.turns)
      if (t.trajectory_id == "alpha/gemm_a/1" && t.turn > 0) {
        t.verdict["stages"]["profile"] = t.turn == 2 ? profile_stage_fixture() : dram_bound;
        ++marked;
      }
  REQUIRE(marked == 2);

  ExportOptions o;
  o.all = true;
  auto result = build_export(loaded, o);
  REQUIRE(result.has_value());
  int profiled = 0;
  for (const auto &line : parse_lines(*result)) {
    const json &m = line.at("metadata");
    for (const char *key : {"bound_unit", "bound_unit_pct", "tensor_pipe_pct", "library_tensor_pipe_pct"})
      REQUIRE(m.contains(key));
    if (id_of(line) == "alpha/gemm_a/1@2") {
      ++profiled;
      CHECK(m.at("bound_unit") == kTensor);
      CHECK(m.at("bound_unit_pct") == 87.18);
      CHECK(m.at("tensor_pipe_pct") == 87.18);
      CHECK(m.at("library_tensor_pipe_pct") == 99.28);
    } else if (id_of(line) == "alpha/gemm_a/1@1") {
      ++profiled;
      CHECK(m.at("bound_unit") == kDram);
      CHECK(m.at("bound_unit_pct") == 81.0);
      CHECK(m.at("tensor_pipe_pct") == 35.0);
      CHECK(m.at("library_tensor_pipe_pct").is_null());  // not measured, not 0
    } else {
      // Not profiled (the fixture run predates the stage): null, never 0.
      CHECK(m.at("bound_unit").is_null());
      CHECK(m.at("bound_unit_pct").is_null());
      CHECK(m.at("tensor_pipe_pct").is_null());
      CHECK(m.at("library_tensor_pipe_pct").is_null());
    }
  }
  CHECK(profiled == 2);

  // Improve pairs carry the source turn's figures too: 1 -> 2 went from DRAM-bound to tensor-bound.
  o.format = ExportFormat::improve_pairs;
  auto pairs = build_export(loaded, o);
  REQUIRE(pairs.has_value());
  const auto lines = parse_lines(*pairs);
  REQUIRE(lines.size() == 2);
  CHECK(lines[0].at("metadata").at("source_bound_unit").is_null());  // turn 0: not profiled
  CHECK(lines[0].at("metadata").at("bound_unit") == kDram);
  CHECK(lines[1].at("metadata").at("source_bound_unit") == kDram);
  CHECK(lines[1].at("metadata").at("source_tensor_pipe_pct") == 35.0);
  CHECK(lines[1].at("metadata").at("bound_unit") == kTensor);
  CHECK(lines[1].at("metadata").at("tensor_pipe_pct") == 87.18);

  // A malformed profile record is "not profiled" in the export (the report warns about it).
  loaded[0].turns[0].verdict["stages"]["profile"] = profile_stage_fixture();
  loaded[0].turns[0].verdict["stages"]["profile"]["figures"]["kernel_profile"]["occupancy"] = 3;
  o.format = ExportFormat::messages;
  auto bad = build_export(loaded, o);
  REQUIRE(bad.has_value());
  const auto first = parse_lines(*bad);
  const std::string first_id =
      loaded[0].turns[0].trajectory_id + "@" + std::to_string(loaded[0].turns[0].turn);
  const auto it =
      std::find_if(first.begin(), first.end(), [&](const json &line) { return id_of(line) == first_id; });
  REQUIRE(it != first.end());
  CHECK(it->at("metadata").at("bound_unit").is_null());
  CHECK(it->at("metadata").at("tensor_pipe_pct").is_null());
}

TEST_CASE("one outcome per record: read from the typed verdict, malformed verdicts named unknown") {
  namespace protocol = ptxbench::protocol;
  protocol::Verdict v;
  v.task_id = "gemm";
  v.kernel_hash = "abc";
  v.parse.status = v.static_checks.status = v.compile.status = protocol::Status::ok;
  v.correctness.status = v.execution.status = v.timing.status = protocol::Status::ok;
  v.axes = {true, false, 0.8};
  v.finalize_status();
  TurnRecord r;
  r.verdict = v.to_json();
  const TurnOutcome o = outcome_of(r);
  CHECK(o.status == "ok");
  CHECK(o.compiled);
  CHECK(o.correct == true);
  CHECK(o.targets_executed == false);
  REQUIRE(o.speedup.has_value());
  CHECK(*o.speedup == doctest::Approx(0.8));
  CHECK(o.failure_category == "targets_not_executed");
  CHECK(detail::kernel_hash_of(r) == "abc");

  // A compile failure: not compiled, its status is the category, the later stages skipped.
  v.compile.status = protocol::Status::compile_error;
  v.skip_from(protocol::Stage::compile);
  v.axes = {};
  v.finalize_status();
  r.verdict = v.to_json();
  const TurnOutcome failed = outcome_of(r);
  CHECK(failed.status == "compile_error");
  CHECK_FALSE(failed.compiled);
  CHECK(failed.failure_category == "compile_error");
  CHECK_FALSE(failed.speedup.has_value());

  // Data from disk that the codec refuses: a verdict, but not one this build can read.
  r.verdict = json{{"status", "ok"}, {"stages", "not an object"}};
  CHECK_FALSE(r.decoded_verdict().has_value());
  CHECK(outcome_of(r).status == "unknown");
  CHECK_FALSE(outcome_of(r).compiled);
  r.verdict = nullptr;
  CHECK(outcome_of(r).status == "request_failed");
}
