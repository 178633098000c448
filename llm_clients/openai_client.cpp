#include "llm_clients/detail/openai_client.hpp"

#include <algorithm>
#include <cctype>
#include <random>
#include <thread>

#include <curl/curl.h>
#include <fmt/format.h>

#include "llm_clients/detail/protocol.hpp"

namespace ptxbench::llm::detail {

namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr std::size_t kErrorBodyKeep = 64u << 10;  // bytes of an error body kept for the excerpt
constexpr milliseconds kPollSlice{100};            // how often a transfer checks cancel / stall

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
  std::size_t max_bytes = 0;
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

void init_curl_once() {
  static std::once_flag once;
  std::call_once(once, [] {
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
      throw std::runtime_error("curl_global_init failed");
  });
}

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

ChatError OpenAiClient::http_error(long status, const std::string &body) const {
  std::string hint;
  switch (status) {
    case 401:
    case 403:
      hint = config_.api_key_env.empty()
                 ? "the endpoint sends no key: set api_key_env to the name of the variable holding it"
                 : "check the key in $" + config_.api_key_env;
      break;
    case 404:
      hint = fmt::format("model '{}' not found at {} (requests go to {})", config_.model, config_.base_url,
                         url_);
      break;
    case 400:
    case 422:
      hint = "the server rejected the request: check sampling parameters, extra_body and the prompt length";
      break;
    case 413:
      hint = "the request is too large for the server: shorten the prompt or the history";
      break;
    case 429:
      hint = "rate limited: lower max_in_flight or raise max_retries / backoff_max";
      break;
    default:
      break;
  }
  std::string message = fmt::format("HTTP {} from {}", status, url_);
  std::string excerpt = redacted_excerpt(body, api_key_);
  if (!excerpt.empty()) message += ": " + excerpt;
  if (!hint.empty()) message += " (" + hint + ")";
  return make_error(ChatErrorKind::http_status, std::move(message), static_cast<int>(status));
}

AttemptResult OpenAiClient::attempt(const std::string &body) const {
  AttemptResult result;
  Transfer t;
  t.stream_requested = config_.stream;
  t.max_bytes = config_.max_response_bytes;
  t.attempt_start = t.last_byte = Clock::now();

  CurlEasy easy;
  CurlMulti multi;
  if (!easy.handle || !multi.handle) throw std::bad_alloc();
  CurlHeaders headers;
  headers.add("Content-Type: application/json");
  headers.add(config_.stream ? "Accept: text/event-stream" : "Accept: application/json");
  headers.add("Expect:");  // no 100-continue round trip for large prompts
  if (!api_key_.empty()) headers.add("Authorization: Bearer " + api_key_);
  char error_buffer[CURL_ERROR_SIZE] = {0};

  CURL *h = easy.handle;
  curl_easy_setopt(h, CURLOPT_URL, url_.c_str());
  curl_easy_setopt(h, CURLOPT_POST, 1L);
  curl_easy_setopt(h, CURLOPT_POSTFIELDS, body.data());
  curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(body.size()));
  curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers.list);
  curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, static_cast<long>(config_.request_timeout.count()));
  curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS,
                   static_cast<long>(std::min(config_.connect_timeout, config_.request_timeout).count()));
  curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 0L);  // never forward the key to another host
  curl_easy_setopt(h, CURLOPT_ACCEPT_ENCODING, "");
  curl_easy_setopt(h, CURLOPT_TCP_KEEPALIVE, 1L);
  curl_easy_setopt(h, CURLOPT_USERAGENT, "ptxbench/" PTXBENCH_VERSION);
  curl_easy_setopt(h, CURLOPT_ERRORBUFFER, error_buffer);
  curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
  curl_easy_setopt(h, CURLOPT_HEADERDATA, &t);
  curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
  curl_easy_setopt(h, CURLOPT_WRITEDATA, &t);

  // The multi interface lets the transfer wake every kPollSlice to notice Ctrl-C and a stalled
  // stream with millisecond resolution (CURLOPT_LOW_SPEED_TIME only counts whole seconds).
  curl_multi_add_handle(multi.handle, h);
  bool cancelled = false, stalled = false;
  int running = 1;
  while (running) {
    CURLMcode mc = curl_multi_perform(multi.handle, &running);
    if (mc != CURLM_OK)
      throw std::runtime_error(std::string("curl_multi_perform: ") + curl_multi_strerror(mc));
    if (!running) break;
    if (cancelled_) {
      cancelled = true;
      break;
    }
    if (config_.stream && Clock::now() - t.last_byte > config_.stream_idle_timeout) {
      stalled = true;
      break;
    }
    curl_multi_poll(multi.handle, nullptr, 0, static_cast<int>(kPollSlice.count()), nullptr);
  }
  CURLcode code = CURLE_OK;
  int queued = 0;
  while (CURLMsg *msg = curl_multi_info_read(multi.handle, &queued))
    if (msg->msg == CURLMSG_DONE) code = msg->data.result;
  curl_multi_remove_handle(multi.handle, h);

  const bool sse = t.sse_mode();
  if (sse && !cancelled && !stalled) t.sse.finish();
  auto fail = [&](ChatErrorKind kind, std::string message, bool retryable) {
    result.error = make_error(kind, std::move(message), static_cast<int>(t.status));
    if (sse) result.error.partial_content = t.stream.partial_content();
    result.retryable = retryable;
    return result;
  };

  if (cancelled) return fail(ChatErrorKind::cancelled, "request cancelled", false);
  if (stalled)
    return fail(ChatErrorKind::timeout,
                fmt::format("stream stalled: no data for {} ms (stream_idle_timeout) after {} bytes from {}",
                            config_.stream_idle_timeout.count(), t.body_bytes, url_),
                true);
  if (t.too_large)
    return fail(
        ChatErrorKind::bad_response,
        fmt::format("response from {} exceeded max_response_bytes ({} bytes); raise it in the endpoint "
                    "config or lower max_tokens",
                    url_, config_.max_response_bytes),
        false);
  if (t.stream_error)
    return fail(ChatErrorKind::bad_response,
                "malformed stream from " + url_ + ": " + redacted_excerpt(*t.stream_error, api_key_), false);
  if (t.retry_after) result.retry_after = parse_retry_after(*t.retry_after, std::chrono::system_clock::now());

  // A stream that reached [DONE] or a finish_reason is complete even if the connection then broke.
  const bool stream_complete = sse && (t.stream.done() || t.stream.finished());
  if (code == CURLE_OPERATION_TIMEDOUT && !stream_complete)
    return fail(ChatErrorKind::timeout,
                fmt::format("no complete response from {} within request_timeout ({} ms) after {} bytes",
                            url_, config_.request_timeout.count(), t.body_bytes),
                true);
  if (sse && !stream_complete) {
    // Cut short without [DONE] or a finish_reason: a transport failure, worth retrying.
    std::string partial = t.stream.partial_content();
    std::string message = fmt::format(
        "stream ended early after {} bytes from {} (no [DONE], no finish_reason)", t.body_bytes, url_);
    if (code != CURLE_OK) message += fmt::format(" [{}]", curl_easy_strerror(code));
    if (!partial.empty()) message += "; partial text: " + redacted_excerpt(partial, api_key_, 300);
    return fail(ChatErrorKind::bad_response, std::move(message), true);
  }
  if (code != CURLE_OK && !stream_complete) {
    std::string detail = error_buffer[0] ? std::string(error_buffer) : curl_easy_strerror(code);
    bool permanent = code == CURLE_URL_MALFORMAT || code == CURLE_UNSUPPORTED_PROTOCOL;
    return fail(permanent ? ChatErrorKind::config : ChatErrorKind::network,
                fmt::format("cannot reach {}: {}", url_, redact(detail, api_key_)), !permanent);
  }
  if (t.status < 200 || t.status >= 300) {
    result.error = http_error(t.status, t.body);
    result.retryable = is_retryable_status(t.status);
    return result;
  }
  result.response.first_byte_seconds =
      t.first_byte ? std::chrono::duration<double>(*t.first_byte - t.attempt_start).count() : 0.0;
  if (sse) {
    double first_byte = result.response.first_byte_seconds;
    result.response = t.stream.take_response();
    result.response.first_byte_seconds = first_byte;
  } else {
    auto parsed = parse_completion_body(t.body);
    if (!parsed)
      return fail(ChatErrorKind::bad_response,
                  fmt::format("bad response from {}: {}; body starts: {}", url_, parsed.error(),
                              redacted_excerpt(t.body, api_key_, 200)),
                  false);
    double first_byte = result.response.first_byte_seconds;
    result.response = std::move(parsed.value());
    result.response.first_byte_seconds = first_byte;
  }
  result.ok = true;
  return result;
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
