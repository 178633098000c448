// The run config (parsing, errors naming the JSON path, the embedded default), history policies, stop
// targets and variants; linked into test_agent beside test_agent.cpp.
#include <doctest/doctest.h>

#include "agent_fixture.hpp"

using namespace ptxbench;
using namespace agent_test;
namespace fs = std::filesystem;
using Json = nlohmann::json;

TEST_CASE("config: unknown fields and bad types name the JSON path") {
  auto bad = agent::parse_run_config(Json::parse(R"({"turnz": 3, "samples": "two",
      "endpoints": [{"name": "a", "base_url": "http://x/v1", "max_in_flight": "many"}],
      "stop": {"min_speedup": "fast"}, "history": "some", "concurrency": {"gpus": [0, -1]},
      "evaluator": {"timing": {"max_seconds": -1}}})"),
                                     "cfg.json", "/tmp");
  REQUIRE_FALSE(bad);
  const std::string &e = bad.error();
  CHECK(e.find("cfg.json: turnz: unknown field") != std::string::npos);
  CHECK(e.find("samples: expected an integer") != std::string::npos);
  CHECK(e.find("endpoints[0].max_in_flight") != std::string::npos);
  CHECK(e.find("stop.min_speedup: expected a number") != std::string::npos);
  CHECK(e.find("history: expected \"full\", \"last_attempt\" or \"none\", got \"some\"") !=
        std::string::npos);
  CHECK(e.find("concurrency.gpus[1]") != std::string::npos);
  CHECK(e.find("evaluator.timing.max_seconds") != std::string::npos);

  auto key =
      agent::parse_run_config(Json::parse(R"({"endpoints": [{"name": "a", "api_key": "sk-x"}]})"), "c", "/");
  REQUIRE_FALSE(key);
  CHECK(key.error().find("api_key_env") != std::string::npos);
  CHECK(key.error().find("sk-x") == std::string::npos);

  auto not_object = agent::parse_run_config(Json::parse("[1]"), "c", "/");
  REQUIRE_FALSE(not_object);
  CHECK(not_object.error().find("expected an object") != std::string::npos);
}

TEST_CASE("config: a full config parses, validates and round-trips through to_json") {
  auto parsed = agent::parse_run_config(Json::parse(R"({
      "endpoints": [{"name": "q", "base_url": "http://127.0.0.1:8000/v1", "model": "qwen", "api_key_env": "MY_KEY"},
                    {"name": "s", "kind": "scripted", "scripted_file": "resp.json"}],
      "tasks": ["core", "gemm_n4096_k4096"], "samples": 3, "turns": 5, "history": "last_attempt",
      "prices": {"q": {"prompt_usd_per_mtok": 0.5, "completion_usd_per_mtok": 2.0}},
      "stop": {"correct": true, "targets_executed": false, "min_speedup": 1.2},
      "sampling": {"temperature": 0.6, "max_tokens": 8000, "seed": 7},
      "budgets": {"tokens_per_trajectory": 100000, "tokens_per_run": 5000000},
      "concurrency": {"requests_per_endpoint": 8, "compile_workers": 3, "gpus": [0, 1]},
      "evaluator": {"run_gpu": false, "correctness": {"trials": 5},
                    "timing": {"cooldown_ratio": 0.5, "library_preroll": false}}})"),
                                        "cfg.json", "/base");
  REQUIRE(parsed);
  const auto &c = *parsed;
  REQUIRE(c.endpoints.size() == 2);
  CHECK(c.endpoints[0].max_in_flight == 8);
  CHECK(c.endpoints[1].scripted_file == "/base/resp.json");
  CHECK(c.history == agent::HistoryPolicy::last_attempt);
  CHECK(c.stop.min_speedup == 1.2);
  CHECK_FALSE(c.stop.targets_executed);
  CHECK(c.sampling.max_tokens == 8000);
  CHECK(c.budgets.per_run == 5000000);
  CHECK(c.concurrency.gpus == std::vector<int>{0, 1});
  CHECK(c.evaluator.correctness.trials == 5);
  CHECK_FALSE(c.evaluator.run_gpu);
  CHECK(c.evaluator.timing.cooldown_ratio == 0.5);
  CHECK_FALSE(c.evaluator.timing.library_preroll);
  REQUIRE(c.prices.count("q"));
  CHECK(c.prices.at("q").completion_usd_per_mtok == 2.0);
  CHECK(c.to_json()["prices"]["q"]["prompt_usd_per_mtok"] == 0.5);
  CHECK(agent::validate(c));
  agent::RunConfig unknown_price = c;
  unknown_price.prices["nobody"] = {1.0, 1.0};
  auto up = agent::validate(unknown_price);
  REQUIRE_FALSE(up);
  CHECK(up.error().find("prices: 'nobody' is not an endpoint name") != std::string::npos);
  auto negative = agent::parse_run_config(
      Json::parse(R"({"prices": {"q": {"prompt_usd_per_mtok": -1, "completion_usd_per_mtok": 1}}})"), "c",
      "/");
  REQUIRE_FALSE(negative);
  CHECK(negative.error().find("prices.q.prompt_usd_per_mtok") != std::string::npos);

  auto again = agent::parse_run_config(c.to_json(), "run.json", "/elsewhere");
  REQUIRE(again);
  CHECK(again->to_json() == c.to_json());

  agent::RunConfig dup = c;
  dup.endpoints[1].name = "q";
  auto v = agent::validate(dup);
  REQUIRE_FALSE(v);
  CHECK(v.error().find("'q' is used twice") != std::string::npos);
}

