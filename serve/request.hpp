// The body of POST /v1/verdicts -> validated submissions. Malformed input is a value naming the field
// (e.g. "requests[3].settings.seed"), answered with HTTP 400; nothing in it reaches a shell or a path.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "evaluator/evaluator.hpp"
#include "serve/service.hpp"
#include "tasks/task.hpp"
#include "util/expected.hpp"

namespace ptxbench::serve {

struct RequestError {
  std::string field;  ///< where in the body, e.g. "requests[2].task"; "" = the body itself
  std::string message;
};

/// One request object ({task, response | kernel, settings?, deadline_seconds?}) or a batch
/// ({requests: [...]}). `base`: the service's settings, which a request's `settings` may adjust
/// (gpu off, seed, hidden_workloads, num_sms, sanitizer) but never paths or limits.
util::Expected<std::vector<Submission>, RequestError> parse_submissions(
    const nlohmann::json &body, const std::vector<tasks::Task> &tasks,
    const evaluator::EvaluatorSettings &base, const ServiceOptions &options);

/// The model text for a kernel given apart from prose: the fenced kernel block and the manifest block,
/// as the response parser reads them. Error: a fence inside the source or manifest.
util::Expected<std::string, RequestError> response_from_kernel(const nlohmann::json &kernel,
                                                               const std::string &field);

}  // namespace ptxbench::serve
