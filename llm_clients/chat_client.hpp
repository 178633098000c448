// OpenAI-compatible chat completions. Expected failures (HTTP 429 after the
// retry budget, 401, timeouts, malformed bodies) are values.
//
// A `length` finish is NOT an error: complete() returns the response with
// finish_reason == "length" (content and reasoning as far as the model got),
// and the caller decides whether that is its own outcome (the agent records it
// and may still parse a kernel from the truncated content). ChatErrorKind::length
// is kept for callers that want to report it as a failure; these clients never
// produce it.
//
// Thread safety: one client object may be used from many threads at once; each
// request uses its own curl handle. The clients do not limit concurrency: the
// caller enforces EndpointConfig::max_in_flight.
//
// The types (ChatRequest, ChatResponse, ChatError, EndpointConfig, ...) and the ChatClient interface are
// declared in detail/chat_types.hpp, which the clients' own headers in detail/ share.
#pragma once

#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "llm_clients/detail/chat_types.hpp"
#include "util/expected.hpp"

namespace ptxbench::llm {

std::string to_string(ChatErrorKind);

/// Parses one endpoint object (keys as the EndpointConfig field names; durations in
/// milliseconds with an `_ms` suffix: request_timeout_ms, backoff_initial_ms, backoff_max_ms,
/// connect_timeout_ms, stream_idle_timeout_ms, retry_budget_ms). Unknown keys and bad types
/// are errors naming `json_path` + the key. The inverse of to_json_redacted().
util::Expected<EndpointConfig> endpoint_config_from_json(const nlohmann::json &object,
                                                         const std::string &json_path = "endpoint");

/// Replaces missing or implausible usage in `response` by an estimate from the request's and the
/// response's text (about 4 bytes per token) and marks it estimated. Exact-looking counts are kept.
void settle_usage(ChatResponse &response, const ChatRequest &request);

/// Builds the client an endpoint config names; an error message (unknown kind, key variable
/// named but unset, unreadable or invalid scripted file with path and field) instead of a client.
util::Expected<std::unique_ptr<ChatClient>> create_client(const EndpointConfig &config);

/// Builds the client an endpoint config names ("openai" over libcurl, or "scripted").
/// Throws std::invalid_argument with create_client's message when the config is unusable.
std::unique_ptr<ChatClient> make_client(const EndpointConfig &config);

}  // namespace ptxbench::llm
