#include "serve/request.hpp"

#include <cmath>
#include <cstdint>
#include <set>

#include <fmt/core.h>
#include <fmt/ranges.h>

namespace ptxbench::serve {

using nlohmann::json;

namespace {

util::Unexpected<RequestError> fail(std::string field, std::string message) {
  return util::unexpected(RequestError{std::move(field), std::move(message)});
}

std::string join_field(const std::string &prefix, const std::string &key) {
  return prefix.empty() ? key : prefix + "." + key;
}

util::Expected<void, RequestError> only_keys(const json &object, const std::set<std::string> &known,
                                             const std::string &prefix) {
  for (const auto &[key, value] : object.items())
    if (!known.contains(key))
      return fail(join_field(prefix, key), fmt::format("unknown field (known: {})", fmt::join(known, ", ")));
  return {};
}

util::Expected<bool, RequestError> get_bool(const json &object, const char *key, const std::string &prefix) {
  const json &v = object.at(key);
  if (!v.is_boolean()) return fail(join_field(prefix, key), "must be true or false");
  return v.get<bool>();
}

/// The request's `settings`: what a client may choose per request.
util::Expected<void, RequestError> apply_settings(const json &s, evaluator::EvaluatorSettings &settings,
                                                  const std::string &prefix) {
  if (!s.is_object()) return fail(prefix, "must be an object");
  if (auto ok = only_keys(s, {"gpu", "seed", "hidden_workloads", "num_sms", "sanitizer"}, prefix); !ok)
    return util::unexpected(ok.error());
  if (s.contains("gpu")) {
    auto b = get_bool(s, "gpu", prefix);
    if (!b) return util::unexpected(b.error());
    settings.run_gpu = settings.run_gpu && *b;  // a request can turn the GPU stages off, never on
  }
  if (s.contains("sanitizer")) {
    auto b = get_bool(s, "sanitizer", prefix);
    if (!b) return util::unexpected(b.error());
    settings.run_sanitizer = *b;
  }
  if (s.contains("seed")) {
    const json &v = s["seed"];
    if (!v.is_number_unsigned() || v.get<std::uint64_t>() == 0 || v.get<std::uint64_t>() > (1ull << 53))
      return fail(join_field(prefix, "seed"), "must be an integer from 1 to 2^53");
    settings.run_seed = v.get<std::uint64_t>();
  }
  if (s.contains("num_sms")) {
    const json &v = s["num_sms"];
    if (!v.is_number_integer() || v.get<std::int64_t>() < 0 || v.get<std::int64_t>() > 100000)
      return fail(join_field(prefix, "num_sms"), "must be an integer from 0 to 100000 (0 = the task's GPU)");
    settings.num_sms = static_cast<int>(v.get<std::int64_t>());
  }
  if (s.contains("hidden_workloads")) {
    const std::string p = join_field(prefix, "hidden_workloads");
    const json &h = s["hidden_workloads"];
    if (!h.is_object()) return fail(p, "must be an object {check, time, reveal}");
    if (auto ok = only_keys(h, {"check", "time", "reveal"}, p); !ok) return util::unexpected(ok.error());
    for (auto [key, slot] :
         {std::pair{"check", &settings.hidden.check}, std::pair{"time", &settings.hidden.time},
          std::pair{"reveal", &settings.hidden.reveal}}) {
      if (!h.contains(key)) continue;
      auto b = get_bool(h, key, p);
      if (!b) return util::unexpected(b.error());
      *slot = *b;
    }
  }
  return {};
}

util::Expected<Submission, RequestError> parse_one(const json &item, const std::vector<tasks::Task> &tasks,
                                                   const evaluator::EvaluatorSettings &base,
                                                   const ServiceOptions &options, const std::string &prefix) {
  if (!item.is_object())
    return fail(prefix, "must be an object {task, response | kernel, settings, deadline_seconds}");
  if (auto ok = only_keys(item, {"task", "response", "kernel", "settings", "deadline_seconds"}, prefix); !ok)
    return util::unexpected(ok.error());
  Submission s;
  if (!item.contains("task"))
    return fail(join_field(prefix, "task"), "missing (a task id, see GET /v1/tasks)");
  const json &task = item["task"];
  if (!task.is_string()) return fail(join_field(prefix, "task"), "must be a string");
  s.task = tasks::find_task(tasks, task.get<std::string>());
  if (!s.task) {
    auto near = tasks::similar_task_ids(tasks, task.get<std::string>());
    return fail(join_field(prefix, "task"),
                fmt::format("unknown task{}",
                            near.empty() ? "" : fmt::format(" (did you mean: {}?)", fmt::join(near, ", "))));
  }
  const bool has_response = item.contains("response"), has_kernel = item.contains("kernel");
  if (has_response == has_kernel)
    return fail(join_field(prefix, "response"), "give exactly one of response (the model's text) and kernel");
  if (has_response) {
    if (!item["response"].is_string()) return fail(join_field(prefix, "response"), "must be a string");
    s.text = item["response"].get<std::string>();
  } else {
    auto text = response_from_kernel(item["kernel"], join_field(prefix, "kernel"));
    if (!text) return util::unexpected(text.error());
    s.text = std::move(*text);
  }
  s.settings = base;
  if (item.contains("settings"))
    if (auto ok = apply_settings(item["settings"], s.settings, join_field(prefix, "settings")); !ok)
      return util::unexpected(ok.error());
  s.deadline_s = options.default_deadline_s;
  if (item.contains("deadline_seconds")) {
    const json &d = item["deadline_seconds"];
    if (!d.is_number() || !std::isfinite(d.get<double>()) || d.get<double>() <= 0 ||
        d.get<double>() > options.max_deadline_s)
      return fail(
          join_field(prefix, "deadline_seconds"),
          fmt::format("must be a number of seconds above 0 and at most {:g}", options.max_deadline_s));
    s.deadline_s = d.get<double>();
  }
  return s;
}

}  // namespace

util::Expected<std::string, RequestError> response_from_kernel(const json &kernel, const std::string &field) {
  if (!kernel.is_object()) return fail(field, "must be an object {language, source, manifest}");
  if (auto ok = only_keys(kernel, {"language", "source", "manifest"}, field); !ok)
    return util::unexpected(ok.error());
  std::string language = "ptx";
  if (kernel.contains("language")) {
    const json &l = kernel["language"];
    if (!l.is_string() || (l != "ptx" && l != "cuda"))
      return fail(field + ".language", "must be \"ptx\" or \"cuda\"");
    language = l.get<std::string>();
  }
  if (!kernel.contains("source") || !kernel["source"].is_string())
    return fail(field + ".source", "missing or not a string (the kernel's PTX or CUDA source)");
  const std::string source = kernel["source"].get<std::string>();
  if (source.find("```") != std::string::npos)
    return fail(field + ".source", "must not contain ``` (a fence)");
  if (!kernel.contains("manifest")) return fail(field + ".manifest", "missing (the launch manifest)");
  const json &m = kernel["manifest"];
  std::string manifest;
  if (m.is_object()) {
    manifest = m.dump(2);
  } else if (m.is_string()) {
    manifest = m.get<std::string>();
    if (manifest.find("```") != std::string::npos)
      return fail(field + ".manifest", "must not contain ``` (a fence)");
  } else {
    return fail(field + ".manifest", "must be an object or a string");
  }
  return fmt::format("```{}\n{}\n```\n\n```json\n{}\n```\n", language, source, manifest);
}

util::Expected<std::vector<Submission>, RequestError> parse_submissions(
    const json &body, const std::vector<tasks::Task> &tasks, const evaluator::EvaluatorSettings &base,
    const ServiceOptions &options) {
  if (!body.is_object()) return fail("", "the body must be a JSON object");
  std::vector<Submission> out;
  if (body.contains("requests")) {
    if (body.size() != 1) {
      for (const auto &[key, value] : body.items())
        if (key != "requests")
          return fail(key, "unknown field beside requests (a batch holds only requests)");
    }
    const json &list = body["requests"];
    if (!list.is_array() || list.empty()) return fail("requests", "must be a non-empty array of requests");
    if (list.size() > options.max_batch)
      return fail("requests",
                  fmt::format("{} requests; at most {} in one batch", list.size(), options.max_batch));
    for (std::size_t i = 0; i < list.size(); ++i) {
      auto s = parse_one(list[i], tasks, base, options, fmt::format("requests[{}]", i));
      if (!s) return util::unexpected(s.error());
      out.push_back(std::move(*s));
    }
    return out;
  }
  auto s = parse_one(body, tasks, base, options, "");
  if (!s) return util::unexpected(s.error());
  out.push_back(std::move(*s));
  return out;
}

}  // namespace ptxbench::serve
