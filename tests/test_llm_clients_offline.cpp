// llm_clients without a server: the protocol pieces byte by byte (SSE, Retry-After,
// backoff, request bodies, excerpts) and the scripted client. Linked into test_llm_clients beside
// test_llm_clients.cpp, which runs the libcurl client against a real HTTP server.
#include <doctest/doctest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "llm_clients/chat_client.hpp"
#include "llm_clients/detail/protocol.hpp"
#include "support/support.hpp"

using namespace ptxbench::llm;
namespace fs = std::filesystem;
using std::chrono::milliseconds;

namespace {

constexpr const char *kKey = "sk-test-5ecret-0123456789abcdef";  // must be redacted wherever it is echoed

ChatRequest simple_request() {
  ChatRequest r;
  r.messages = {{"system", "You write PTX."}, {"user", "Write a GEMM."}};
  return r;
}

}  // namespace

// ------------------------------------------------------------------ protocol pieces

TEST_CASE("SSE parser gives the same events for every way of splitting the bytes") {
  const std::string stream =
      "data: {\"a\":1}\n\n"
      ": keep-alive comment\n\n"
      "event: message\r\ndata: {\"b\":2}\r\n\r\n"
      "data:first line\ndata: second line\nid: 7\n\n"
      "data: [DONE]\n\n";
  const std::vector<std::string> expected = {"{\"a\":1}", "{\"b\":2}", "first line\nsecond line", "[DONE]"};
  for (std::size_t split = 0; split <= stream.size(); ++split) {
    std::vector<std::string> events;
    ptxbench::llm::detail::SseParser parser([&](std::string d) { events.push_back(std::move(d)); });
    parser.feed(std::string_view(stream).substr(0, split));
    parser.feed(std::string_view(stream).substr(split));
    parser.finish();
    REQUIRE(events == expected);
    CHECK(parser.bytes_seen() == stream.size());
  }
  std::vector<std::string> events;  // byte by byte, and a last event without its blank line
  ptxbench::llm::detail::SseParser parser([&](std::string d) { events.push_back(std::move(d)); });
  for (char c : std::string("data: x\n\ndata: tail")) parser.feed(std::string_view(&c, 1));
  CHECK(events == std::vector<std::string>{"x"});
  parser.finish();
  CHECK(events == std::vector<std::string>{"x", "tail"});
}