TEST_CASE("config: the embedded default config loads") {
  auto c = agent::load_run_config(agent::default_examples_dir() / "default_run.json");
  REQUIRE(c);
  CHECK(agent::validate(*c));
  REQUIRE(c->endpoints.size() == 1);
  CHECK(c->endpoints[0].kind == "scripted");
  CHECK(fs::exists(c->endpoints[0].scripted_file));
  auto v = agent::load_run_config(agent::default_examples_dir() / "variants_run.json");
  REQUIRE_MESSAGE(v, (v ? "" : v.error()));
  CHECK(agent::validate(*v));
  CHECK(v->variants.size() == 3);
}

// ---------------------------------------------------------------- messages, stop

TEST_CASE("history policies produce the right message lists") {
  const std::vector<agent::Attempt> h = {{"answer0", "feedback0"}, {"", "feedback1"}};
  auto full = agent::build_messages(agent::HistoryPolicy::full, "SYS", "TASK", h);
  REQUIRE(full.size() == 6);
  CHECK(full[0].role == "system");
  CHECK(full[1].content == "TASK");
  CHECK(full[2].role == "assistant");
  CHECK(full[2].content == "answer0");
  CHECK(full[3].content == "feedback0");
  CHECK(full[4].content == "(empty response)");
  CHECK(full[5].role == "user");
  CHECK(full[5].content == "feedback1");

  auto last = agent::build_messages(agent::HistoryPolicy::last_attempt, "SYS", "TASK", h);
  REQUIRE(last.size() == 4);
  CHECK(last[2].content == "(empty response)");
  CHECK(last[3].content == "feedback1");

  auto none = agent::build_messages(agent::HistoryPolicy::none, "SYS", "TASK", h);
  REQUIRE(none.size() == 2);
  CHECK(none[1].content == "TASK\n\nfeedback1");
  CHECK(none[1].content.find("answer0") == std::string::npos);

  for (auto p :
       {agent::HistoryPolicy::full, agent::HistoryPolicy::last_attempt, agent::HistoryPolicy::none}) {
    auto first = agent::build_messages(p, "SYS", "TASK", {});
    REQUIRE(first.size() == 2);
    CHECK(first[1].content == "TASK");
  }
}

TEST_CASE("stop target") {
  agent::StopTarget t;  // correct + targets executed
  evaluator::Axes a;
  CHECK_FALSE(t.reached(a));
  a.correct = true;
  CHECK_FALSE(t.reached(a));
  a.targets_executed = true;
  CHECK(t.reached(a));
  t.min_speedup = 1.2;
  a.speedup = 1.1;
  CHECK_FALSE(t.reached(a));
  a.speedup = 1.25;
  CHECK(t.reached(a));
  agent::StopTarget never{false, false, std::nullopt};
  CHECK_FALSE(never.reached(a));
}

// ---------------------------------------------------------------- the loop

