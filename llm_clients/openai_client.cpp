#include "llm_clients/detail/openai_client.hpp"

#include <algorithm>
#include <cctype>
#include <limits>
#include <random>
#include <thread>

#include <curl/curl.h>
#include <fmt/format.h>

#include "llm_clients/chat_client.hpp"
#include "llm_clients/detail/protocol.hpp"
#include "llm_clients/http.hpp"

namespace ptxbench::llm::detail {

namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr std::size_t kErrorBodyKeep = 64u << 10;  // bytes of an error body kept for the excerpt
// max_response_bytes bounds the answer's text; the wire may carry this many times more: SSE framing is
// 40-60x the text with one token per event (more with one-byte tokens), JSON escaping at most 6x.
constexpr std::size_t kStreamWireFactor = 256, kBodyWireFactor = 8;

std::size_t saturating_mul(std::size_t a, std::size_t b) {
  return a > std::numeric_limits<std::size_t>::max() / b ? std::numeric_limits<std::size_t>::max() : a * b;
}
constexpr milliseconds kPollSlice{100};  // how often a transfer checks cancel / stall

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char &c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string trim(std::string_view s) {
  auto b = s.find_first_not_of(" \t\r\n");
  auto e = s.find_last_not_of(" \t\r\n");
  return b == std::string_view::npos ? std::string{} : std::string(s.substr(b, e - b + 1));
}

std::mt19937_64 &thread_rng() {
  thread_local std::mt19937_64 rng{std::random_device{}() ^
                                   std::hash<std::thread::id>{}(std::this_thread::get_id())};
  return rng;
}

/// Everything one HTTP attempt's callbacks touch.
struct Transfer {
  bool stream_requested = false;
  std::size_t max_bytes = 0;       ///< bytes on the wire (framing included)
  std::size_t max_text_bytes = 0;  ///< bytes of streamed answer text
  long status = 0;
  std::string content_type;
  std::optional<std::string> retry_after;
  std::size_t body_bytes = 0;
  std::string body;  // non-SSE body (the completion, or an error body up to kErrorBodyKeep)
  bool too_large = false;
  StreamAccumulator stream;
  std::optional<std::string> stream_error;
  SseParser sse{[this](std::string data) {
    if (stream_error) return;
    auto added = stream.add_event(data);
    if (!added) stream_error = added.error();
  }};
  Clock::time_point attempt_start;
  std::optional<Clock::time_point> first_byte;
  Clock::time_point last_byte;

  bool sse_mode() const {
    return stream_requested && status >= 200 && status < 300 &&
           content_type.find("application/json") == std::string::npos;
  }
};

size_t on_header(char *data, size_t size, size_t count, void *user) {
  auto &t = *static_cast<Transfer *>(user);
  std::string_view line(data, size * count);
  if (line.rfind("HTTP/", 0) == 0) {  // a new status line (also after 100 Continue): start over
    auto space = line.find(' ');
    t.status =
        space == std::string_view::npos ? 0 : std::atol(std::string(line.substr(space + 1, 3)).c_str());
    t.retry_after.reset();
    t.content_type.clear();
    return size * count;
  }
  auto colon = line.find(':');
  if (colon == std::string_view::npos) return size * count;
  std::string name = lower(trim(line.substr(0, colon)));
  if (name == "retry-after") t.retry_after = trim(line.substr(colon + 1));
  if (name == "content-type") t.content_type = lower(trim(line.substr(colon + 1)));
  return size * count;
}

size_t on_body(char *data, size_t size, size_t count, void *user) {
  auto &t = *static_cast<Transfer *>(user);
  const size_t n = size * count;
  t.last_byte = Clock::now();
  if (!t.first_byte) t.first_byte = t.last_byte;
  t.body_bytes += n;
  if (t.body_bytes > t.max_bytes) {
    t.too_large = true;
    return 0;  // aborts the transfer with CURLE_WRITE_ERROR
  }
  if (t.sse_mode()) {
    t.sse.feed(std::string_view(data, n));
    if (t.stream.text_bytes() > t.max_text_bytes) {
      t.too_large = true;
      return 0;
    }
    return t.stream_error ? 0 : n;
  }
  if (t.status >= 200 && t.status < 300) {
    t.body.append(data, n);
  } else if (t.body.size() < kErrorBodyKeep) {
    t.body.append(data, std::min(n, kErrorBodyKeep - t.body.size()));
  }
  return n;
}

ChatError make_error(ChatErrorKind kind, std::string message, int status = 0) {
  ChatError e;
  e.kind = kind;
  e.http_status = status;
  e.message = std::move(message);
  return e;
}

struct CurlEasy {
  CURL *handle = curl_easy_init();
  ~CurlEasy() {
    if (handle) curl_easy_cleanup(handle);
  }
};
struct CurlMulti {
  CURLM *handle = curl_multi_init();
  ~CurlMulti() {
    if (handle) curl_multi_cleanup(handle);
  }
};
struct CurlHeaders {
  curl_slist *list = nullptr;
  void add(const std::string &line) {
    curl_slist *grown = curl_slist_append(list, line.c_str());
    if (!grown) throw std::bad_alloc();
    list = grown;
  }
  ~CurlHeaders() { curl_slist_free_all(list); }
};

std::string strip_trailing_slashes(std::string url) {
  while (!url.empty() && url.back() == '/') url.pop_back();
  return url;
}

}  // namespace

