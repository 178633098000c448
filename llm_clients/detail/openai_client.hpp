// The libcurl client for OpenAI-compatible servers (vLLM, SGLang, llama.cpp, OpenAI, OpenRouter).
#pragma once

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <string>
#include <utility>

#include "llm_clients/chat_client.hpp"

namespace ptxbench::llm::detail {

/// Outcome of one HTTP attempt, before retry policy is applied.
struct AttemptResult {
  bool ok = false;
  ChatResponse response;
  ChatError error;
  bool retryable = false;
  std::optional<std::chrono::milliseconds> retry_after;  ///< from the Retry-After header
};

class OpenAiClient final : public ChatClient {
 public:
  /// api_key: the resolved key ("" = send no Authorization header).
  OpenAiClient(EndpointConfig config, std::string api_key);
  util::Expected<ChatResponse, ChatError> complete(const ChatRequest &request) override;
  void cancel() override;

 private:
  AttemptResult attempt(const std::string &body) const;
  /// Sleeps up to `duration`; false if cancelled meanwhile.
  bool wait_unless_cancelled(std::chrono::milliseconds duration);
  /// The error for a non-2xx answer, with a hint naming the cause; *retry_pointless set when the cause
  /// is the server's state (a missing key), which retrying cannot change.
  ChatError http_error(long status, const std::string &body, bool *retry_pointless = nullptr) const;
  /// GET url with the key and a 5 s limit: (status, body start); status 0 when unreachable.
  std::pair<long, std::string> get(const std::string &url) const;
  /// What a GET <base_url>/models answer says about config_.model ("" when it lists nothing).
  std::string model_hint(const std::pair<long, std::string> &models) const;

  const EndpointConfig config_;
  const std::string api_key_;
  const std::string url_;
  std::atomic<bool> cancelled_{false};
  std::mutex wait_mutex_;
  std::condition_variable wait_cv_;
};

}  // namespace ptxbench::llm::detail
