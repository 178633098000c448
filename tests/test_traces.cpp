// Run-directory writer and reader: append + fsync, partial tails, disk full; the typed turn record's
// round trip through JSON (recorded lines read back and written again keep every field); run.json's typed
// RunRecord (round trip, the committed fixtures, unknown keys kept, malformed fields named).
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
#include "traces/run_record.hpp"

using namespace ptxbench;
namespace fs = std::filesystem;

namespace {

using test::ScratchDir;
using test::slurp;

traces::TurnRecord make_record(int turn, std::size_t payload_bytes = 10) {
  return traces::TurnRecord::from_json({{"format_version", traces::kFormatVersion},
                                        {"trajectory_id", "m/t/0"},
                                        {"turn", turn},
                                        {"payload", std::string(payload_bytes, 'x')}});
}

}  // namespace

TEST_CASE("appended records load back in order") {
  ScratchDir dir("traces-test");
  traces::TrajectoryWriter writer(dir.path());
  for (int i = 0; i < 5; ++i) REQUIRE(writer.append(make_record(i)));
  { std::ofstream(dir.path() / "run.json") << R"({"run_id": "r1"})"; }
  auto run = traces::load_run(dir.path());
  REQUIRE(run);
  CHECK(run->run.run_id == "r1");
  REQUIRE(run->turns.size() == 5);
  for (int i = 0; i < 5; ++i) CHECK(run->turns[static_cast<std::size_t>(i)].turn == i);
  // A field this version does not know survives the round trip.
  CHECK(run->turns[0].extra["payload"] == std::string(10, 'x'));
  CHECK(run->skipped_partial_lines == 0);
  CHECK(run->warnings.empty());
  // One line per record.
  const std::string text = slurp(writer.path());
  CHECK(std::count(text.begin(), text.end(), '\n') == 5);
}

TEST_CASE("invalid UTF-8 from a model is replaced, not fatal") {
  ScratchDir dir("traces-test");
  traces::TrajectoryWriter writer(dir.path());
  traces::TurnRecord r = make_record(0);
  r.response.emplace();
  r.response->content = "ok \xff\xfe bytes";
  REQUIRE(writer.append(r));
  auto run = traces::load_run(dir.path());
  REQUIRE(run);
  REQUIRE(run->turns.size() == 1);
  REQUIRE(run->turns[0].response);
  const std::string got = run->turns[0].response->content;
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
  CHECK(run->turns[2].turn == 2);
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
      auto r = writer.append(make_record(i, 500));
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
  CHECK(run->turns.size() >= 10);  // 10 kB / records under 1 kB
  for (std::size_t i = 0; i < run->turns.size(); ++i) CHECK(run->turns[i].turn == static_cast<int>(i));
}

// ---------------------------------------------------------------- the typed record