OpenAiClient::OpenAiClient(EndpointConfig config, std::string api_key)
    : config_(std::move(config)),
      api_key_(std::move(api_key)),
      url_(strip_trailing_slashes(config_.base_url) + "/chat/completions") {
  init_curl_once();
}

void OpenAiClient::cancel() {
  {
    std::lock_guard lock(wait_mutex_);
    cancelled_ = true;
  }
  wait_cv_.notify_all();
}

bool OpenAiClient::wait_unless_cancelled(milliseconds duration) {
  std::unique_lock lock(wait_mutex_);
  return !wait_cv_.wait_for(lock, duration, [this] { return cancelled_.load(); });
}

std::pair<long, std::string> OpenAiClient::get(const std::string &url) const {
  // A short GET beside the failed request (the model list), to name the real cause of a 404 or 400.
  CurlEasy easy;
  if (!easy.handle) throw std::bad_alloc();
  CurlHeaders headers;
  if (!api_key_.empty()) headers.add("Authorization: Bearer " + api_key_);
  std::string body;
  CURL *h = easy.handle;
  curl_easy_setopt(h, CURLOPT_URL, url.c_str());
  curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers.list);
  curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, 5000L);
  curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 0L);
  curl_easy_setopt(h, CURLOPT_USERAGENT, "ptxbench/" PTXBENCH_VERSION);
  curl_easy_setopt(
      h, CURLOPT_WRITEFUNCTION, +[](char *data, size_t size, size_t count, void *user) -> size_t {
        auto &out = *static_cast<std::string *>(user);
        if (out.size() < kErrorBodyKeep)
          out.append(data, std::min(size * count, kErrorBodyKeep - out.size()));
        return size * count;
      });
  curl_easy_setopt(h, CURLOPT_WRITEDATA, &body);
  long status = 0;
  if (curl_easy_perform(h) == CURLE_OK) curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
  return {status, body};
}

std::string OpenAiClient::model_hint(const std::pair<long, std::string> &models) const {
  const std::string models_url = strip_trailing_slashes(config_.base_url) + "/models";
  const auto &[status, body] = models;
  std::vector<std::string> ids = status == 200 ? model_ids(body) : std::vector<std::string>{};
  if (status != 200 || ids.empty()) return {};
  if (std::find(ids.begin(), ids.end(), config_.model) != ids.end())
    return fmt::format("the server lists model '{}' at {}", config_.model, models_url);
  std::string list;
  for (std::size_t i = 0; i < ids.size() && i < 12; ++i) list += (i ? ", " : "") + ids[i];
  if (ids.size() > 12) list += fmt::format(", ... ({} in all)", ids.size());
  return fmt::format("model '{}' is not served at {}; it lists: {}", config_.model, config_.base_url, list);
}

const std::pair<long, std::string> &OpenAiClient::models_answer(ModelsAnswer &models) const {
  if (!models) models = get(strip_trailing_slashes(config_.base_url) + "/models");
  return *models;
}

