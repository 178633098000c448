// The run loop's side of a remote evaluator (`evaluator.url`, a `ptxbench serve` or a balancer in front of
// several): each answer is POSTed to /v1/verdicts with the run's per-request settings and its deadline, then
// fetched with blocking GETs (?wait=) until final. An unreachable service, a 429 and a 5xx are retried
// (Retry-After, else exponential backoff) for EvaluatorService::retry_s; what the service sends back is read
// with the evaluator's own Verdict codec, so records are the same as a local run's. Every call is bounded:
// no transfer outlives its time limit and no answer is waited on past its deadline plus a margin.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "agent/detail/run_config_types.hpp"
#include "evaluator/evaluator.hpp"
#include "llm_clients/http.hpp"
#include "traces/run_record.hpp"
#include "util/expected.hpp"

namespace ptxbench::agent::detail {

struct ServiceFailure {
  enum class Kind {
    unavailable,  ///< unreachable, or 429/5xx, for longer than retry_s; or no final state by the deadline
    refused,      ///< a 4xx: the request itself is wrong for the service (unknown task, token, ...)
    garbage,      ///< an answer that is not the documented JSON, or a verdict the codec refuses
    cancelled,    ///< the run is stopping
  } kind = Kind::unavailable;
  std::string message;
};

class ServiceClient {
 public:
  /// Checks GET /healthz (retried like any request). The token: `token`, else $token_env (which must be set).
  static util::Expected<std::unique_ptr<ServiceClient>> connect(const EvaluatorService &config,
                                                                const std::atomic<bool> *cancel);

  /// The verdict of one answer. `settings`: the run's; the service is sent its per-request subset (seed,
  /// gpu, hidden workloads, num_sms, sanitizer) and uses its own paths and limits.
  util::Expected<evaluator::Verdict, ServiceFailure> evaluate(
      const std::string &task_id, std::string_view response,
      const evaluator::EvaluatorSettings &settings) const;

  /// /healthz as the service answered it at connect (version, gpu_stages).
  const nlohmann::json &health() const { return health_; }
  /// For run.json: url, token_env (a name, never the token), deadline, version and GPU stages of the service.
  traces::EvaluatorServiceRecord record() const;

 private:
  ServiceClient(EvaluatorService config, std::string token, const std::atomic<bool> *cancel)
      : config_(std::move(config)), token_(std::move(token)), cancel_(cancel) {}
  /// One request, retried on transport failures, 429 and 5xx until `retry_until`; the last answer otherwise.
  util::Expected<llm::HttpResponse, ServiceFailure> send(llm::HttpRequest request) const;

  EvaluatorService config_;
  std::string token_;
  const std::atomic<bool> *cancel_ = nullptr;
  nlohmann::json health_;
};

/// The JSON body of POST /v1/verdicts for one answer (docs/openapi.yaml, VerdictRequest).
nlohmann::json verdict_request(const std::string &task_id, std::string_view response,
                               const evaluator::EvaluatorSettings &settings, double deadline_s);

}  // namespace ptxbench::agent::detail
