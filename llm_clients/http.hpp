// One plain HTTP request with libcurl, for the JSON services ptxbench talks to besides the model endpoints
// (today the remote evaluator, `ptxbench serve`): method, URL, headers, body, a time limit and a cancel
// flag. Transport failures are values; the status, Retry-After and body of any answer are returned as
// they came (the caller decides what is retried).
#pragma once

#include <atomic>
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "util/expected.hpp"

namespace ptxbench::llm {

struct HttpRequest {
  std::string method = "GET";
  std::string url;
  std::vector<std::string> headers;  ///< "Name: value"
  std::string body;                  ///< sent when non-empty (POST)
  double timeout_s = 30;             ///< the whole transfer
  double connect_timeout_s = 10;
  std::size_t max_response_bytes = 64u << 20;  ///< a longer body is a transport failure
  const std::atomic<bool> *cancel = nullptr;   ///< set: the transfer stops within ~100 ms
};

struct HttpResponse {
  long status = 0;
  std::optional<std::string> retry_after;  ///< the Retry-After header as sent
  std::string body;
};

struct HttpFailure {
  bool cancelled = false;
  std::string message;  ///< e.g. "Couldn't connect to server (http://127.0.0.1:1/healthz)"
};

/// curl_global_init, once per process; every libcurl user here calls it before its first handle.
void init_curl_once();

/// Error: the request got no complete answer (refused, timed out, cut off, too large, cancelled).
util::Expected<HttpResponse, HttpFailure> http_request(const HttpRequest &request);

}  // namespace ptxbench::llm