std::string OpenAiClient::refused_too(ModelsAnswer &models, long models_status) const {
  const std::string key_advice = config_.api_key_env.empty()
                                     ? "this endpoint sends no key: if the server needs one, set api_key_env "
                                       "to the name of the variable "
                                       "holding it"
                                     : "check the key in $" + config_.api_key_env;
  std::string said = redacted_excerpt(server_error_message(models_answer(models).second), api_key_, 200);
  return fmt::format(
      "the server fails GET {}/models too (HTTP {}{}), so the request never reached a model: {}",
      strip_trailing_slashes(config_.base_url), models_status, said.empty() ? "" : ": " + said, key_advice);
}

std::string OpenAiClient::not_found_hint(ModelsAnswer &models) const {
  // Either the path is wrong (base_url without /v1) or the model is unknown: the model list tells.
  std::string hint = model_hint(models_answer(models));
  if (hint.empty() || hint.find("the server lists") == 0)
    hint = fmt::format(
        "no chat completions at {}: check base_url (OpenAI-compatible servers answer at "
        ".../v1/chat/completions, so base_url usually ends in /v1){}",
        url_, hint.empty() ? "" : "; " + hint);
  return hint;
}

std::string OpenAiClient::rejected_hint(const std::string &server, ModelsAnswer &models) const {
  // Only a message about the model is worth the model list (LiteLLM: "Invalid model name passed").
  std::string listed =
      lower(server).find("model") != std::string::npos ? model_hint(models_answer(models)) : std::string();
  if (listed.find("is not served") != std::string::npos) return listed;
  if (const long s = models_answer(models).first; s >= 400)
    return refused_too(models, s);  // e.g. LiteLLM without a database answers a wrong key with 400
  return "the server rejected the request: its message says why (sampling parameters, extra_body, "
         "the prompt length); check sampling parameters and extra_body";
}

std::string OpenAiClient::server_error_hint(long status, const std::string &body, ModelsAnswer &models,
                                            bool *retry_pointless) const {
  if (status >= 500 && looks_like_key_error(body)) {
    if (retry_pointless) *retry_pointless = true;
    return config_.api_key_env.empty()
               ? "the server wants a key: set api_key_env to the name of the variable holding it"
               : "the server refused the key: check the key in $" + config_.api_key_env;
  }
  if (status == 500) {
    // A 500 that GET /models shares is the server's state (a missing key, a broken proxy), not a
    // passing overload: retrying would only wait. A server that lists its models is retried.
    if (const long s = models_answer(models).first; s == 0 || s >= 400) {
      if (retry_pointless) *retry_pointless = true;
      return refused_too(models, s);
    }
  }
  return {};
}

std::string OpenAiClient::status_hint(long status, const std::string &server, const std::string &body,
                                      bool *retry_pointless) const {
  // GET <base_url>/models, asked once and only for the statuses whose cause it tells apart.
  ModelsAnswer models;
  switch (status) {
    case 401:
    case 403:
      return config_.api_key_env.empty()
                 ? "the endpoint sends no key: set api_key_env to the name of the variable holding it"
                 : "check the key in $" + config_.api_key_env;
    case 404:
      return not_found_hint(models);
    case 400:
    case 422:
      return rejected_hint(server, models);
    case 413:
      return "the request is too large for the server: shorten the prompt or the history";
    case 429:
      return "rate limited: lower max_in_flight or raise max_retries / backoff_max";
    default:
      return server_error_hint(status, body, models, retry_pointless);
  }
}

ChatError OpenAiClient::http_error(long status, const std::string &body, bool *retry_pointless) const {
  const std::string server = redacted_excerpt(server_error_message(body), api_key_);
  const std::string hint = status_hint(status, server, body, retry_pointless);
  std::string message;
  if ((status == 400 || status == 404 || status == 422) && !server.empty()) {
    // The server's own words first: they usually name the parameter or the model.
    message = fmt::format("{} [HTTP {} from {}]", server, status, url_);
  } else {
    message = fmt::format("HTTP {} from {}", status, url_);
    std::string excerpt = redacted_excerpt(body, api_key_);
    if (!excerpt.empty()) message += ": " + excerpt;
  }
  if (!hint.empty()) message += " (" + hint + ")";
  return make_error(ChatErrorKind::http_status, std::move(message), static_cast<int>(status));
}

