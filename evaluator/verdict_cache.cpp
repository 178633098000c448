#include "evaluator/verdict_cache.hpp"

#include <algorithm>

#include "evaluator/candidate.hpp"
#include "evaluator/ptx.hpp"
#include "util/files.hpp"

namespace ptxbench::evaluator {

using nlohmann::json;

json verdict_settings(const EvaluatorSettings &settings) {
  json s = settings.to_json();
  for (const char *path : {"worker_path", "ptxas_path", "disassembler_path", "nvrtc_child_path", "lock_dir"})
    s.erase(path);
  if (s.contains("worker")) {
    s["worker"].erase("prestart");
    s["worker"].erase("prestart_cupti");
    s["worker"].erase("wait_for_exit");
    s["worker"].erase("selection_cache_dir");
  }
  return s;
}

std::optional<std::string> VerdictCache::key(const tasks::Task &task, std::string_view response,
                                             const EvaluatorSettings &settings) const {
  return key(task, parse_candidate(task, response, settings), settings);
}

std::optional<std::string> VerdictCache::key(const tasks::Task &task, const ParsedCandidate &parsed,
                                             const EvaluatorSettings &settings) const {
  if (!parsed.parsed()) return std::nullopt;
  // The plans carry the workspace size and num_sms, so a different SM count never reuses a verdict.
  json plans = json::array();
  for (const auto &plan : parsed.plans) plans.push_back(plan);
  // Manifests that agree on the shown workloads can differ on the hidden ones (a grid written for the
  // headline shape): their plans, or why they do not resolve, are part of the key, in the task's order.
  for (const auto &w : task.hidden_workloads) {
    const auto plan = std::find_if(parsed.hidden_plans.begin(), parsed.hidden_plans.end(),
                                   [&](const LaunchPlan &p) { return p.workload == w.name; });
    if (plan != parsed.hidden_plans.end())
      plans.push_back(*plan);
    else
      plans.push_back(
          {{"unresolved", parsed.hidden_plan_errors.count(w.name) ? parsed.hidden_plan_errors.at(w.name)
                                                                  : std::string("not resolved")}});
  }
  std::string kernel;
  const ParsedResponse &r = parsed.response;
  if (r.language == KernelLanguage::ptx) {
    auto module = parse_ptx(r.kernel_source);
    kernel = module ? "ptx " + module->normalized_hash : "ptx-source " + util::fnv1a64_hex(r.kernel_source);
  } else {
    kernel = "cuda " + util::fnv1a64_hex(r.kernel_source);
  }
  const json material = {
      {"kernel", kernel},       {"entry", parsed.manifest.entry},         {"plans", plans},
      {"task", task.to_json()}, {"settings", verdict_settings(settings)}, {"environment", environment_}};
  return kernel + " " + util::fnv1a64_hex(material.dump());
}

std::optional<Verdict> VerdictCache::get(const std::string &key) const {
  std::lock_guard lock(mutex_);
  auto it = entries_.find(key);
  if (it == entries_.end()) return std::nullopt;
  Verdict v = it->second.first;
  v.reused_from = {{"origin", it->second.second}, {"key", key}};
  v.profile = json::object();
  v.wall_seconds = 0;
  return v;
}

void VerdictCache::put(const std::string &key, const Verdict &verdict, const std::string &origin) {
  // A verdict that reflects the machine rather than the kernel is made again next time.
  if (verdict.machine_fault) return;
  std::lock_guard lock(mutex_);
  entries_.try_emplace(key, verdict, origin);
}

std::size_t VerdictCache::size() const {
  std::lock_guard lock(mutex_);
  return entries_.size();
}

}  // namespace ptxbench::evaluator
