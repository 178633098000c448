// The chat vocabulary: messages, sampling, endpoint configs, requests, responses, errors, and the
// ChatClient interface the clients implement. chat_client.hpp includes it and says what the clients
// promise (a length finish is a response, thread safety); the clients' headers in detail/ build on it.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "util/expected.hpp"

namespace ptxbench::llm {

struct ChatMessage {
  std::string role;  ///< "system" | "user" | "assistant"
  std::string content;
};

struct SamplingParams {
  std::optional<double> temperature;
  std::optional<double> top_p;
  std::optional<int> max_tokens;
  std::optional<std::int64_t> seed;
  std::vector<std::string> stop;
  int n = 1;  ///< choices requested; the response's first choice is the answer
};

struct EndpointConfig {
  std::string name;         ///< label used in runs and reports, e.g. "qwen3-coder"
  std::string base_url;     ///< e.g. "http://127.0.0.1:8000/v1" (".../chat/completions" appended)
  std::string model;        ///< model id sent in the request
  std::string api_key_env;  ///< name of the environment variable holding the key ("" = none)
  bool stream = false;      ///< use server-sent events
  nlohmann::json extra_body =
      nlohmann::json::object();  ///< merged into the request (e.g. chat_template_kwargs)
  std::chrono::milliseconds request_timeout{600'000};  ///< ms per HTTP attempt
  int max_retries = 6;                                 ///< retries after the first attempt
  std::chrono::milliseconds backoff_initial{1000};     ///< ms, doubled each retry, with full jitter
  std::chrono::milliseconds backoff_max{60'000};       ///< ms cap per wait (Retry-After honoured up to this)
  int max_in_flight = 16;       ///< concurrent requests to this endpoint (enforced by the caller)
  std::string scripted_file;    ///< for the scripted client: the responses file
  std::string kind = "openai";  ///< "openai" | "scripted"
  std::chrono::milliseconds connect_timeout{10'000};       ///< ms to establish the TCP/TLS connection
  std::chrono::milliseconds stream_idle_timeout{120'000};  ///< ms without any byte on a stream = timeout
  std::chrono::milliseconds retry_budget{1'800'000};       ///< ms of wall time one complete() may spend in
                                                           ///< all attempts + waits; a wait past it = budget
  std::size_t max_response_bytes = 8u << 20;  ///< bytes of answer text (content + reasoning) accepted;
                                              ///< the wire may carry a bounded multiple (SSE framing)
  /// Where the prompt's system message goes: "system" (a system message) or "user" (put in front of
  /// the first user message, for chat templates that drop system messages, e.g. Gemma's).
  std::string system_prompt = "system";
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
  std::int64_t completion_tokens = 0;  ///< includes reasoning tokens (OpenAI convention)
  std::int64_t reasoning_tokens = 0;   ///< completion_tokens_details.reasoning_tokens, 0 if not reported
  /// The counts are estimated from the text (bytes / 4), not the server's: it sent none (streams without
  /// include_usage support) or implausible ones (fewer tokens than bytes / 16).
  bool estimated = false;
  std::string estimate_reason;  ///< why, when estimated
};

/// One extra choice when SamplingParams::n > 1.
struct ChatChoice {
  std::string content;
  std::string reasoning;
  std::string finish_reason;
};

struct ChatResponse {
  std::string content;        ///< with <think>...</think> removed
  std::string reasoning;      ///< reasoning_content / reasoning / <think> text
  std::string finish_reason;  ///< "stop", "length", ... ("" if the server sent none)
  Usage usage;
  int attempts = 1;                       ///< HTTP attempts made (retries + 1)
  double latency_seconds = 0;             ///< wall time of complete(), retries and waits included
  nlohmann::json raw_excerpt;             ///< id, model, created (no content duplication)
  double first_byte_seconds = 0;          ///< from the start of the successful attempt to its first body byte
  std::vector<ChatChoice> extra_choices;  ///< choices 1..n-1 when n > 1
};

enum class ChatErrorKind {
  network,       ///< connection refused/reset, DNS, TLS
  timeout,       ///< request timeout
  http_status,   ///< non-retryable status or retries exhausted
  bad_response,  ///< malformed JSON / SSE / missing fields / stream cut short / body too large
  length,        ///< finish_reason == length with no usable content (never produced: see chat_client.hpp)
  cancelled,     ///< stop requested
  budget,        ///< retry budget exhausted
  config,        ///< bad endpoint config or scripted file
};

struct ChatError {
  ChatErrorKind kind = ChatErrorKind::network;
  int http_status = 0;
  std::string message;  ///< status + body excerpt (<= 500 chars) + hint; never the key
  int attempts = 1;
  std::string partial_content;  ///< text received before a stream broke off
};

class ChatClient {
 public:
  virtual ~ChatClient() = default;
  virtual util::Expected<ChatResponse, ChatError> complete(const ChatRequest &request) = 0;
  /// Asks in-flight and future requests to stop early (Ctrl-C): waits and transfers end within
  /// ~0.1 s with ChatErrorKind::cancelled.
  virtual void cancel() {}
};

}  // namespace ptxbench::llm