namespace {

/// The request headers: JSON in, a stream or JSON out, no 100-continue, the key when there is one.
void add_request_headers(CurlHeaders &headers, const EndpointConfig &config, const std::string &api_key) {
  headers.add("Content-Type: application/json");
  headers.add(config.stream ? "Accept: text/event-stream" : "Accept: application/json");
  headers.add("Expect:");  // no 100-continue round trip for large prompts
  if (!api_key.empty()) headers.add("Authorization: Bearer " + api_key);
}

/// One POST of `body` to `url`, its callbacks writing into `t`.
void set_request_options(CURL *h, const EndpointConfig &config, const std::string &url,
                         const std::string &body, curl_slist *headers, char *error_buffer, Transfer &t) {
  curl_easy_setopt(h, CURLOPT_URL, url.c_str());
  curl_easy_setopt(h, CURLOPT_POST, 1L);
  curl_easy_setopt(h, CURLOPT_POSTFIELDS, body.data());
  curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(body.size()));
  curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, static_cast<long>(config.request_timeout.count()));
  curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS,
                   static_cast<long>(std::min(config.connect_timeout, config.request_timeout).count()));
  curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 0L);  // never forward the key to another host
  curl_easy_setopt(h, CURLOPT_ACCEPT_ENCODING, "");
  curl_easy_setopt(h, CURLOPT_TCP_KEEPALIVE, 1L);
  curl_easy_setopt(h, CURLOPT_USERAGENT, "ptxbench/" PTXBENCH_VERSION);
  curl_easy_setopt(h, CURLOPT_ERRORBUFFER, error_buffer);
  curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
  curl_easy_setopt(h, CURLOPT_HEADERDATA, &t);
  curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
  curl_easy_setopt(h, CURLOPT_WRITEDATA, &t);
}

/// How a transfer ended: cancelled or stalled (stopped by us), else libcurl's result.
struct TransferEnd {
  bool cancelled = false, stalled = false;
  CURLcode code = CURLE_OK;
};

/// Runs the transfer to its end. The multi interface lets it wake every kPollSlice to notice Ctrl-C and a
/// stalled stream with millisecond resolution (CURLOPT_LOW_SPEED_TIME only counts whole seconds).
TransferEnd run_transfer(CURLM *multi, CURL *h, const Transfer &t, const EndpointConfig &config,
                         const std::atomic<bool> &cancelled) {
  TransferEnd end;
  curl_multi_add_handle(multi, h);
  int running = 1;
  while (running) {
    CURLMcode mc = curl_multi_perform(multi, &running);
    if (mc != CURLM_OK)
      throw std::runtime_error(std::string("curl_multi_perform: ") + curl_multi_strerror(mc));
    if (!running) break;
    if (cancelled) {
      end.cancelled = true;
      break;
    }
    if (config.stream && Clock::now() - t.last_byte > config.stream_idle_timeout) {
      end.stalled = true;
      break;
    }
    curl_multi_poll(multi, nullptr, 0, static_cast<int>(kPollSlice.count()), nullptr);
  }
  int queued = 0;
  while (CURLMsg *msg = curl_multi_info_read(multi, &queued))
    if (msg->msg == CURLMSG_DONE) end.code = msg->data.result;
  curl_multi_remove_handle(multi, h);
  return end;
}

/// `result` failed: the error (with a stream's text so far) and whether a retry may help.
AttemptResult failed(AttemptResult result, const Transfer &t, ChatErrorKind kind, std::string message,
                     bool retryable) {
  result.error = make_error(kind, std::move(message), static_cast<int>(t.status));
  if (t.sse_mode()) result.error.partial_content = t.stream.partial_content();
  result.retryable = retryable;
  return result;
}

/// What the attempt's messages name: the endpoint's settings, its URL, and the key they must not show.
struct Endpoint {
  const EndpointConfig &config;
  const std::string &url;
  const std::string &api_key;
};

AttemptResult too_large(const AttemptResult &result, const Transfer &t, const Endpoint &e, const char *what) {
  return failed(result, t, ChatErrorKind::bad_response,
                fmt::format("{} exceeded max_response_bytes ({} bytes) from {}; raise it in the endpoint "
                            "config or lower max_tokens",
                            what, e.config.max_response_bytes, e.url),
                false);
}

