#include "llm_clients/http.hpp"

#include <algorithm>
#include <cctype>
#include <memory>
#include <mutex>
#include <new>
#include <stdexcept>
#include <string_view>

#include <curl/curl.h>
#include <fmt/core.h>

namespace ptxbench::llm {

namespace {

struct Transfer {
  const HttpRequest *request = nullptr;
  HttpResponse response;
  bool too_large = false;
};

std::string trimmed(std::string_view s) {
  const auto b = s.find_first_not_of(" \t\r\n");
  const auto e = s.find_last_not_of(" \t\r\n");
  return b == std::string_view::npos ? std::string() : std::string(s.substr(b, e - b + 1));
}

size_t on_header(char *data, size_t size, size_t count, void *user) {
  auto &t = *static_cast<Transfer *>(user);
  const std::string_view line(data, size * count);
  if (line.starts_with("HTTP/")) {  // a new status line (after 100 Continue too): start over
    t.response.retry_after.reset();
    return size * count;
  }
  const auto colon = line.find(':');
  if (colon == std::string_view::npos) return size * count;
  std::string name = trimmed(line.substr(0, colon));
  std::transform(name.begin(), name.end(), name.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (name == "retry-after") t.response.retry_after = trimmed(line.substr(colon + 1));
  return size * count;
}

size_t on_body(char *data, size_t size, size_t count, void *user) {
  auto &t = *static_cast<Transfer *>(user);
  const size_t n = size * count;
  if (t.response.body.size() + n > t.request->max_response_bytes) {
    t.too_large = true;
    return 0;  // CURLE_WRITE_ERROR
  }
  t.response.body.append(data, n);
  return n;
}

int on_progress(void *user, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
  const auto &t = *static_cast<Transfer *>(user);
  return t.request->cancel != nullptr && t.request->cancel->load() ? 1 : 0;  // 1 aborts
}

}  // namespace

void init_curl_once() {
  static std::once_flag once;
  std::call_once(once, [] {
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
      throw std::runtime_error("curl_global_init failed");
  });
}

util::Expected<HttpResponse, HttpFailure> http_request(const HttpRequest &request) {
  init_curl_once();
  std::unique_ptr<CURL, decltype(&curl_easy_cleanup)> easy(curl_easy_init(), curl_easy_cleanup);
  if (!easy) throw std::bad_alloc();
  std::unique_ptr<curl_slist, decltype(&curl_slist_free_all)> headers(nullptr, curl_slist_free_all);
  auto add_header = [&](const std::string &line) {
    curl_slist *grown = curl_slist_append(headers.get(), line.c_str());
    if (!grown) throw std::bad_alloc();
    (void)headers.release();
    headers.reset(grown);
  };
  for (const auto &h : request.headers) add_header(h);
  if (!request.body.empty()) add_header("Content-Type: application/json");
  add_header("Expect:");  // no 100-continue round trip for larger bodies

  Transfer t;
  t.request = &request;
  CURL *h = easy.get();
  char error_text[CURL_ERROR_SIZE] = {0};
  curl_easy_setopt(h, CURLOPT_URL, request.url.c_str());
  curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, request.method.c_str());
  if (!request.body.empty()) {
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, request.body.data());
    curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(request.body.size()));
  }
  curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers.get());
  curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, static_cast<long>(std::max(0.001, request.timeout_s) * 1000));
  curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS,
                   static_cast<long>(std::max(0.001, request.connect_timeout_s) * 1000));
  curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 0L);
  curl_easy_setopt(h, CURLOPT_USERAGENT, "ptxbench/" PTXBENCH_VERSION);
  curl_easy_setopt(h, CURLOPT_ERRORBUFFER, error_text);
  curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
  curl_easy_setopt(h, CURLOPT_HEADERDATA, &t);
  curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
  curl_easy_setopt(h, CURLOPT_WRITEDATA, &t);
  curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
  curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, on_progress);
  curl_easy_setopt(h, CURLOPT_XFERINFODATA, &t);
  const CURLcode rc = curl_easy_perform(h);
  if (rc == CURLE_ABORTED_BY_CALLBACK) return util::unexpected(HttpFailure{true, "cancelled"});
  if (t.too_large)
    return util::unexpected(
        HttpFailure{false, fmt::format("{} {}: the answer is larger than {} bytes", request.method,
                                       request.url, request.max_response_bytes)});
  if (rc != CURLE_OK)
    return util::unexpected(
        HttpFailure{false, fmt::format("{} {}: {}", request.method, request.url,
                                       error_text[0] ? error_text : curl_easy_strerror(rc))});
  curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &t.response.status);
  return std::move(t.response);
}

}  // namespace ptxbench::llm
