#include "agent/detail/service_client.hpp"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdlib>
#include <random>
#include <thread>

#include <fmt/core.h>

namespace ptxbench::agent::detail {

namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::json;

constexpr double kPollWaitS = 30;  ///< one blocking GET asks for at most this wait (serve allows 60)
constexpr double kDeadlineMarginS =
    30;  ///< how long past an answer's deadline its verdict is still waited for

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

/// "field: message" of the service's error body, else the start of the body.
std::string error_text(const llm::HttpResponse &r) {
  try {
    const json j = json::parse(r.body);
    const json &e = j.at("error");
    const std::string field = e.value("field", "");
    return (field.empty() ? "" : field + ": ") + e.value("message", "");
  } catch (const std::exception &) {
    return r.body.substr(0, 300);
  }
}

bool retryable(long status) {
  return status == 429 || status >= 500;
}

/// Retry-After in seconds (the integer form serve sends), capped; nullopt when absent or a date.
std::optional<double> retry_after_s(const std::optional<std::string> &header) {
  if (!header) return std::nullopt;
  double v = 0;
  const auto [ptr, ec] = std::from_chars(header->data(), header->data() + header->size(), v);
  if (ec != std::errc() || ptr != header->data() + header->size() || v < 0) return std::nullopt;
  return std::min(v, 60.0);
}

}  // namespace

json verdict_request(const std::string &task_id, std::string_view response,
                     const evaluator::EvaluatorSettings &s, double deadline_s) {
  json settings = {{"gpu", s.run_gpu},
                   {"sanitizer", s.run_sanitizer},
                   {"hidden_workloads",
                    {{"check", s.hidden.check}, {"time", s.hidden.time}, {"reveal", s.hidden.reveal}}}};
  if (s.run_seed != 0) settings["seed"] = s.run_seed;
  if (s.num_sms > 0) settings["num_sms"] = s.num_sms;
  return {{"task", task_id},
          {"response", std::string(response)},
          {"settings", settings},
          {"deadline_seconds", deadline_s}};
}

util::Expected<std::unique_ptr<ServiceClient>> ServiceClient::connect(const EvaluatorService &config,
                                                                      const std::atomic<bool> *cancel) {
  std::string token = config.token;
  if (!config.token_env.empty()) {
    const char *value = std::getenv(config.token_env.c_str());
    if (value == nullptr || *value == '\0')
      return util::unexpected(
          fmt::format("evaluator.token_env: ${} is not set (it should hold the bearer token of {})",
                      config.token_env, config.url));
    token = value;
  }
  std::unique_ptr<ServiceClient> client(new ServiceClient(config, std::move(token), cancel));
  llm::HttpRequest request;
  request.url = config.url + "/healthz";
  request.timeout_s = 10;
  auto answer = client->send(request);
  if (!answer)
    return util::unexpected(fmt::format("evaluator.url: the service at {} does not answer: {}", config.url,
                                        answer.error().message));
  try {
    client->health_ = json::parse(answer->body);
    if (answer->status != 200 || !client->health_.is_object() || !client->health_.contains("status"))
      throw std::runtime_error("not /healthz's JSON");
  } catch (const std::exception &) {
    return util::unexpected(
        fmt::format("evaluator.url: {}/healthz answered HTTP {} with '{}', not a ptxbench serve's health",
                    config.url, answer->status, answer->body.substr(0, 200)));
  }
  // /healthz needs no token; the queue does, so a missing or wrong token is found before the first answer.
  request.url = config.url + "/v1/queue";
  auto queue = client->send(request);
  if (!queue)
    return util::unexpected(fmt::format("evaluator.url: GET {}: {}", request.url, queue.error().message));
  if (queue->status == 401 || queue->status == 403)
    return util::unexpected(
        fmt::format("evaluator.url: the service at {} refused {} (HTTP {}); {}", config.url,
                    client->token_.empty() ? "a request without a token" : "the token", queue->status,
                    config.token_env.empty() ? "name the variable holding its token in evaluator.token_env"
                                             : "check $" + config.token_env));
  if (queue->status != 200)
    return util::unexpected(
        fmt::format("evaluator.url: GET {}: HTTP {}: {}", request.url, queue->status, error_text(*queue)));
  return client;
}

traces::EvaluatorServiceRecord ServiceClient::record() const {
  traces::EvaluatorServiceRecord r{.url = config_.url,
                                   .authenticated = !token_.empty(),
                                   .deadline_seconds = config_.deadline_s,
                                   .retry_seconds = config_.retry_s,
                                   .in_flight = config_.in_flight,
                                   .version = health_.value("version", ""),
                                   .gpu_stages = health_.value("gpu_stages", json())};
  if (!config_.token_env.empty()) r.token_env = config_.token_env;
  return r;
}