/// The attempt's failure when the transfer was stopped (cancelled, stalled, too large, a malformed stream).
std::optional<AttemptResult> stopped_early(const Endpoint &e, const Transfer &t, bool cancelled,
                                           bool stalled) {
  const AttemptResult result;
  if (cancelled) return failed(result, t, ChatErrorKind::cancelled, "request cancelled", false);
  if (stalled)
    return failed(
        result, t, ChatErrorKind::timeout,
        fmt::format("stream stalled: no data for {} ms (stream_idle_timeout) after {} bytes from {}",
                    e.config.stream_idle_timeout.count(), t.body_bytes, e.url),
        true);
  if (t.too_large)
    return too_large(result, t, e,
                     t.body_bytes > t.max_bytes ? "the response (with its framing)" : "the answer");
  if (t.stream_error)
    return failed(result, t, ChatErrorKind::bad_response,
                  "malformed stream from " + e.url + ": " + redacted_excerpt(*t.stream_error, e.api_key),
                  false);
  return std::nullopt;
}

/// The attempt's failure when no complete answer came: a timeout, a stream cut short, a network error.
std::optional<AttemptResult> incomplete(const Endpoint &e, const AttemptResult &result, const Transfer &t,
                                        CURLcode code, const char *error_buffer) {
  // A stream is complete when it carried a finish_reason, even if the connection then broke. [DONE]
  // alone is not enough: llama.cpp's server ends a generation that another request interrupted with
  // [DONE] and no finish_reason, and the text so far is not the model's whole answer.
  const bool sse = t.sse_mode();
  const bool stream_complete = sse && t.stream.finished();
  if (code == CURLE_OPERATION_TIMEDOUT && !stream_complete)
    return failed(result, t, ChatErrorKind::timeout,
                  fmt::format("no complete response from {} within request_timeout ({} ms) after {} bytes",
                              e.url, e.config.request_timeout.count(), t.body_bytes),
                  true);
  if (sse && !stream_complete) {
    // Cut short without a finish_reason: an endpoint failure, worth retrying.
    std::string partial = t.stream.partial_content();
    std::string message =
        t.stream.done()
            ? fmt::format(
                  "stream ended with [DONE] without a finish_reason after {} bytes from {} (the "
                  "server stopped the generation, e.g. llama.cpp's server when another request "
                  "interrupts it)",
                  t.body_bytes, e.url)
            : fmt::format("stream ended early after {} bytes from {} (no [DONE], no finish_reason)",
                          t.body_bytes, e.url);
    if (code != CURLE_OK) message += fmt::format(" [{}]", curl_easy_strerror(code));
    if (!partial.empty()) message += "; partial text: " + redacted_excerpt(partial, e.api_key, 300);
    return failed(result, t, ChatErrorKind::bad_response, std::move(message), true);
  }
  if (code != CURLE_OK && !stream_complete) {
    std::string detail = error_buffer[0] ? std::string(error_buffer) : curl_easy_strerror(code);
    bool permanent = code == CURLE_URL_MALFORMAT || code == CURLE_UNSUPPORTED_PROTOCOL;
    return failed(result, t, permanent ? ChatErrorKind::config : ChatErrorKind::network,
                  fmt::format("cannot reach {}: {}", e.url, redact(detail, e.api_key)), !permanent);
  }
  return std::nullopt;
}

/// A 2xx answer: the streamed or parsed response, its first byte's time, its size checked.
AttemptResult answered(const Endpoint &e, AttemptResult result, Transfer &t) {
  result.response.first_byte_seconds =
      t.first_byte ? std::chrono::duration<double>(*t.first_byte - t.attempt_start).count() : 0.0;
  if (t.sse_mode()) {
    double first_byte = result.response.first_byte_seconds;
    result.response = t.stream.take_response();
    result.response.first_byte_seconds = first_byte;
  } else {
    auto parsed = parse_completion_body(t.body);
    if (!parsed)
      return failed(result, t, ChatErrorKind::bad_response,
                    fmt::format("bad response from {}: {}; body starts: {}", e.url, parsed.error(),
                                redacted_excerpt(t.body, e.api_key, 200)),
                    false);
    double first_byte = result.response.first_byte_seconds;
    result.response = std::move(parsed.value());
    result.response.first_byte_seconds = first_byte;
    std::size_t text = result.response.content.size() + result.response.reasoning.size();
    for (const auto &c : result.response.extra_choices) text += c.content.size() + c.reasoning.size();
    if (text > e.config.max_response_bytes) return too_large(result, t, e, "the answer");
  }
  result.ok = true;
  return result;
}

}  // namespace