TEST_CASE("variants: config parsing, errors naming the path, --variant selection") {
  const Json j = {
      {"endpoints", Json::array({{{"name", "a"}, {"model", "a"}, {"base_url", "http://127.0.0.1:9/v1"}}})},
      {"history", "full"},
      {"turns", 4},
      {"sampling", {{"temperature", 0.7}, {"max_tokens", 1000}}},
      {"variants", Json::array({{{"name", "plain"}},
                                {{"name", "packs"},
                                 {"packs", {"ptx-hopper", "patterns"}},
                                 {"target_notes", false},
                                 {"history", "none"},
                                 {"turns", 2},
                                 {"profile", false},
                                 {"sampling", {{"temperature", 0.2}}}}})}};
  auto c = agent::parse_run_config(j, "cfg", ".");
  REQUIRE_MESSAGE(c, (c ? "" : c.error()));
  REQUIRE(c->variants.size() == 2);
  const auto &plain = c->variants[0];
  const auto &packs = c->variants[1];
  CHECK(c->history_of(plain) == agent::HistoryPolicy::full);
  CHECK(c->turns_of(plain) == 4);
  CHECK(c->history_of(packs) == agent::HistoryPolicy::none);
  CHECK(c->turns_of(packs) == 2);
  CHECK(c->sampling_of(packs).temperature == doctest::Approx(0.2));
  CHECK(c->sampling_of(packs).max_tokens == 1000);  // not overridden: the run's
  CHECK(c->sampling_of(plain).temperature == doctest::Approx(0.7));
  CHECK_FALSE(packs.target_notes);
  CHECK(packs.packs == std::vector<std::string>{"ptx-hopper", "patterns"});
  CHECK(packs.profile == false);  // this arm's feedback goes without the hardware profile
  CHECK_FALSE(plain.profile.has_value());
  // Round trip through run.json's config.
  auto again = agent::parse_run_config(c->to_json(), "run.json", ".");
  REQUIRE_MESSAGE(again, (again ? "" : again.error()));
  CHECK(again->to_json() == c->to_json());
  // --variant keeps the named arms in config order; an unknown name is an error listing the known ones.
  auto selected = *c;
  REQUIRE(agent::select_variants(selected, {"packs"}));
  REQUIRE(selected.variants.size() == 1);
  CHECK(selected.variants[0].name == "packs");
  auto bad = agent::select_variants(selected, {"nope"});
  REQUIRE_FALSE(bad);
  CHECK(bad.error().find("packs") != std::string::npos);

  Json broken = j;
  broken["variants"][1]["history"] = "sometimes";
  broken["variants"][0]["colour"] = "red";
  broken["variants"][0]["profile"] = "yes";
  auto e = agent::parse_run_config(broken, "cfg", ".");
  REQUIRE_FALSE(e);
  CHECK(e.error().find("variants[1].history") != std::string::npos);
  CHECK(e.error().find("variants[0]") != std::string::npos);
  CHECK(e.error().find("colour") != std::string::npos);
  CHECK(e.error().find("variants[0].profile: expected true or false") != std::string::npos);
  Json twice = j;
  twice["variants"][1]["name"] = "plain";
  auto t = agent::parse_run_config(twice, "cfg", ".");
  REQUIRE(t);
  auto v = agent::validate(*t);
  REQUIRE_FALSE(v);
  CHECK(v.error().find("variant name 'plain' is used twice") != std::string::npos);
}