TEST_CASE("Retry-After as seconds and as HTTP dates") {
  using ptxbench::llm::detail::parse_retry_after;
  const auto now = std::chrono::system_clock::from_time_t(1'700'000'000);  // Tue, 14 Nov 2023 22:13:20 GMT
  CHECK(parse_retry_after("3", now) == milliseconds(3000));
  CHECK(parse_retry_after(" 0 ", now) == milliseconds(0));
  CHECK(parse_retry_after("Tue, 14 Nov 2023 22:13:25 GMT", now) == milliseconds(5000));
  CHECK(parse_retry_after("Tuesday, 14-Nov-23 22:13:30 GMT", now) == milliseconds(10000));
  CHECK(parse_retry_after("Tue Nov 14 22:13:22 2023", now) == milliseconds(2000));
  CHECK(parse_retry_after("Tue, 14 Nov 2023 22:00:00 GMT", now) == milliseconds(0));  // past
  CHECK_FALSE(parse_retry_after("soon", now).has_value());
  CHECK_FALSE(parse_retry_after("", now).has_value());
  CHECK_FALSE(parse_retry_after("-5", now).has_value());
}

TEST_CASE("full-jitter backoff stays within the doubled, capped ceiling") {
  using ptxbench::llm::detail::backoff_delay;
  std::mt19937_64 rng(42);
  for (int retry = 0; retry < 8; ++retry) {
    const double ceiling = std::min(100.0 * (1 << retry), 2000.0);
    double sum = 0, largest = 0;
    for (int i = 0; i < 2000; ++i) {
      auto d = backoff_delay(retry, milliseconds(100), milliseconds(2000), rng).count();
      REQUIRE(d >= 0);
      REQUIRE(d <= ceiling);
      sum += static_cast<double>(d);
      largest = std::max(largest, static_cast<double>(d));
    }
    CHECK(sum / 2000 == doctest::Approx(ceiling / 2).epsilon(0.1));  // uniform: mean = ceiling / 2
    CHECK(largest > 0.9 * ceiling);
  }
}

TEST_CASE("request body: sampling fields, stream options, extra_body merged") {
  EndpointConfig c;
  c.model = "m";
  c.stream = true;
  c.extra_body = {
      {"chat_template_kwargs", {{"enable_thinking", true}}}, {"top_k", 20}, {"stream_options", nullptr}};
  ChatRequest r = simple_request();
  r.sampling.temperature = 0.6;
  r.sampling.top_p = 0.95;
  r.sampling.max_tokens = 4096;
  r.sampling.seed = 7;
  r.sampling.stop = {"</answer>"};
  r.sampling.n = 3;
  auto body = ptxbench::llm::detail::build_request_body(c, r);
  CHECK(body["model"] == "m");
  CHECK(body["messages"].size() == 2);
  CHECK(body["messages"][1]["content"] == "Write a GEMM.");
  CHECK(body["temperature"] == 0.6);
  CHECK(body["top_p"] == 0.95);
  CHECK(body["max_tokens"] == 4096);
  CHECK(body["seed"] == 7);
  CHECK(body["stop"] == nlohmann::json::array({"</answer>"}));
  CHECK(body["n"] == 3);
  CHECK(body["stream"] == true);
  CHECK(body["chat_template_kwargs"]["enable_thinking"] == true);
  CHECK(body["top_k"] == 20);
  CHECK_FALSE(body.contains("stream_options"));  // a null in extra_body removes a key
}

TEST_CASE("excerpts are bounded and redact the key even across the cut") {
  using ptxbench::llm::detail::redacted_excerpt;
  const std::string key = kKey;
  std::string body = std::string(490, 'a') + key + std::string(3000, 'b');
  auto excerpt = redacted_excerpt(body, key);
  CHECK(excerpt.size() <= 500);
  CHECK(excerpt.find(key.substr(0, 6)) == std::string::npos);
  auto early = redacted_excerpt(std::string(100, 'a') + key + std::string(3000, 'b'), key);
  CHECK(early.find("[REDACTED]") == 100);
  CHECK(early.size() == 500);
  CHECK(early.substr(497) == "...");
  CHECK(redacted_excerpt("line1\nline2", key) == "line1 line2");
}

// ------------------------------------------------------------------ the scripted client

TEST_CASE("scripted client: default, per task, per sample, files, repeats, usage, scripted errors") {
  EndpointConfig c;
  c.kind = "scripted";
  c.scripted_file = std::string(PTXBENCH_TEST_DATA) + "/llm/scripted/scripted.json";
  auto client = make_client(c);
  auto ask = [&](const std::string &task, int sample, int turn) {
    ChatRequest r;
    r.messages = {{"user", std::string(40, 'p')}};
    r.task_id = task;
    r.sample_index = sample;
    r.turn_index = turn;
    return client->complete(r);
  };
  auto t0 = ask("other_task", 0, 0);
  REQUIRE(t0.has_value());
  CHECK(t0->content == "default turn 0");
  CHECK(t0->finish_reason == "stop");
  CHECK(t0->usage.prompt_tokens == 10);     // 40 bytes / 4
  CHECK(t0->usage.completion_tokens == 4);  // "default turn 0" = 14 bytes -> 4
  auto t1 = ask("other_task", 0, 1);
  CHECK(t1->content == "default turn 1");
  CHECK(t1->reasoning == "thinking about turn 1");
  CHECK(t1->usage.reasoning_tokens == 6);  // 21 bytes -> 6
  CHECK(t1->usage.completion_tokens == 4 + 6);
  CHECK(ask("other_task", 0, 7)->content == "default turn 1");  // past the end repeats the last
  auto gemm0 = ask("gemm_bf16", 0, 0);
  CHECK(gemm0->content == "Here is my kernel:\n```ptx\n.version 8.5\n```\n");
  CHECK(ask("gemm_bf16", 1, 1)->finish_reason == "length");
  CHECK(ask("gemm_bf16", 2, 0)->content == "sample 2 turn 0");
  CHECK(ask("gemm_bf16", 2, 5)->content == "sample 2 turn 0");
  auto failure = ask("broken_endpoint", 0, 0);
  REQUIRE_FALSE(failure.has_value());
  CHECK(failure.error().kind == ChatErrorKind::http_status);
  CHECK(failure.error().http_status == 401);
  CHECK(failure.error().message == "scripted 401");
  // Deterministic: the same question gives the same answer.
  CHECK(ask("gemm_bf16", 0, 0)->content == gemm0->content);
  client->cancel();
  CHECK(ask("gemm_bf16", 0, 0).error().kind == ChatErrorKind::cancelled);
}

TEST_CASE("scripted file errors name the file and the field") {
  ptxbench::test::ScratchDir scratch("ptxbench-scripted");
  const fs::path dir = scratch.dir;
  auto try_load = [&](const std::string &name, const std::string &text) {
    std::ofstream(dir / name) << text;
    EndpointConfig c;
    c.kind = "scripted";
    c.name = "s";
    c.scripted_file = (dir / name).string();
    auto client = create_client(c);
    REQUIRE_FALSE(client.has_value());
    CHECK(client.error().find((dir / name).string()) != std::string::npos);
    return client.error();
  };
  CHECK(try_load("a.json", "{\"default\": [\"x\",]}").find("not valid JSON") != std::string::npos);
  CHECK(try_load("b.json", R"({"defualt": ["x"]})").find("defualt: unknown field") != std::string::npos);
  CHECK(try_load("c.json", R"({"default": []})").find("default: must be a non-empty array") !=
        std::string::npos);
  CHECK(try_load("d.json", R"({"tasks": {"t": ["ok", {"content": 5}]}})")
            .find("tasks.t[1].content: must be a string") != std::string::npos);
  CHECK(try_load("e.json", R"({"default": [{"file": "nope.md"}]})").find("default[0].file: cannot read") !=
        std::string::npos);
  CHECK(try_load("f.json", R"({"samples": {"t": {"first": ["x"]}}})")
            .find("samples.t.first: sample key must be a non-negative integer") != std::string::npos);
  CHECK(try_load("g.json", R"({"default": [{"error": {"kind": "oops"}}]})")
            .find("default[0].error.kind: must be one of") != std::string::npos);
  EndpointConfig missing;
  missing.kind = "scripted";
  missing.scripted_file = (dir / "absent.json").string();
  CHECK(create_client(missing).error().find("absent.json") != std::string::npos);
}

TEST_CASE("endpoint config: a wrong value names the field and what it must be; good values are read") {
  const nlohmann::json base = {{"base_url", "http://x/v1"}, {"model", "m"}};
  struct Case {
    const char *key;
    nlohmann::json value;
    const char *error;
  };
  const Case cases[] = {
      {"name", 3, "e[3].name: must be a string, got 3"},
      {"system_prompt", "developer", "e[3].system_prompt: must be \"system\" or \"user\", got \"developer\""},
      {"stream", 1, "e[3].stream: must be true or false, got 1"},
      {"extra_body", nlohmann::json::array(), "e[3].extra_body: must be an object, got []"},
      {"max_retries", -1, "e[3].max_retries: must be an integer >= 0, got -1"},
      {"max_in_flight", 0, "e[3].max_in_flight: must be an integer >= 1, got 0"},
      {"max_in_flight", 100001, "e[3].max_in_flight: must be an integer >= 1, got 100001"},
      {"max_response_bytes", 1023, "e[3].max_response_bytes: must be an integer >= 1024 (bytes), got 1023"},
      {"backoff_max_ms", -1, "e[3].backoff_max_ms: must be an integer >= 0 (milliseconds), got -1"},
      {"retry_budget_ms", 2.5, "e[3].retry_budget_ms: must be an integer >= 0 (milliseconds), got 2.5"},
      {"api_key_env", std::string(100, 'z'), nullptr},
      {"kind", "other", "e[3].kind: must be \"openai\" or \"scripted\", got \"other\""},
  };
  for (const Case &c : cases) {
    CAPTURE(c.key);
    nlohmann::json j = base;
    j[c.key] = c.value;
    auto parsed = endpoint_config_from_json(j, "e[3]");
    if (!c.error) {
      CHECK(parsed.has_value());
      continue;
    }
    REQUIRE_FALSE(parsed.has_value());
    CHECK(parsed.error() == c.error);
  }
  nlohmann::json long_value = base;
  long_value["model"] = nlohmann::json::array({std::string(100, 'z')});
  auto cut = endpoint_config_from_json(long_value, "e");
  REQUIRE_FALSE(cut.has_value());
  CHECK(cut.error() == "e.model: must be a string, got [\"" + std::string(78, 'z'));

  nlohmann::json all = base;
  all.update({{"name", "n"},
              {"api_key_env", "K"},
              {"system_prompt", "user"},
              {"stream", false},
              {"extra_body", {{"top_k", 5}}},
              {"max_retries", 0},
              {"max_in_flight", 100000},
              {"max_response_bytes", 1024},
              {"request_timeout_ms", 1},
              {"connect_timeout_ms", 2},
              {"stream_idle_timeout_ms", 3},
              {"backoff_initial_ms", 4},
              {"backoff_max_ms", 5},
              {"retry_budget_ms", 6}});
  auto read = endpoint_config_from_json(all);
  REQUIRE(read.has_value());
  CHECK(read->name == "n");
  CHECK(read->api_key_env == "K");
  CHECK(read->system_prompt == "user");
  CHECK_FALSE(read->stream);
  CHECK(read->extra_body == nlohmann::json{{"top_k", 5}});
  CHECK(read->max_retries == 0);
  CHECK(read->max_in_flight == 100000);
  CHECK(read->max_response_bytes == 1024);
  CHECK(read->request_timeout == milliseconds(1));
  CHECK(read->connect_timeout == milliseconds(2));
  CHECK(read->stream_idle_timeout == milliseconds(3));
  CHECK(read->backoff_initial == milliseconds(4));
  CHECK(read->backoff_max == milliseconds(5));
  CHECK(read->retry_budget == milliseconds(6));
  CHECK(endpoint_config_from_json({{"kind", "scripted"}}, "e").error() ==
        "e.scripted_file: is required for kind \"scripted\"");
}