namespace {

/// Every field of `original` is in `round_trip` with the same value (objects compared field by field);
/// a field only `round_trip` has is null (a nullable field the original record did not write).
bool keeps_every_field(const nlohmann::json &original, const nlohmann::json &round_trip, std::string path,
                       std::vector<std::string> &differences) {
  if (!original.is_object() || !round_trip.is_object()) {
    if (original != round_trip) differences.push_back(path);
    return original == round_trip;
  }
  bool same = true;
  for (auto it = original.begin(); it != original.end(); ++it) {
    if (!round_trip.contains(it.key())) {
      differences.push_back(path + "." + it.key() + " (missing)");
      same = false;
      continue;
    }
    same = keeps_every_field(it.value(), round_trip[it.key()], path + "." + it.key(), differences) && same;
  }
  for (auto it = round_trip.begin(); it != round_trip.end(); ++it) {
    if (!original.contains(it.key()) && !it.value().is_null()) {
      differences.push_back(path + "." + it.key() + " (added)");
      same = false;
    }
  }
  return same;
}

std::string line_of(const nlohmann::json &j) {
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

/// A record with every field set, as the runner writes one in a repairs run.
traces::TurnRecord full_record() {
  traces::TurnRecord r;
  r.run_id = "run-1";
  r.model = "alpha";
  r.task_id = "gemm_a";
  r.sample = 2;
  r.turn = 1;
  r.trajectory_id = "alpha/gemm_a/2";
  r.variant = "notes";
  r.reference = {{"target_notes", true}, {"packs", nlohmann::json::array()}};
  r.messages = std::vector<traces::RecordedMessage>{{"system", "S"}, {"user", "U"}};
  traces::TokenUsage usage;
  usage.prompt_tokens = 100;
  usage.completion_tokens = 50;
  usage.reasoning_tokens = 7;
  usage.estimated = true;
  usage.estimate_reason = "no usage in the stream";
  r.response = traces::ResponseRecord{"answer", "thinking", "stop", usage, 2, 1.25};
  r.candidate = traces::CandidateRecord{"ptx", ".version 8.5", "{}", "abc"};
  r.verdict = {{"status", "ok"}, {"axes", {{"correct", true}, {"targets_executed", true}, {"speedup", 1.5}}}};
  r.stop_reason = "target_reached";
  r.timings = traces::TurnTimings{0.5, 0.25, 0.125, 1.0, 2.0, 3.0, std::nullopt};
  r.gpu = 3;
  r.seed = 1002;
  r.repair_of = traces::RepairOf{"s/1", "student",       "runs/s",   "beta", "beta/gemm_a/0",
                                 1,     "compile_error", "recorded", 4,      0};
  r.synthesized_reasoning = traces::SynthesizedReasoning{"because", "explain", "stop", usage, std::nullopt};
  r.started_at = "2026-12-01T10:00:00Z";
  r.finished_at = "2026-12-01T10:00:09Z";
  return r;
}

}  // namespace

TEST_CASE("recorded fixture lines read into the typed record and write back with every field") {
  int lines = 0;
  for (const char *run : {"two_models", "mixed_versions", "truncated"}) {
    std::ifstream in(fs::path(PTXBENCH_TEST_DATA) / "runs" / run / "trajectories.jsonl");
    REQUIRE(in);
    std::string line;
    while (std::getline(in, line)) {
      nlohmann::json original;
      try {
        original = nlohmann::json::parse(line);
      } catch (const nlohmann::json::exception &) {
        continue;  // the truncated fixture's cut-short tail
      }
      ++lines;
      const traces::TurnRecord record = traces::TurnRecord::from_json(original);
      CHECK(record.model == original["model"].get<std::string>());
      CHECK(record.turn == original["turn"].get<int>());
      CHECK(record.has_identity);
      const nlohmann::json written = record.to_json();
      std::vector<std::string> differences;
      CHECK_MESSAGE(keeps_every_field(original, written, run, differences),
                    "fields changed: " << (differences.empty() ? "" : differences.front()));
      // Written once by this version, a record reads back and writes byte for byte the same.
      CHECK(line_of(traces::TurnRecord::from_json(nlohmann::json::parse(line_of(written))).to_json()) ==
            line_of(written));
    }
  }
  CHECK(lines >= 10);
}

TEST_CASE("a record with every field round-trips byte for byte through the writer and the reader") {
  ScratchDir dir("traces-test");
  traces::TrajectoryWriter writer(dir.path());
  const traces::TurnRecord r = full_record();
  REQUIRE(writer.append(r));
  const std::string text = slurp(writer.path());
  CHECK(text == line_of(r.to_json()) + "\n");
  auto run = traces::load_run(dir.path());
  REQUIRE(run);
  REQUIRE(run->turns.size() == 1);
  const traces::TurnRecord &back = run->turns[0];
  CHECK(line_of(back.to_json()) + "\n" == text);
  CHECK(back.variant == "notes");
  CHECK(back.response->usage.estimate_reason == "no usage in the stream");
  CHECK(back.repair_of->category == "compile_error");
  CHECK(back.synthesized_reasoning->content == "because");
  CHECK_FALSE(back.synthesized_reasoning->error);
  CHECK(back.timings->evaluator_cpu_ms == 3.0);
  CHECK_FALSE(back.timings->ttft_s);
  CHECK(back.to_json()["timings"]["ttft_s"].is_null());  // written as null: not streamed
  CHECK(traces::model_label(back) == "alpha@notes");
}

TEST_CASE("fields of the wrong type read as absent; a record without its identity is marked") {
  const auto r = traces::TurnRecord::from_json({{"format_version", 1},
                                                {"model", 7},
                                                {"task_id", "t"},
                                                {"sample", 0},
                                                {"turn", 0},
                                                {"response", "not an object"},
                                                {"messages", {{{"role", "user"}}}},
                                                {"verdict", "ok"},
                                                {"gpu", "zero"}});
  CHECK_FALSE(r.has_identity);
  CHECK(traces::model_label(r) == "?");
  CHECK_FALSE(r.response);
  CHECK_FALSE(r.messages);  // a message without content makes the request unreadable
  CHECK(r.verdict_object() == nullptr);
  CHECK_FALSE(r.gpu);
  const auto ok = traces::TurnRecord::from_json(
      {{"format_version", 1}, {"model", "m"}, {"task_id", "t"}, {"sample", 0}, {"turn", 100001}});
  CHECK_FALSE(ok.has_identity);  // turn out of range
}

// ---------------------------------------------------------------- run.json

namespace {

/// A run.json as the runner writes one for a shard that was resumed once, through an evaluation service,
/// with keys no version writes (top level and nested): the reader must keep them.
nlohmann::json full_run_json() {
  const nlohmann::json gpu_off = {{"enabled", false}, {"reason", "evaluated by the service at http://s"}};
  return {{"format_version", 1},
          {"run_id", "run-7"},
          {"created_at", "2026-12-01T10:00:00Z"},
          {"program", {{"name", "ptxbench"}, {"version", "0.1.0"}, {"git_revision", "abc1234"}}},
          {"config", {{"turns", 3}, {"prices", {{"m", {{"prompt_usd_per_mtok", 1.0}}}}}}},
          {"tasks", {"gemm_a", "attn_b"}},
          {"evaluator_settings", {{"run_seed", 77}}},
          {"gpu_stages", gpu_off},
          {"environment", {{"gpu", "no GPU: none"}, {"cuda_toolkit_at_build", "13.0"}}},
          {"resumes",
           {{{"at", "2026-12-01T11:00:00Z"},
             {"program_version", "0.1.0"},
             {"git_revision", "abc1234"},
             {"gpu_stages", {{"enabled", true}, {"gpus", {0, 1}}}},
             {"environment", {{"device_count", 2}}},
             {"note_from_a_later_version", true}}}},
          {"config_hash", "0123456789abcdef"},
          {"run_seed", 77},
          {"evaluator_service",
           {{"url", "http://s"},
            {"authenticated", true},
            {"deadline_seconds", 900.0},
            {"retry_seconds", 300.0},
            {"in_flight", 8},
            {"version", "0.1.0"},
            {"gpu_stages", nullptr},
            {"token_env", "TOKEN"}}},
          {"shard",
           {{"index", 1},
            {"count", 2},
            {"config_hash", "0123456789abcdef"},
            {"cells", 3},
            {"cells_total", 6},
            {"split", "ranked"}}},
          {"throughput",
           {{"wall_seconds", 12.5},
            {"gpu_busy_fraction", {{"0", 0.5}, {"1", 0.25}}},
            {"verdicts_made", 4},
            {"verdicts_reused", 1},
            {"verdicts_per_gpu_hour", nullptr}}},
          {"a_key_from_a_later_version", {{"x", 1}}}};
}

std::string run_error_of(nlohmann::json j) {
  auto r = traces::RunRecord::from_json(j);
  return r ? std::string("(read without error)") : r.error();
}

}  // namespace

TEST_CASE("run.json: every field and unknown keys round-trip byte for byte through RunRecord") {
  const nlohmann::json original = full_run_json();
  auto record = traces::RunRecord::from_json(original);
  REQUIRE_MESSAGE(record, record.error());
  CHECK(record->to_json().dump(2) == original.dump(2));
  CHECK(record->run_id == "run-7");
  CHECK(record->run_seed == std::uint64_t{77});
  REQUIRE(record->tasks);
  CHECK(*record->tasks == std::vector<std::string>{"gemm_a", "attn_b"});
  REQUIRE(record->resumes.size() == 1);
  CHECK(record->resumes[0].gpu_stages->gpus == std::vector<int>{0, 1});
  CHECK(record->resumes[0].extra["note_from_a_later_version"] == true);
  CHECK(record->shard->index == 1);
  CHECK(record->shard->cells == 3);
  CHECK(record->evaluator_service->token_env == "TOKEN");
  CHECK_FALSE(record->throughput->verdicts_per_gpu_hour);
  CHECK(record->throughput->gpu_busy_fraction.at("1") == 0.25);
  CHECK(record->extra["a_key_from_a_later_version"]["x"] == 1);
  CHECK(record->config["turns"] == 3);  // the run config stays JSON (agent's parse_run_config reads it)

  // Absent optional fields stay absent; `resumes` is always written.
  traces::RunRecord bare;
  bare.run_id = "r";
  CHECK(bare.to_json() == nlohmann::json{{"run_id", "r"}, {"resumes", nlohmann::json::array()}});
  const traces::GpuStagesRecord on{.enabled = true, .gpus = {2}};
  CHECK(nlohmann::json(on) == nlohmann::json{{"enabled", true}, {"gpus", {2}}});
}

TEST_CASE("run.json: the committed run directories load with their run.json, and write it back unchanged") {
  int runs = 0;
  for (const auto &entry : fs::directory_iterator(fs::path(PTXBENCH_TEST_DATA) / "runs")) {
    if (!fs::exists(entry.path() / "run.json")) continue;
    ++runs;
    const std::string name = entry.path().filename().string();
    CAPTURE(name);
    auto run = traces::load_run(entry.path());
    REQUIRE(run);
    CHECK(run->run_error.empty());
    CHECK(run->run.run_id == name);
    CHECK(run->run.format_version == 1);
    CHECK(run->run.config["turns"] == 3);
    CHECK(run->run.resumes.empty());
    CHECK_FALSE(run->run.run_seed);  // made before run seeds were recorded
    nlohmann::json written = run->run.to_json();
    CHECK(written["resumes"] == nlohmann::json::array());
    written.erase("resumes");  // the one key a rewrite adds
    CHECK(written == nlohmann::json::parse(slurp(entry.path() / "run.json")));
  }
  CHECK(runs >= 5);
}

TEST_CASE("run.json: a field of the wrong type or out of range is refused, naming it") {
  nlohmann::json j = full_run_json();
  j["run_seed"] = "seven";
  CHECK(run_error_of(j).rfind("run_seed: ", 0) == 0);
  j = full_run_json();
  j["run_seed"] = -1;
  CHECK(run_error_of(j) == "run_seed: expected an integer >= 0");
  j = full_run_json();
  j["tasks"] = "gemm_a";
  CHECK(run_error_of(j).rfind("tasks: ", 0) == 0);
  j = full_run_json();
  j["shard"]["index"] = 2;
  CHECK(run_error_of(j) == "shard.index: must be below count 2, got 2");
  j = full_run_json();
  j["resumes"][0]["gpu_stages"]["gpus"] = "0,1";
  CHECK(run_error_of(j).rfind("resumes[0].gpu_stages.gpus: ", 0) == 0);
  j = full_run_json();
  j["config"] = "turns=3";
  CHECK(run_error_of(j).rfind("config: expected an object", 0) == 0);
  CHECK(run_error_of(nlohmann::json::array()).rfind("expected an object", 0) == 0);

  // In a run directory: the records still load (reports go on), the warning and run_error name the field.
  ScratchDir dir("traces-test");
  traces::TrajectoryWriter writer(dir.path());
  REQUIRE(writer.append(make_record(0)));
  j = full_run_json();
  j["throughput"]["verdicts_made"] = 1.5;
  {
    std::ofstream out(dir.path() / "run.json");
    out << j.dump(2);
  }
  auto run = traces::load_run(dir.path());
  REQUIRE(run);
  CHECK(run->turns.size() == 1);
  CHECK(run->run_error == "run.json: throughput.verdicts_made: expected an integer");
  CHECK(run->run.run_id.empty());
  REQUIRE(!run->warnings.empty());
  CHECK(run->warnings[0].find("throughput.verdicts_made") != std::string::npos);
}
