// Pure pieces of the OpenAI-compatible protocol, kept free of curl so they can
// be tested byte by byte: the SSE line parser, completion/chunk decoding,
// Retry-After and backoff arithmetic (<think> splitting is util/think_tags.hpp).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "llm_clients/detail/chat_types.hpp"
#include "util/expected.hpp"

namespace ptxbench::llm::detail {

/// Server-sent events: feed arbitrary byte chunks; each complete event's `data`
/// (multi-line data joined with '\n') goes to the callback. Comments (":...")
/// and other fields are ignored. Lines may end in "\n" or "\r\n".
class SseParser {
 public:
  using EventCallback = std::function<void(std::string data)>;
  explicit SseParser(EventCallback on_event) : on_event_(std::move(on_event)) {}
  void feed(std::string_view bytes);
  /// End of stream: dispatches a trailing line/event that had no terminating blank line.
  void finish();
  std::size_t bytes_seen() const { return bytes_seen_; }

 private:
  void handle_line(std::string_view line);
  void dispatch();
  EventCallback on_event_;
  std::string pending_line_;
  std::string event_data_;
  bool has_data_ = false;
  std::size_t bytes_seen_ = 0;
};

/// Builds the JSON body of POST /chat/completions.
nlohmann::json build_request_body(const EndpointConfig &config, const ChatRequest &request);

/// Decodes a non-streaming completion body (choices[0].message, usage, id/model/created).
/// Error text names what was missing or malformed.
util::Expected<ChatResponse> parse_completion_body(std::string_view body);

/// Accumulates streamed chunks (choices[i].delta.content / reasoning_content / reasoning,
/// finish_reason, usage in any chunk).
class StreamAccumulator {
 public:
  /// One SSE event's data. Returns an error for malformed JSON or an {"error": ...} event.
  util::Expected<void> add_event(const std::string &data);
  bool done() const { return done_; }                     ///< saw [DONE]
  bool finished() const;                                  ///< choice 0 has a finish_reason
  std::string partial_content() const;                    ///< choice 0's content so far
  std::size_t text_bytes() const { return text_bytes_; }  ///< content + reasoning of all choices so far
  ChatResponse take_response();                           ///< applies think splitting

 private:
  struct Choice {
    std::string content, reasoning, finish_reason;
  };
  std::vector<Choice> choices_;
  Usage usage_;
  nlohmann::json meta_ = nlohmann::json::object();
  bool done_ = false;
  std::size_t text_bytes_ = 0;
};

/// Retry-After: delta-seconds or an HTTP date (IMF-fixdate, RFC 850, asctime). nullopt if
/// unparseable; a date in the past gives 0.
std::optional<std::chrono::milliseconds> parse_retry_after(std::string_view value,
                                                           std::chrono::system_clock::time_point now);

/// Full jitter: uniform in [0, min(cap, initial * 2^retry_index)].
std::chrono::milliseconds backoff_delay(int retry_index, std::chrono::milliseconds initial,
                                        std::chrono::milliseconds cap, std::mt19937_64 &rng);

/// 408, 409, 429 and 5xx are worth retrying.
bool is_retryable_status(long status);

/// At most max_chars of text, the secret replaced by "[REDACTED]", control characters as spaces.
std::string redacted_excerpt(std::string_view text, const std::string &secret, std::size_t max_chars = 500);

/// Replaces every occurrence of secret (if non-empty) in text.
std::string redact(std::string text, const std::string &secret);

/// True when an error body (any status) says the request carried no key or a wrong one: some proxies
/// answer that with a 500, which retrying cannot fix.
bool looks_like_key_error(std::string_view body);

/// The server's own words from an error body: error.message, detail or message; else "".
std::string server_error_message(std::string_view body);

/// Model ids from a GET /models body ({"data": [{"id": ...}]}); empty if it is not one.
std::vector<std::string> model_ids(std::string_view body);

/// Usage as {prompt_tokens, completion_tokens, completion_tokens_details.reasoning_tokens}.
Usage parse_usage(const nlohmann::json &usage);

}  // namespace ptxbench::llm::detail
