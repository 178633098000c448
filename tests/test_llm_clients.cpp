// llm_clients: the libcurl client against a real HTTP server on 127.0.0.1 (tests/fake_openai_server.py),
// then configs and factories. Protocol pieces and the scripted client: test_llm_clients_offline.cpp.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "llm_clients/chat_client.hpp"
#include "llm_clients/detail/protocol.hpp"
#include "support/support.hpp"

using namespace ptxbench::llm;
namespace fs = std::filesystem;
using std::chrono::milliseconds;

namespace {

using ptxbench::test::Clock;
using ptxbench::test::seconds_since;

constexpr const char *kKeyVar = "PTXBENCH_TEST_KEY";
constexpr const char *kKey = "sk-test-5ecret-0123456789abcdef";
constexpr const char *kWrongKeyVar = "PTXBENCH_TEST_WRONG_KEY";
constexpr const char *kWrongKey = "sk-wrong-key-987654321";

ptxbench::test::FakeOpenAiServer &server() {
  static ptxbench::test::FakeOpenAiServer instance({"--api-key", kKey});
  return instance;
}

/// Seconds between consecutive requests for a model (server clock).
std::vector<double> request_gaps(const std::string &model) {
  const auto r = server().requests(model);
  std::vector<double> out;
  for (std::size_t i = 1; i < r.size(); ++i)
    out.push_back(r[i]["t"].get<double>() - r[i - 1]["t"].get<double>());
  return out;
}

EndpointConfig config_for(const std::string &model) {
  setenv(kKeyVar, kKey, 1);
  EndpointConfig c;
  c.name = "fake";
  c.base_url = "http://127.0.0.1:" + std::to_string(server().port()) + "/v1/";
  c.model = model;
  c.api_key_env = kKeyVar;
  c.request_timeout = milliseconds(10'000);
  c.max_retries = 3;
  c.backoff_initial = milliseconds(20);
  c.backoff_max = milliseconds(2'000);
  return c;
}

ChatRequest simple_request() {
  ChatRequest r;
  r.messages = {{"system", "You write PTX."}, {"user", "Write a GEMM."}};
  return r;
}

/// Every string a client hands back must be free of the key.
void check_no_key(const std::string &text) {
  CHECK(text.find(kKey) == std::string::npos);
  CHECK(text.find(kWrongKey) == std::string::npos);
}
void check_no_key(const ChatError &e) {
  check_no_key(e.message);
  check_no_key(e.partial_content);
}
void check_no_key(const ChatResponse &r) {
  check_no_key(r.content + r.reasoning + r.raw_excerpt.dump());
}

using Result = ptxbench::util::Expected<ChatResponse, ChatError>;

Result run(const EndpointConfig &config, const ChatRequest &request = simple_request()) {
  auto client = make_client(config);
  auto result = client->complete(request);
  if (result)
    check_no_key(result.value());
  else
    check_no_key(result.error());
  return result;
}

}  // namespace

// ------------------------------------------------------------------ the libcurl client

TEST_CASE("normal answer: content, usage, request fields and the bearer key") {
  auto c = config_for("normal#fields");
  c.extra_body = {{"chat_template_kwargs", {{"enable_thinking", false}}}};
  ChatRequest r = simple_request();
  r.sampling.temperature = 0.25;
  r.sampling.max_tokens = 123;
  r.sampling.seed = 99;
  r.sampling.stop = {"STOP"};
  auto result = run(c, r);
  REQUIRE(result.has_value());
  CHECK(result->content == "Hello from normal#fields");
  CHECK(result->reasoning.empty());
  CHECK(result->finish_reason == "stop");
  CHECK(result->usage.prompt_tokens == 11);
  CHECK(result->usage.completion_tokens == 7);
  CHECK(result->attempts == 1);
  CHECK(result->raw_excerpt["id"] == "chatcmpl-fake");
  CHECK(result->latency_seconds > 0);
  auto logged = server().requests("normal#fields");
  REQUIRE(logged.size() == 1);
  CHECK(logged[0]["path"] == "/v1/chat/completions");
  CHECK(logged[0]["authorization"] == std::string("Bearer ") + kKey);
  const auto &body = logged[0]["body"];
  CHECK(body["temperature"] == 0.25);
  CHECK(body["max_tokens"] == 123);
  CHECK(body["seed"] == 99);
  CHECK(body["stop"][0] == "STOP");
  CHECK(body["stream"] == false);
  CHECK(body["chat_template_kwargs"]["enable_thinking"] == false);
  CHECK(body["messages"][0]["role"] == "system");
}

TEST_CASE("streaming: events split across chunks, reasoning deltas, usage in the last chunk") {
  auto c = config_for("stream#1");
  c.stream = true;
  auto result = run(c);
  REQUIRE(result.has_value());
  CHECK(result->content == "Hello, streamed world");
  CHECK(result->reasoning == "Let me think.");
  CHECK(result->finish_reason == "stop");
  CHECK(result->usage.prompt_tokens == 20);
  CHECK(result->usage.completion_tokens == 9);
  CHECK(result->usage.reasoning_tokens == 3);
  CHECK(result->raw_excerpt["model"] == "stream#1");
  auto logged = server().requests("stream#1");
  REQUIRE(logged.size() == 1);
  CHECK(logged[0]["body"]["stream"] == true);
  CHECK(logged[0]["body"]["stream_options"]["include_usage"] == true);

  auto nodone = config_for("stream-nodone#1");
  nodone.stream = true;
  auto finished = run(nodone);  // a finish_reason without [DONE] is a complete answer
  REQUIRE(finished.has_value());
  CHECK(finished->content == "no done marker");
}

TEST_CASE("429 with Retry-After in seconds: waits at least that long, then succeeds") {
  auto start = Clock::now();
  auto result = run(config_for("ratelimit#s"));
  REQUIRE(result.has_value());
  CHECK(result->content == "after rate limit");
  CHECK(result->attempts == 2);
  auto gaps = request_gaps("ratelimit#s");
  REQUIRE(gaps.size() == 1);
  CHECK(gaps[0] >= 0.99);  // Retry-After: 1 honoured although the jittered backoff is <= 20 ms
  CHECK(seconds_since(start) >= 1.0);
  CHECK(result->latency_seconds >= 1.0);
}

TEST_CASE("429 with Retry-After as an HTTP date") {
  auto result = run(config_for("ratelimit-date#d"));
  REQUIRE(result.has_value());
  CHECK(result->attempts == 2);
  auto gaps = request_gaps("ratelimit-date#d");
  REQUIRE(gaps.size() == 1);
  // The date is 2 s ahead, truncated to whole seconds by the HTTP date format: 1..2 s.
  CHECK(gaps[0] >= 0.95);
  CHECK(gaps[0] < 2.6);
}

TEST_CASE("Retry-After is capped by backoff_max; retries exhausted give the status") {
  auto c = config_for("always429#cap");
  c.backoff_max = milliseconds(200);
  c.max_retries = 2;
  auto start = Clock::now();
  auto result = run(c);
  REQUIRE_FALSE(result.has_value());
  CHECK(result.error().kind == ChatErrorKind::http_status);
  CHECK(result.error().http_status == 429);
  CHECK(result.error().attempts == 3);
  CHECK(result.error().message.find("gave up after 3 attempts") != std::string::npos);
  CHECK(result.error().message.find("slow down") != std::string::npos);
  for (double gap : request_gaps("always429#cap")) {
    CHECK(gap >= 0.19);  // max(jitter, Retry-After 30 s) capped to 200 ms
    CHECK(gap < 0.6);
  }
  CHECK(server().requests("always429#cap").size() == 3);
  CHECK(seconds_since(start) < 5.0);  // not the 30 s Retry-After (loose: a loaded machine delays the server)
}

TEST_CASE("a wait past the retry budget ends the request with kind budget") {
  auto c = config_for("always429#budget");
  c.backoff_max = milliseconds(60'000);
  c.retry_budget = milliseconds(500);
  auto start = Clock::now();
  auto result = run(c);
  REQUIRE_FALSE(result.has_value());
  CHECK(result.error().kind == ChatErrorKind::budget);
  CHECK(result.error().http_status == 429);
  CHECK(result.error().attempts == 1);
  CHECK(result.error().message.find("retry budget of 500 ms") != std::string::npos);
  CHECK(seconds_since(start) < 5.0);  // did not sit out the 30 s Retry-After
}

TEST_CASE("a burst of 5xx is retried with exponential backoff") {
  auto c = config_for("burst500#b");
  c.backoff_initial = milliseconds(50);
  auto result = run(c);
  REQUIRE(result.has_value());
  CHECK(result->content == "after 500s");
  CHECK(result->attempts == 4);
  auto gaps = request_gaps("burst500#b");
  REQUIRE(gaps.size() == 3);
  // Full jitter: wait i is uniform in [0, 50 * 2^i] ms; allow 300 ms for the round trip on a loaded machine.
  CHECK(gaps[0] < 0.05 + 0.3);
  CHECK(gaps[1] < 0.10 + 0.3);
  CHECK(gaps[2] < 0.20 + 0.3);
}

TEST_CASE("persistent 500: status, body excerpt, and the echoed key redacted") {
  auto c = config_for("always500#x");
  c.max_retries = 1;
  auto result = run(c);
  REQUIRE_FALSE(result.has_value());
  CHECK(result.error().kind == ChatErrorKind::http_status);
  CHECK(result.error().http_status == 500);
  CHECK(result.error().attempts == 2);
  CHECK(result.error().message.find("internal error") != std::string::npos);
  CHECK(result.error().message.find("Bearer [REDACTED]") != std::string::npos);
}

TEST_CASE("a server that hangs past the timeout: kind timeout after the retries") {
  auto c = config_for("hang#t");
  c.request_timeout = milliseconds(300);
  c.max_retries = 1;
  auto start = Clock::now();
  auto result = run(c);
  REQUIRE_FALSE(result.has_value());
  CHECK(result.error().kind == ChatErrorKind::timeout);
  CHECK(result.error().attempts == 2);
  CHECK(result.error().message.find("request_timeout (300 ms)") != std::string::npos);
  const double elapsed = seconds_since(start);
  CHECK(elapsed >= 0.6);
  // The server never answers: finishing at all shows the timeout works. The bound is loose because a
  // loaded machine delays the fake server's accepts.
  CHECK(elapsed < 10.0);
}

TEST_CASE("a stalled stream times out on stream_idle_timeout and keeps the partial text") {
  auto c = config_for("stream-stall#s");
  c.stream = true;
  c.stream_idle_timeout = milliseconds(300);
  c.max_retries = 0;
  auto start = Clock::now();
  auto result = run(c);
  REQUIRE_FALSE(result.has_value());
  CHECK(result.error().kind == ChatErrorKind::timeout);
  CHECK(result.error().message.find("stream stalled") != std::string::npos);
  CHECK(result.error().partial_content == "first words");
  CHECK(seconds_since(start) < 5.0);  // well before request_timeout
}

TEST_CASE("a stream still trickling at request_timeout is a timeout with the partial text") {
  auto c = config_for("stream-slow#s");
  c.stream = true;
  c.request_timeout = milliseconds(500);
  c.stream_idle_timeout = milliseconds(400);
  c.max_retries = 0;
  auto result = run(c);
  REQUIRE_FALSE(result.has_value());
  CHECK(result.error().kind == ChatErrorKind::timeout);
  CHECK(result.error().message.find("request_timeout (500 ms)") != std::string::npos);
  CHECK(result.error().partial_content.rfind("w0 w1 ", 0) == 0);
}

TEST_CASE("malformed bodies are bad_response and are not retried") {
  auto plain = run(config_for("malformed#m"));
  REQUIRE_FALSE(plain.has_value());
  CHECK(plain.error().kind == ChatErrorKind::bad_response);
  CHECK(plain.error().attempts == 1);
  CHECK(plain.error().message.find("not valid JSON") != std::string::npos);
  CHECK(plain.error().message.find("unterminated") != std::string::npos);  // the body excerpt
  CHECK(server().requests("malformed#m").size() == 1);

  auto c = config_for("stream-malformed#m");
  c.stream = true;
  auto streamed = run(c);
  REQUIRE_FALSE(streamed.has_value());
  CHECK(streamed.error().kind == ChatErrorKind::bad_response);
  CHECK(streamed.error().message.find("not a JSON object") != std::string::npos);
  CHECK(streamed.error().partial_content == "ok so far");

  auto error200 = run(config_for("error-200#m"));
  REQUIRE_FALSE(error200.has_value());
  CHECK(error200.error().kind == ChatErrorKind::bad_response);
  CHECK(error200.error().message.find("backend exploded") != std::string::npos);
}

TEST_CASE("a stream cut short is bad_response with its byte count and partial text") {
  auto c = config_for("stream-cut#c");
  c.stream = true;
  c.max_retries = 1;
  auto result = run(c);
  REQUIRE_FALSE(result.has_value());
  CHECK(result.error().kind == ChatErrorKind::bad_response);
  CHECK(result.error().attempts == 2);  // a broken transport is worth one more try
  CHECK(result.error().message.find("stream ended early after ") != std::string::npos);
  CHECK(result.error().message.find(" bytes") != std::string::npos);
  CHECK(result.error().message.find("partial answer cut he") != std::string::npos);
  CHECK(result.error().partial_content == "partial answer cut he");
}

TEST_CASE("reasoning from reasoning_content, reasoning, <think> and a bare </think>") {
  struct Case {
    const char *model, *content, *reasoning;
  };
  for (Case k :
       {Case{"reasoning-content", "answer A", "thought A"}, Case{"reasoning-field", "answer B", "thought B"},
        Case{"think", "answer C", "thought C"}, Case{"think-open", "answer D", "thought D"}}) {
    CAPTURE(k.model);
    auto result = run(config_for(k.model));
    REQUIRE(result.has_value());
    CHECK(result->content == k.content);
    CHECK(result->reasoning == k.reasoning);
  }
}

TEST_CASE("a length finish is a value with its usage, not an error") {
  auto result = run(config_for("length"));
  REQUIRE(result.has_value());
  CHECK(result->finish_reason == "length");
  CHECK(result->content == "truncated answ");
  CHECK(result->usage.completion_tokens == 100);
  CHECK(result->usage.reasoning_tokens == 60);
}

TEST_CASE("n = 2 returns the first choice and the rest as extra_choices") {
  ChatRequest r = simple_request();
  r.sampling.n = 2;
  auto result = run(config_for("n2#n"), r);
  REQUIRE(result.has_value());
  CHECK(result->content == "choice 0");
  REQUIRE(result->extra_choices.size() == 1);
  CHECK(result->extra_choices[0].content == "choice 1");
  CHECK(server().requests("n2#n")[0]["body"]["n"] == 2);
}

TEST_CASE("401 surfaces at once with a hint naming the variable; the echoed key is redacted") {
  setenv(kWrongKeyVar, kWrongKey, 1);
  auto c = config_for("auth#bad");
  c.api_key_env = kWrongKeyVar;
  auto result = run(c);
  REQUIRE_FALSE(result.has_value());
  CHECK(result.error().kind == ChatErrorKind::http_status);
  CHECK(result.error().http_status == 401);
  CHECK(result.error().attempts == 1);
  CHECK(result.error().message.find("check the key in $PTXBENCH_TEST_WRONG_KEY") != std::string::npos);
  CHECK(result.error().message.find("Incorrect API key provided: [REDACTED]") != std::string::npos);
  CHECK(server().requests("auth#bad").size() == 1);

  auto good = run(config_for("auth#good"));
  REQUIRE(good.has_value());
  CHECK(good->content == "authorized");
}

TEST_CASE("404 and 400 surface at once with status, bounded excerpt and hint") {
  auto missing = run(config_for("missing#404"));
  REQUIRE_FALSE(missing.has_value());
  CHECK(missing.error().http_status == 404);
  CHECK(missing.error().attempts == 1);
  CHECK(missing.error().message.find("model 'missing#404' is not served at http://127.0.0.1:") !=
        std::string::npos);

  auto bad = run(config_for("bad-request#400"));
  REQUIRE_FALSE(bad.has_value());
  CHECK(bad.error().http_status == 400);
  CHECK(bad.error().attempts == 1);
  const auto &m = bad.error().message;
  CHECK(m.find("bad request xxx") != std::string::npos);
  CHECK(std::count(m.begin(), m.end(), 'x') <= 500);  // the 2000 x's were cut to the excerpt
  CHECK(m.rfind("bad request xxx", 0) == 0);          // the server's own words come first
  CHECK(m.find("HTTP 400 from http://127.0.0.1:") != std::string::npos);
  CHECK(m.find("check sampling parameters") != std::string::npos);
}

TEST_CASE("404 hints name the real cause: an unknown model (with the served list) or a wrong base_url path") {
  auto unknown = run(config_for("missing#list"));
  REQUIRE_FALSE(unknown.has_value());
  CHECK(unknown.error().http_status == 404);
  CHECK(unknown.error().message.find("model 'missing#list' is not served at") != std::string::npos);
  CHECK(unknown.error().message.find("it lists: normal, stream, length, repair") != std::string::npos);

  auto c = config_for("normal#nov1");
  c.base_url = "http://127.0.0.1:" + std::to_string(server().port());  // without /v1
  auto wrong_path = run(c);
  REQUIRE_FALSE(wrong_path.has_value());
  CHECK(wrong_path.error().http_status == 404);
  CHECK(wrong_path.error().attempts == 1);
  const auto &m = wrong_path.error().message;
  CHECK(m.find("not served") == std::string::npos);
  CHECK(m.find("no chat completions at http://127.0.0.1:") != std::string::npos);
  CHECK(m.find("base_url usually ends in /v1") != std::string::npos);
}

TEST_CASE("HTTP error hints per status, with and without a model list, exactly as written") {
  const std::string port = std::to_string(server().port());
  const auto message = [&](EndpointConfig c) {
    auto r = run(c);
    REQUIRE_FALSE(r.has_value());
    std::string m = r.error().message;
    for (std::size_t at = m.find(port); at != std::string::npos; at = m.find(port))
      m.replace(at, port.size(), "P");
    return std::make_pair(m, r.error().attempts);
  };
  auto c = config_for("status-413#big");
  CHECK(message(c).first ==
        "HTTP 413 from http://127.0.0.1:P/v1/chat/completions: {\"error\": {\"message\": \"status 413: "
        "big\"}} (the request is too large for "
        "the "
        "server: shorten the prompt or the history)");
  c = config_for("status-403#no");
  c.api_key_env = "";
  CHECK(message(c).first ==
        "HTTP 403 from http://127.0.0.1:P/v1/chat/completions: {\"error\": {\"message\": \"status 403: "
        "no\"}} (the endpoint sends no key: set "
        "api_key_env to the name of the variable holding it)");
  CHECK(message(config_for("status-422#temperature out of range")).first ==
        "status 422: temperature out of range [HTTP 422 from http://127.0.0.1:P/v1/chat/completions] (the "
        "server "
        "rejected the request: its message says why (sampling parameters, extra_body, the prompt length); "
        "check "
        "sampling parameters and extra_body)");
  CHECK(message(config_for("status-400#unknown model")).first ==
        "status 400: unknown model [HTTP 400 from http://127.0.0.1:P/v1/chat/completions] (model "
        "'status-400#unknown "
        "model' is not served at http://127.0.0.1:P/v1/; it lists: normal, stream, length, repair)");
  // A server whose model list fails too: the request never reached a model.
  c = config_for("status-400#wrong");
  c.base_url = "http://127.0.0.1:" + port + "/nomodels/v1";
  CHECK(message(c).first ==
        "status 400: wrong [HTTP 400 from http://127.0.0.1:P/nomodels/v1/chat/completions] (the server fails "
        "GET "
        "http://127.0.0.1:P/nomodels/v1/models too (HTTP 400: no database configured), so the request never "
        "reached a model: check the key in $PTXBENCH_TEST_KEY)");
  c = config_for("status-500#down");
  c.base_url = "http://127.0.0.1:" + port + "/nomodels/v1";
  c.api_key_env = "";
  const auto [text, attempts] = message(c);
  CHECK(attempts == 1);  // the server's state, not an overload: not retried
  CHECK(
      text ==
      "HTTP 500 from http://127.0.0.1:P/nomodels/v1/chat/completions: {\"error\": {\"message\": \"status "
      "500: down\"}} (the server fails GET "
      "http://127.0.0.1:P/nomodels/v1/models too (HTTP 400: no database configured), so the request never "
      "reached a model: this endpoint sends no key: if the server needs one, set api_key_env to the name of "
      "the "
      "variable holding it)");
  const auto retried = message(config_for("status-503#busy"));
  CHECK(retried.second == 4);
  CHECK(retried.first ==
        "gave up after 4 attempts: HTTP 503 from http://127.0.0.1:P/v1/chat/completions: {\"error\": "
        "{\"message\": \"status 503: busy\"}}");
}

TEST_CASE("a 500 that says the key is missing is not retried and names the key setting") {
  auto c = config_for("auth500#nokey");
  c.api_key_env = "";
  c.max_retries = 4;
  c.backoff_initial = milliseconds(200);
  const auto start = Clock::now();
  auto result = run(c);
  REQUIRE_FALSE(result.has_value());
  CHECK(result.error().http_status == 500);
  CHECK(result.error().attempts == 1);
  CHECK(seconds_since(start) < 1.0);
  CHECK(server().requests("auth500#nokey").size() == 1);
  CHECK(result.error().message.find("No api key passed in") != std::string::npos);
  CHECK(result.error().message.find("set api_key_env") != std::string::npos);

  auto retried = run(config_for("always500#plain"));  // a 500 that is not about keys is still retried
  REQUIRE_FALSE(retried.has_value());
  CHECK(retried.error().attempts == 4);
}

TEST_CASE("a stream that ends with [DONE] but no finish_reason is an endpoint failure, retried") {
  auto c = config_for("stream-done-nofinish#once");
  c.stream = true;
  c.max_retries = 0;
  auto failed = run(c);
  REQUIRE_FALSE(failed.has_value());
  CHECK(failed.error().kind == ChatErrorKind::bad_response);
  CHECK(failed.error().message.find("[DONE] without a finish_reason") != std::string::npos);
  CHECK(failed.error().partial_content == "interrupted");

  auto again = config_for("stream-done-nofinish#retry");
  again.stream = true;
  auto recovered = run(again);
  REQUIRE(recovered.has_value());
  CHECK(recovered->attempts == 2);
  CHECK(recovered->content == "complete");
  CHECK(recovered->finish_reason == "stop");
}

TEST_CASE("max_response_bytes counts the answer's text, not the SSE framing") {
  auto c = config_for("stream-framed#fits");
  c.stream = true;
  c.max_response_bytes = 64u << 10;  // the answer is 40,000 bytes; the wire carries about 2.3 MB
  auto fits = run(c);
  REQUIRE(fits.has_value());
  CHECK(fits->content.size() == 40'000);

  auto small = config_for("stream-framed#small");
  small.stream = true;
  small.max_response_bytes = 32u << 10;
  auto refused = run(small);
  REQUIRE_FALSE(refused.has_value());
  CHECK(refused.error().kind == ChatErrorKind::bad_response);
  CHECK(refused.error().attempts == 1);
  CHECK(refused.error().message.find("answer exceeded max_response_bytes (32768 bytes)") !=
        std::string::npos);
}

TEST_CASE("usage: missing or implausible counts are estimated from the text and marked; exact ones kept") {
  auto c = config_for("stream-nousage#1");
  c.stream = true;
  auto nousage = run(c);
  REQUIRE(nousage.has_value());
  CHECK(nousage->usage.estimated);
  CHECK(nousage->usage.estimate_reason.find("no usage") != std::string::npos);
  CHECK(nousage->usage.completion_tokens == 1000);  // 4,000 bytes / 4
  CHECK(nousage->usage.prompt_tokens > 0);

  auto implausible = run(config_for("usage-implausible#1"));
  REQUIRE(implausible.has_value());
  CHECK(implausible->usage.estimated);
  CHECK(implausible->usage.estimate_reason.find("implausible") != std::string::npos);
  CHECK(implausible->usage.completion_tokens == 25'000);

  auto exact = run(config_for("normal#usage"));
  REQUIRE(exact.has_value());
  CHECK_FALSE(exact->usage.estimated);
  CHECK(exact->usage.completion_tokens == 7);
  CHECK(exact->usage.prompt_tokens == 11);
}

TEST_CASE("system_prompt \"user\" puts the system message in front of the first user message") {
  EndpointConfig c;
  c.model = "m";
  ChatRequest r = simple_request();
  auto as_system = ptxbench::llm::detail::build_request_body(c, r);
  REQUIRE(as_system["messages"].size() == 2);
  CHECK(as_system["messages"][0]["role"] == "system");
  c.system_prompt = "user";
  auto as_user = ptxbench::llm::detail::build_request_body(c, r);
  REQUIRE(as_user["messages"].size() == 1);
  CHECK(as_user["messages"][0]["role"] == "user");
  CHECK(as_user["messages"][0]["content"] == "You write PTX.\n\nWrite a GEMM.");

  auto e = config_for("echo-messages#user");
  e.system_prompt = "user";
  auto echoed = run(e);
  REQUIRE(echoed.has_value());
  auto sent = nlohmann::json::parse(echoed->content);
  REQUIRE(sent.size() == 1);
  CHECK(sent[0]["role"] == "user");
  CHECK(sent[0]["content"].get<std::string>().rfind("You write PTX.", 0) == 0);

  auto parsed =
      endpoint_config_from_json({{"base_url", "http://x/v1"}, {"model", "m"}, {"system_prompt", "user"}});
  REQUIRE(parsed);
  CHECK(parsed->system_prompt == "user");
  CHECK(parsed->to_json_redacted()["system_prompt"] == "user");
  auto bad = endpoint_config_from_json(
      {{"base_url", "http://x/v1"}, {"model", "m"}, {"system_prompt", "developer"}});
  REQUIRE_FALSE(bad);
  CHECK(bad.error().find("system_prompt") != std::string::npos);
}

TEST_CASE("a 10 MB response: refused past max_response_bytes, accepted under a larger limit") {
  auto small = run(config_for("big#1"));
  REQUIRE_FALSE(small.has_value());
  CHECK(small.error().kind == ChatErrorKind::bad_response);
  CHECK(small.error().attempts == 1);
  CHECK(small.error().message.find("exceeded max_response_bytes (8388608 bytes)") != std::string::npos);

  auto c = config_for("big#2");
  c.max_response_bytes = 16u << 20;
  auto large = run(c);
  REQUIRE(large.has_value());
  CHECK(large->content.size() == 10'000'000);
}

TEST_CASE("an unreachable endpoint is a network error after the retries") {
  int fd = socket(AF_INET, SOCK_STREAM, 0);  // a port nobody listens on: bind, read it, close
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(bind(fd, reinterpret_cast<sockaddr *>(&addr), sizeof addr) == 0);
  socklen_t len = sizeof addr;
  getsockname(fd, reinterpret_cast<sockaddr *>(&addr), &len);
  close(fd);
  auto c = config_for("normal");
  c.base_url = "http://127.0.0.1:" + std::to_string(ntohs(addr.sin_port)) + "/v1";
  c.max_retries = 2;
  auto result = run(c);
  REQUIRE_FALSE(result.has_value());
  CHECK(result.error().kind == ChatErrorKind::network);
  CHECK(result.error().attempts == 3);
  CHECK(result.error().message.find("cannot reach http://127.0.0.1:") != std::string::npos);
}

TEST_CASE("cancel interrupts a backoff wait and a transfer within a fraction of a second") {
  for (const char *model : {"always500#cancel", "hang#cancel"}) {
    CAPTURE(model);
    auto c = config_for(model);
    c.backoff_initial = c.backoff_max = milliseconds(20'000);
    c.request_timeout = milliseconds(20'000);
    auto client = make_client(c);
    std::atomic<bool> done{false};
    std::optional<Result> result;
    std::thread worker([&] {
      result.emplace(client->complete(simple_request()));
      done = true;
    });
    std::this_thread::sleep_for(milliseconds(300));
    CHECK_FALSE(done.load());
    const auto cancelled_at = Clock::now();
    client->cancel();
    worker.join();
    CHECK(seconds_since(cancelled_at) < 0.5);
    REQUIRE_FALSE(result->has_value());
    CHECK(result->error().kind == ChatErrorKind::cancelled);
    auto after = client->complete(simple_request());  // cancel is sticky: nothing new is sent
    REQUIRE_FALSE(after.has_value());
    CHECK(after.error().kind == ChatErrorKind::cancelled);
    CHECK(after.error().attempts == 0);
  }
}

TEST_CASE("one client used from 16 threads at once") {
  auto client = make_client(config_for("normal#threads"));
  std::atomic<int> ok{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 16; ++t)
    threads.emplace_back([&] {
      for (int i = 0; i < 4; ++i) {
        auto r = client->complete(simple_request());
        if (r && r->content == "Hello from normal#threads") ++ok;
      }
    });
  for (auto &t : threads) t.join();
  CHECK(ok.load() == 64);
  CHECK(server().requests("normal#threads").size() == 64);
}

// ------------------------------------------------------------------ configs and factories

TEST_CASE("endpoint config: parse, round trip, unknown field, bad type, no inline keys") {
  nlohmann::json j = {
      {"name", "q"},    {"base_url", "http://h/v1"},  {"model", "qwen"},  {"api_key_env", "K"},
      {"stream", true}, {"request_timeout_ms", 1500}, {"max_retries", 2}, {"extra_body", {{"top_k", 20}}}};
  auto c = endpoint_config_from_json(j, "endpoints[0]");
  REQUIRE(c.has_value());
  CHECK(c->request_timeout == milliseconds(1500));
  CHECK(c->max_retries == 2);
  CHECK(c->stream);
  auto again = endpoint_config_from_json(c->to_json_redacted());
  REQUIRE(again.has_value());
  CHECK(again->to_json_redacted() == c->to_json_redacted());

  j["temprature"] = 1;
  auto unknown = endpoint_config_from_json(j, "endpoints[0]");
  REQUIRE_FALSE(unknown.has_value());
  CHECK(unknown.error().find("endpoints[0].temprature: unknown field") == 0);
  j.erase("temprature");
  j["max_retries"] = "three";
  auto bad_type = endpoint_config_from_json(j, "endpoints[0]");
  REQUIRE_FALSE(bad_type.has_value());
  CHECK(bad_type.error().find("endpoints[0].max_retries: must be an integer >= 0") == 0);
  j["max_retries"] = 2;
  j["api_key"] = kKey;
  auto inline_key = endpoint_config_from_json(j, "endpoints[0]");
  REQUIRE_FALSE(inline_key.has_value());
  CHECK(inline_key.error().find("api_key_env") != std::string::npos);
  check_no_key(inline_key.error());
}

TEST_CASE("create_client: unset key variable, unknown kind, bad URL are messages; make_client throws") {
  EndpointConfig c;
  c.name = "e";
  c.base_url = "http://127.0.0.1:1/v1";
  c.model = "m";
  c.api_key_env = "PTXBENCH_TEST_UNSET_VARIABLE";
  unsetenv("PTXBENCH_TEST_UNSET_VARIABLE");
  auto unset = create_client(c);
  REQUIRE_FALSE(unset.has_value());
  CHECK(unset.error().find("PTXBENCH_TEST_UNSET_VARIABLE (api_key_env) is not set") != std::string::npos);
  CHECK_THROWS_AS(make_client(c), std::invalid_argument);
  c.api_key_env = "";
  c.kind = "anthropic";
  CHECK(create_client(c).error().find("unknown kind \"anthropic\"") != std::string::npos);
  c.kind = "openai";
  c.base_url = "127.0.0.1:8000/v1";
  CHECK(create_client(c).error().find("must start with http://") != std::string::npos);

  setenv(kKeyVar, kKey, 1);
  auto good = config_for("normal");
  check_no_key(good.to_json_redacted().dump());
  CHECK(good.to_json_redacted()["api_key_env"] == kKeyVar);
}