TEST_CASE("variants: cells are model x variant x task x sample; records and prompts follow each variant") {
  ScratchDir tmp;
  auto script = std::make_shared<Script>();
  script->answer = [](const llm::ChatRequest &) -> util::Expected<llm::ChatResponse, llm::ChatError> {
    return text("BROKEN kernel");
  };
  auto c = base_config(tmp.dir / "run", 2, 2, 3);
  c.sampling.temperature = 0.9;
  agent::Variant notes;  // the default material: target notes only
  notes.name = "notes";
  agent::Variant packs;
  packs.name = "packs";
  packs.target_notes = false;
  packs.packs = {"ptx-hopper", "debugging"};
  packs.history = agent::HistoryPolicy::none;
  packs.sampling.temperature = 0.1;
  agent::Variant bare;
  bare.name = "bare";
  bare.target_notes = false;
  bare.history = agent::HistoryPolicy::last_attempt;
  bare.turns = 2;
  c.variants = {notes, packs, bare};
  auto result = run_config(c, script);
  CHECK(result.end == agent::RunEnd::completed);
  auto all = by_trajectory(tmp.dir / "run");
  CHECK(all.size() == 2 * 3 * 2 * 2);
  CHECK(result.turns_recorded == 2 * 2 * 2 * (3 + 3 + 2));
  for (const auto &[id, records] : all) {
    INFO(id);
    const std::string variant = records.front().variant.value_or("");
    CHECK(id.find("/" + variant + "/") != std::string::npos);
    const std::string system = records.front().messages->at(0).content;
    const bool has_notes = system.find("## wgmma (sm_90a)") != std::string::npos;
    const bool has_hopper_pack = system.find("Knowledge pack ptx-hopper (version 1)") != std::string::npos;
    const bool has_debug_pack = system.find("Knowledge pack debugging (version 1)") != std::string::npos;
    const auto &reference = records.front().reference;
    if (variant == "notes") {
      CHECK(has_notes);
      CHECK_FALSE(has_hopper_pack);
      CHECK(reference["packs"].empty());
      CHECK(records.size() == 3);
      CHECK(records[2].messages->size() == 6);  // full history
    } else if (variant == "packs") {
      CHECK_FALSE(has_notes);
      CHECK(has_hopper_pack);
      CHECK(has_debug_pack);
      CHECK(reference["target_notes"] == false);
      REQUIRE(reference["packs"].size() == 2);
      CHECK(reference["packs"][0] == Json{{"name", "ptx-hopper"}, {"version", "1"}});
      CHECK(records.size() == 3);
      CHECK(records[2].messages->size() == 2);  // history none
    } else {
      CHECK(variant == "bare");
      CHECK_FALSE(has_notes);
      CHECK_FALSE(has_hopper_pack);
      CHECK(records.size() == 2);  // the variant's own turn limit
      CHECK(records[1].stop_reason == "turn_limit");
      CHECK(records[1].messages->size() == 4);  // last attempt
    }
  }
  // The summary splits by variant: one row per model@variant x task.
  CHECK(result.summary.rows.size() == 2 * 3 * 2);
  std::set<std::string> labels;
  for (const auto &r : result.summary.rows) labels.insert(r.model);
  CHECK(labels ==
        std::set<std::string>{"m0@bare", "m0@notes", "m0@packs", "m1@bare", "m1@notes", "m1@packs"});
  const Json run = Json::parse(slurp(tmp.dir / "run" / "run.json"));
  CHECK(run["config"]["variants"].size() == 3);

  SUBCASE("an unknown pack is a setup error naming the known packs") {
    auto c2 = base_config(tmp.dir / "bad", 1, 1, 1);
    agent::Variant v;
    v.name = "typo";
    v.packs = {"ptx-hoper"};
    c2.variants = {v};
    auto runner = agent::Runner::start(std::move(c2), fake_services(script), quiet());
    REQUIRE_FALSE(runner);
    CHECK(runner.error().find("ptx-hoper") != std::string::npos);
    CHECK(runner.error().find("ptx-hopper") != std::string::npos);
  }
}

TEST_CASE(
    "loop: a resent identical kernel reuses its verdict (no compile, no GPU) and says from which turn") {
  ScratchDir tmp;
  const std::string kernel = slurp(fs::path(PTXBENCH_SOURCE_DIR) / "tasks" / "solutions" /
                                   "gemm_n7168_k5120" / "wgmma_tma" / "response.md");
  REQUIRE_FALSE(kernel.empty());
  auto script = std::make_shared<Script>();
  // Turns 0, 1 and 3 send the same kernel; turn 2 adds a comment (same normalized hash); turn 4 changes it.
  script->answer = [&](const llm::ChatRequest &r) -> util::Expected<llm::ChatResponse, llm::ChatError> {
    std::string k = kernel;
    if (r.turn_index == 2) k.insert(k.find(".version"), "// unchanged, only a comment\n");
    if (r.turn_index == 4) k.insert(k.rfind("ret;"), "add.u32 %r1, %r1, 0;\n");
    return text(k);
  };
  std::atomic<int> compiled{0};
  auto services = fake_services(script);
  services.cpu_stages = [&](const tasks::Task &task, std::string_view response, evaluator::ParsedCandidate,
                            const evaluator::EvaluatorSettings &s) {
    ++compiled;
    return fake_cpu_stages(task, response, {}, s);  // a compile_error verdict: the loop goes on
  };
  auto c = base_config(tmp.dir / "run", 1, 1, 5);
  c.tasks = {"gemm_n7168_k5120"};
  auto runner = agent::Runner::start(c, services, quiet());
  REQUIRE(runner);
  const auto result = (*runner)->run();
  CHECK(result.end == agent::RunEnd::completed);
  CHECK(compiled == 2);  // turn 0 and the changed kernel of turn 4
  CHECK(result.verdicts_made == 2);
  CHECK(result.verdicts_reused == 3);
  auto turns = by_trajectory(tmp.dir / "run")["m0/gemm_n7168_k5120/0"];
  REQUIRE(turns.size() == 5);
  CHECK(turns[0].verdict["reused_from"].is_null());
  for (std::size_t i : {1u, 2u, 3u}) {
    INFO("turn " << i);
    CHECK(turns[i].verdict["reused_from"]["origin"] == "m0/gemm_n7168_k5120/0 turn 0");
    CHECK(turns[i].verdict["status"] == turns[0].verdict["status"]);
    CHECK(turns[i].candidate->kernel_source.find("ret;") != std::string::npos);
  }
  CHECK(turns[4].verdict["reused_from"].is_null());
  const Json run = Json::parse(slurp(tmp.dir / "run" / "run.json"));
  CHECK(run["throughput"]["verdicts_reused"] == 3);
  CHECK(run["throughput"]["verdicts_per_gpu_hour"].is_null());  // no GPU in this run
}

