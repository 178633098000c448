// OpenAI-compatible chat completions. Expected failures (HTTP 429 after the
// retry budget, 401, timeouts, malformed bodies, a `length` finish) are values.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "util/expected.hpp"

namespace ptxbench::llm {

struct ChatMessage {
  std::string role;     ///< "system" | "user" | "assistant"
  std::string content;
};

struct SamplingParams {
  std::optional<double> temperature;
  std::optional<double> top_p;
  std::optional<int> max_tokens;
  std::optional<std::int64_t> seed;
  std::vector<std::string> stop;
  int n = 1;
};

struct EndpointConfig {
  std::string name;                   ///< label used in runs and reports, e.g. "qwen3-coder"
  std::string base_url;               ///< e.g. "http://127.0.0.1:8000/v1" (".../chat/completions" appended)
  std::string model;                  ///< model id sent in the request
  std::string api_key_env;            ///< name of the environment variable holding the key ("" = none)
  bool stream = false;                ///< use server-sent events
  nlohmann::json extra_body = nlohmann::json::object();  ///< merged into the request (e.g. chat_template_kwargs)
  std::chrono::milliseconds request_timeout{600'000};    ///< ms per HTTP attempt
  int max_retries = 6;                ///< retries after the first attempt
  std::chrono::milliseconds backoff_initial{1000};       ///< ms, doubled each retry, with full jitter
  std::chrono::milliseconds backoff_max{60'000};         ///< ms cap per wait (Retry-After honoured up to this)
  int max_in_flight = 16;             ///< concurrent requests to this endpoint
  std::string scripted_file;          ///< for the scripted client: the responses file
  std::string kind = "openai";        ///< "openai" | "scripted"
  nlohmann::json to_json_redacted() const;  ///< never contains the key
};

struct ChatRequest {
  std::vector<ChatMessage> messages;
  SamplingParams sampling;
  // For scripted clients: which response to give.
  std::string task_id;
  int sample_index = 0;
  int turn_index = 0;
};

struct Usage {
  std::int64_t prompt_tokens = 0;
  std::int64_t completion_tokens = 0;
  std::int64_t reasoning_tokens = 0;
};

struct ChatResponse {
  std::string content;            ///< with <think>...</think> removed
  std::string reasoning;          ///< reasoning_content / reasoning / <think> text
  std::string finish_reason;      ///< "stop", "length", ...
  Usage usage;
  int attempts = 1;               ///< HTTP attempts made (retries + 1)
  double latency_seconds = 0;
  nlohmann::json raw_excerpt;     ///< id, model, created (no content duplication)
};

enum class ChatErrorKind {
  network,         ///< connection refused/reset, DNS, TLS
  timeout,         ///< request timeout
  http_status,     ///< non-retryable status or retries exhausted
  bad_response,    ///< malformed JSON / SSE / missing fields
  length,          ///< finish_reason == length with no usable content (content may still be kept)
  cancelled,       ///< stop requested
  budget,          ///< retry budget exhausted
};
std::string to_string(ChatErrorKind);

struct ChatError {
  ChatErrorKind kind = ChatErrorKind::network;
  int http_status = 0;
  std::string message;            ///< status + body excerpt (<= 500 chars); never the key
  int attempts = 1;
};

class ChatClient {
 public:
  virtual ~ChatClient() = default;
  virtual util::Expected<ChatResponse, ChatError> complete(const ChatRequest &request) = 0;
  /// Asks in-flight and future requests to stop early (Ctrl-C).
  virtual void cancel() {}
};

/// Builds the client an endpoint config names ("openai" over libcurl, or "scripted").
std::unique_ptr<ChatClient> make_client(const EndpointConfig &config);

}  // namespace ptxbench::llm
