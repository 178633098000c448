// The libcurl client for OpenAI-compatible servers (vLLM, SGLang, llama.cpp, OpenAI, OpenRouter).
#pragma once

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <string>
#include <utility>

#include "llm_clients/detail/chat_types.hpp"

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
  /// GET <base_url>/models, asked at most once per error and only for the statuses whose cause it tells.
  using ModelsAnswer = std::optional<std::pair<long, std::string>>;
  /// The hint for a non-2xx status ("" when none); *retry_pointless as for http_error.
  std::string status_hint(long status, const std::string &server, const std::string &body,
                          bool *retry_pointless) const;
  std::string not_found_hint(ModelsAnswer &models) const;                            ///< 404
  std::string rejected_hint(const std::string &server, ModelsAnswer &models) const;  ///< 400, 422
  std::string server_error_hint(long status, const std::string &body, ModelsAnswer &models,
                                bool *retry_pointless) const;  ///< 5xx and the rest
  /// The hint when GET <base_url>/models fails as well (answered `models_status`).
  std::string refused_too(ModelsAnswer &models, long models_status) const;
  const std::pair<long, std::string> &models_answer(ModelsAnswer &models) const;
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