util::Expected<llm::HttpResponse, ServiceFailure> ServiceClient::send(llm::HttpRequest request) const {
  if (!token_.empty()) request.headers.push_back("Authorization: Bearer " + token_);
  request.cancel = cancel_;
  std::optional<Clock::time_point> first_failure;
  thread_local std::mt19937_64 rng{std::random_device{}()};
  for (int attempt = 0;; ++attempt) {
    if (cancel_ != nullptr && cancel_->load())
      return util::unexpected(ServiceFailure{ServiceFailure::Kind::cancelled, "cancelled"});
    auto answer = llm::http_request(request);
    std::string why;
    std::optional<double> hint;
    if (!answer) {
      if (answer.error().cancelled)
        return util::unexpected(ServiceFailure{ServiceFailure::Kind::cancelled, "cancelled"});
      why = answer.error().message;
    } else if (retryable(answer->status)) {
      why =
          fmt::format("{} {}: HTTP {}: {}", request.method, request.url, answer->status, error_text(*answer));
      hint = retry_after_s(answer->retry_after);
    } else {
      return std::move(*answer);
    }
    if (!first_failure) first_failure = Clock::now();
    const double failing_s = seconds_since(*first_failure);
    if (failing_s >= config_.retry_s)
      return util::unexpected(ServiceFailure{
          ServiceFailure::Kind::unavailable,
          fmt::format("{} (failing for {:.0f} s, {} attempt(s); evaluator.retry_seconds is {:g})", why,
                      failing_s, attempt + 1, config_.retry_s)});
    const double backoff = std::min(10.0, 0.25 * double(1 << std::min(attempt, 6))) *
                           std::uniform_real_distribution<double>(0.8, 1.2)(rng);
    const auto until =
        Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(
                           std::min(hint.value_or(backoff), config_.retry_s - failing_s + 0.05)));
    while (Clock::now() < until) {
      if (cancel_ != nullptr && cancel_->load())
        return util::unexpected(ServiceFailure{ServiceFailure::Kind::cancelled, "cancelled"});
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
}

util::Expected<evaluator::Verdict, ServiceFailure> ServiceClient::evaluate(
    const std::string &task_id, std::string_view response,
    const evaluator::EvaluatorSettings &settings) const {
  using Kind = ServiceFailure::Kind;
  const auto started = Clock::now();
  llm::HttpRequest post;
  post.method = "POST";
  post.url = config_.url + "/v1/verdicts";
  post.body = verdict_request(task_id, response, settings, config_.deadline_s).dump();
  post.timeout_s = 60;
  auto submitted = send(post);
  if (!submitted) return util::unexpected(submitted.error());
  if (submitted->status / 100 != 2)
    return util::unexpected(ServiceFailure{
        Kind::refused,
        fmt::format("POST {}: HTTP {}: {}", post.url, submitted->status, error_text(*submitted))});
  std::string id;
  try {
    id = json::parse(submitted->body).at("id").get<std::string>();
  } catch (const std::exception &) {
    return util::unexpected(
        ServiceFailure{Kind::garbage, fmt::format("POST {}: HTTP {} without a request id: '{}'", post.url,
                                                  submitted->status, submitted->body.substr(0, 200))});
  }
  if (id.empty() || id.find_first_of("/?#% ") != std::string::npos)
    return util::unexpected(ServiceFailure{
        Kind::garbage, fmt::format("POST {}: a request id '{}' that is no path", post.url, id)});

  const double give_up_s = config_.deadline_s + kDeadlineMarginS;
  while (true) {
    const double left = give_up_s - seconds_since(started);
    if (left <= 0)
      return util::unexpected(
          ServiceFailure{Kind::unavailable,
                         fmt::format("request {} at {} has no final state {:g} s after its deadline ({:g} s)",
                                     id, config_.url, kDeadlineMarginS, config_.deadline_s)});
    const double wait = std::clamp(left, 1.0, kPollWaitS);
    llm::HttpRequest get;
    get.url = fmt::format("{}/v1/verdicts/{}?wait={:.0f}", config_.url, id, wait);
    get.timeout_s = wait + 15;
    auto polled = send(get);
    if (!polled) return util::unexpected(polled.error());
    if (polled->status == 404)
      return util::unexpected(ServiceFailure{
          Kind::unavailable,
          fmt::format(
              "GET {}: the service no longer knows request {} (restarted, or a balancer sent the poll to "
              "another node)",
              get.url, id)});
    if (polled->status != 200)
      return util::unexpected(ServiceFailure{
          Kind::refused, fmt::format("GET {}: HTTP {}: {}", get.url, polled->status, error_text(*polled))});
    try {
      const json state = json::parse(polled->body);
      if (!state.at("final").get<bool>()) continue;
      const std::string s = state.at("state").get<std::string>();
      if (s == "error")
        return util::unexpected(ServiceFailure{
            Kind::refused,
            fmt::format("the service could not evaluate request {}: {}", id, state.value("error", "?"))});
      evaluator::Verdict verdict = evaluator::Verdict::from_json(state.at("verdict"));
      if (verdict.task_id != task_id)
        throw std::runtime_error(
            fmt::format("the verdict is for task '{}', not '{}'", verdict.task_id, task_id));
      return verdict;
    } catch (const std::exception &e) {
      return util::unexpected(
          ServiceFailure{Kind::garbage, fmt::format("GET {}: not a verdict state: {} ('{}')", get.url,
                                                    e.what(), polled->body.substr(0, 200))});
    }
  }
}

}  // namespace ptxbench::agent::detail