AttemptResult OpenAiClient::attempt(const std::string &body) const {
  Transfer t;
  t.stream_requested = config_.stream;
  t.max_text_bytes = config_.max_response_bytes;
  t.max_bytes =
      saturating_mul(config_.max_response_bytes, config_.stream ? kStreamWireFactor : kBodyWireFactor);
  t.attempt_start = t.last_byte = Clock::now();

  CurlEasy easy;
  CurlMulti multi;
  if (!easy.handle || !multi.handle) throw std::bad_alloc();
  CurlHeaders headers;
  add_request_headers(headers, config_, api_key_);
  char error_buffer[CURL_ERROR_SIZE] = {0};
  set_request_options(easy.handle, config_, url_, body, headers.list, error_buffer, t);
  const TransferEnd end = run_transfer(multi.handle, easy.handle, t, config_, cancelled_);

  if (t.sse_mode() && !end.cancelled && !end.stalled) t.sse.finish();
  const Endpoint e{config_, url_, api_key_};
  if (auto stopped = stopped_early(e, t, end.cancelled, end.stalled)) return std::move(*stopped);
  AttemptResult result;
  if (t.retry_after) result.retry_after = parse_retry_after(*t.retry_after, std::chrono::system_clock::now());
  if (auto cut = incomplete(e, result, t, end.code, error_buffer)) return std::move(*cut);
  if (t.status < 200 || t.status >= 300) {
    bool pointless = false;
    result.error = http_error(t.status, t.body, &pointless);
    // A proxy's "no key" 500 stays a 500 however often it is asked.
    result.retryable = is_retryable_status(t.status) && !pointless;
    return result;
  }
  return answered(e, std::move(result), t);
}

util::Expected<ChatResponse, ChatError> OpenAiClient::complete(const ChatRequest &request) {
  const auto start = Clock::now();
  if (cancelled_) {
    auto e = make_error(ChatErrorKind::cancelled, "request cancelled before it was sent");
    e.attempts = 0;
    return util::unexpected(std::move(e));
  }
  // Invalid UTF-8 from a model's earlier turn is replaced, not fatal.
  const std::string body =
      build_request_body(config_, request).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  for (int index = 0;; ++index) {
    AttemptResult r = attempt(body);
    const int attempts = index + 1;
    if (r.ok) {
      settle_usage(r.response, request);
      r.response.attempts = attempts;
      r.response.latency_seconds = seconds_since(start);
      return std::move(r.response);
    }
    r.error.attempts = attempts;
    if (!r.retryable || cancelled_) return util::unexpected(std::move(r.error));
    if (index >= config_.max_retries) {
      r.error.message = fmt::format("gave up after {} attempts: {}", attempts, r.error.message);
      return util::unexpected(std::move(r.error));
    }
    milliseconds wait = backoff_delay(index, config_.backoff_initial, config_.backoff_max, thread_rng());
    if (r.retry_after) wait = std::max(wait, *r.retry_after);
    wait = std::min(wait, config_.backoff_max);
    const auto elapsed = std::chrono::duration_cast<milliseconds>(Clock::now() - start);
    if (elapsed + wait > config_.retry_budget) {
      ChatError e = r.error;
      e.kind = ChatErrorKind::budget;
      e.message = fmt::format(
          "retry budget of {} ms exhausted after {} attempts in {} ms (next wait {} ms); last error: {}",
          config_.retry_budget.count(), attempts, elapsed.count(), wait.count(), r.error.message);
      return util::unexpected(std::move(e));
    }
    if (!wait_unless_cancelled(wait)) {
      auto e =
          make_error(ChatErrorKind::cancelled,
                     fmt::format("request cancelled while waiting to retry; last error: {}", r.error.message),
                     r.error.http_status);
      e.attempts = attempts;
      return util::unexpected(std::move(e));
    }
  }
}

}  // namespace ptxbench::llm::detail