TEST_CASE("evaluator.url: a remote evaluator's settings are read, written without the token, and checked") {
  auto parsed = agent::parse_run_config(Json::parse(R"({
      "endpoints": [{"name": "m", "kind": "scripted", "scripted_file": "x.json"}],
      "evaluator": {"url": "http://gpu-lb:8700/", "token_env": "SERVE_TOKEN", "deadline_seconds": 120,
                    "retry_seconds": 30, "in_flight": 16}})"),
                                        "c", "/");
  REQUIRE_MESSAGE(parsed, parsed.error());
  const auto &s = parsed->evaluator_service;
  CHECK(s.enabled());
  CHECK(s.url == "http://gpu-lb:8700");
  CHECK(s.token_env == "SERVE_TOKEN");
  CHECK(s.deadline_s == 120);
  CHECK(s.retry_s == 30);
  CHECK(s.in_flight == 16);
  const Json j = parsed->to_json();
  CHECK(j["evaluator"]["url"] == "http://gpu-lb:8700");
  CHECK(j["evaluator"]["token_env"] == "SERVE_TOKEN");
  // Read back from run.json the same way (resume).
  auto again = agent::parse_run_config(j, "run.json", "/");
  REQUIRE_MESSAGE(again, again.error());
  CHECK(again->evaluator_service.url == s.url);
  CHECK(agent::config_hash(*again) == agent::config_hash(*parsed));

  // A literal token is used but never written.
  auto literal = agent::parse_run_config(
      Json::parse(R"({"endpoints": [{"name": "m", "kind": "scripted", "scripted_file": "x.json"}],
                      "evaluator": {"url": "http://h:1", "token": "s3cret"}})"),
      "c", "/");
  REQUIRE(literal);
  CHECK(literal->evaluator_service.token == "s3cret");
  CHECK(literal->to_json().dump().find("s3cret") == std::string::npos);

  // Without a URL the config's JSON (and hash) is what it was.
  auto local = agent::parse_run_config(
      Json::parse(R"({"endpoints": [{"name": "m", "kind": "scripted", "scripted_file": "x.json"}]})"), "c",
      "/");
  REQUIRE(local);
  CHECK_FALSE(local->evaluator_service.enabled());
  CHECK_FALSE(local->to_json()["evaluator"].contains("url"));

  auto bad = agent::parse_run_config(Json::parse(R"({"evaluator": {"url": "gpu-lb:8700", "in_flight": 0}})"),
                                     "c", "/");
  REQUIRE_FALSE(bad);
  CHECK(bad.error().find("c: evaluator.url: expected an http:// or https:// URL") != std::string::npos);
  CHECK(bad.error().find("evaluator.in_flight") != std::string::npos);

  agent::RunConfig both = *parsed;
  both.evaluator_service.token = "x";
  auto checked = agent::validate(both);
  REQUIRE_FALSE(checked);
  CHECK(checked.error().find("token_env or token, not both") != std::string::npos);
  agent::RunConfig profiled = *parsed;
  profiled.variants.push_back({});
  profiled.variants.back().name = "p";
  profiled.variants.back().profile = false;
  checked = agent::validate(profiled);
  REQUIRE_FALSE(checked);
  CHECK(checked.error().find("variant 'p': \"profile\" cannot be chosen per variant with evaluator.url") !=
        std::string::npos);
  agent::RunConfig token_only = *local;
  token_only.evaluator_service.token_env = "T";
  CHECK_FALSE(agent::validate(token_only));
}
