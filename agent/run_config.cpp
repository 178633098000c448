#include "agent/run_config.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <set>

#include <fmt/core.h>

#include "agent/detail/json_fields.hpp"
#include "evaluator/protocol/error.hpp"
#include "util/enum_names.hpp"
#include "util/files.hpp"

namespace ptxbench::agent {

namespace fs = std::filesystem;
using detail::FieldReader;

namespace {
constexpr util::EnumName<HistoryPolicy> kHistoryPolicyNames[] = {
    {HistoryPolicy::full, "full"},
    {HistoryPolicy::last_attempt, "last_attempt"},
    {HistoryPolicy::none, "none"}};
}  // namespace

std::string to_string(HistoryPolicy p) {
  return std::string(util::enum_to_string(kHistoryPolicyNames, p));
}

std::optional<HistoryPolicy> history_policy_from_string(std::string_view s) {
  return util::enum_from_string(kHistoryPolicyNames, s);
}

bool StopTarget::reached(const evaluator::Axes &axes) const {
  if (!any()) return false;
  if (correct && axes.correct != true) return false;
  if (targets_executed && axes.targets_executed != true) return false;
  if (min_speedup && !(axes.speedup && *axes.speedup >= *min_speedup)) return false;
  return true;
}

namespace {

constexpr int kIntMax = std::numeric_limits<int>::max();

fs::path resolve(const fs::path &base, const std::string &p) {
  if (p.empty()) return {};
  fs::path path(p);
  return path.is_absolute() ? path : (base / path).lexically_normal();
}

/// A policy object read by the protocol's one reader (evaluator/protocol/policies.hpp); its error names
/// the field under this reader's path.
template <class Policy>
void read_policy(FieldReader &r, std::string_view key, Policy &policy) {
  const auto *j = r.get(key);
  if (!j) return;
  try {
    policy = j->get<Policy>();
  } catch (const protocol::ProtocolError &e) {
    r.error(e.field().empty() ? std::string(key) : std::string(key) + "." + e.field(), e.message());
  }
}

void parse_sampling(FieldReader &r, llm::SamplingParams &s) {
  r.read("temperature", s.temperature, 0.0);
  r.read("top_p", s.top_p, 0.0);
  r.read("max_tokens", s.max_tokens, 1);
  r.read("seed", s.seed);
  r.read("stop", s.stop);
}

nlohmann::json sampling_to_json(const llm::SamplingParams &s) {
  nlohmann::json j = nlohmann::json::object();
  if (s.temperature) j["temperature"] = *s.temperature;
  if (s.top_p) j["top_p"] = *s.top_p;
  if (s.max_tokens) j["max_tokens"] = *s.max_tokens;
  if (s.seed) j["seed"] = *s.seed;
  if (!s.stop.empty()) j["stop"] = s.stop;
  return j;
}

void parse_variant(const nlohmann::json &j, const std::string &path, const fs::path &base,
                   std::vector<std::string> &errors, Variant &v) {
  FieldReader r(j, path, errors);
  r.read("name", v.name);
  if (v.name.empty()) r.error("name", "every variant needs a non-empty \"name\"");
  std::string prompt_dir;
  r.read("prompt_dir", prompt_dir);
  v.prompt_dir = resolve(base, prompt_dir);
  r.read("target_notes", v.target_notes);
  r.read("packs", v.packs);
  if (const auto *h = r.get("history")) {
    const auto p = h->is_string() ? history_policy_from_string(h->get<std::string>()) : std::nullopt;
    if (p) {
      v.history = *p;
    } else {
      r.error("history",
              "expected \"full\", \"last_attempt\" or \"none\", got " + detail::describe_json_value(*h));
    }
  }
  r.read("turns", v.turns, 1);
  if (const auto *p = r.get("profile")) {
    if (p->is_boolean())
      v.profile = p->get<bool>();
    else
      r.error("profile", "expected true or false, got " + detail::describe_json_value(*p));
  }
  if (const auto *s = r.get("sampling")) {
    FieldReader sr(*s, path + ".sampling", errors);
    parse_sampling(sr, v.sampling);
    sr.finish();
  }
  r.finish();
}

void parse_endpoint(const nlohmann::json &j, const std::string &path, const fs::path &base,
                    std::vector<std::string> &errors, std::optional<int> default_in_flight,
                    llm::EndpointConfig &e) {
  if (!j.is_object()) {
    errors.push_back(
        fmt::format("{}: expected an endpoint object, got {}", path, detail::describe_json_value(j)));
    return;
  }
  if (j.contains("api_key")) {
    errors.push_back(
        fmt::format("{}.api_key: keys are never stored in a config; put the key in an environment "
                    "variable and name it in \"api_key_env\"",
                    path));
    return;
  }
  nlohmann::json object = j;
  // Scripted files are relative to the config file; a run-wide in-flight default fills the gap.
  if (auto it = object.find("scripted_file");
      it != object.end() && it->is_string() && !it->get<std::string>().empty()) {
    *it = resolve(base, it->get<std::string>()).string();
  }
  if (default_in_flight && !object.contains("max_in_flight")) object["max_in_flight"] = *default_in_flight;
  auto parsed = llm::endpoint_config_from_json(object, path);
  if (!parsed) {
    errors.push_back(parsed.error());
    return;
  }
  e = std::move(parsed.value());
  if (e.name.empty()) e.name = !e.model.empty() ? e.model : e.kind;
  if (e.model.empty()) e.model = e.name;
}

/// Where the parse is: the errors so far (each "<path>: <what>") and the config file's folder, against
/// which relative paths are resolved.
struct ParseContext {
  std::vector<std::string> &errors;
  const fs::path &base_dir;
};

void parse_gpus(FieldReader &r, const nlohmann::json &g, std::vector<std::string> &errors,
                std::vector<int> &gpus) {
  if (!g.is_array()) {
    r.error("gpus", "expected an array of GPU ordinals, got " + detail::describe_json_value(g));
    return;
  }
  for (std::size_t i = 0; i < g.size(); ++i) {
    const auto &x = g[i];
    if (!x.is_number_integer() || x.get<std::int64_t>() < 0 || x.get<std::int64_t>() > 1023) {
      errors.push_back(fmt::format("concurrency.gpus[{}]: expected a GPU ordinal >= 0, got {}", i,
                                   detail::describe_json_value(x)));
    } else {
      gpus.push_back(x.get<int>());
    }
  }
}

/// "concurrency"; returns requests_per_endpoint, the endpoints' default max_in_flight.
std::optional<int> parse_concurrency(FieldReader &root, ParseContext &ctx, Concurrency &c) {
  std::optional<int> requests_per_endpoint;
  const auto *conc = root.get("concurrency");
  if (!conc) return requests_per_endpoint;
  FieldReader r(*conc, "concurrency", ctx.errors);
  r.read("requests_per_endpoint", requests_per_endpoint, 1);
  r.read("compile_workers", c.compile_workers, 0, 1024);
  if (const auto *g = r.get("gpus")) parse_gpus(r, *g, ctx.errors, c.gpus);
  r.read("endpoint_failures_before_dead", c.endpoint_failures_before_dead, 1, kIntMax);
  std::string scope = to_string(c.in_flight_scope);
  r.read("in_flight_scope", scope);
  if (auto parsed = in_flight_scope_from_string(scope)) {
    c.in_flight_scope = *parsed;
  } else {
    r.error("in_flight_scope", fmt::format("expected \"shard\" or \"run\", got \"{}\"", scope));
  }
  r.finish();
  return requests_per_endpoint;
}

void parse_endpoints(FieldReader &root, ParseContext &ctx, std::optional<int> requests_per_endpoint,
                     std::vector<llm::EndpointConfig> &endpoints) {
  const auto *eps = root.get("endpoints");
  if (!eps) return;
  if (!eps->is_array()) {
    root.error("endpoints",
               "expected an array of endpoint objects, got " + detail::describe_json_value(*eps));
    return;
  }
  for (std::size_t i = 0; i < eps->size(); ++i) {
    llm::EndpointConfig e;
    parse_endpoint((*eps)[i], fmt::format("endpoints[{}]", i), ctx.base_dir, ctx.errors,
                   requests_per_endpoint, e);
    endpoints.push_back(std::move(e));
  }
}

/// The top level's plain fields: tasks, folders, samples, turns, verdict reuse, history.
void parse_run_shape(FieldReader &root, ParseContext &ctx, RunConfig &c) {
  root.read("tasks", c.tasks);
  std::string task_dir, prompt_dir, out_dir;
  root.read("task_dir", task_dir);
  c.task_dir = resolve(ctx.base_dir, task_dir);
  root.read("prompt_dir", prompt_dir);
  c.prompt_dir = resolve(ctx.base_dir, prompt_dir);
  root.read("out_dir", out_dir);
  c.out_dir = out_dir;  // relative to the current directory, like --out
  root.read("samples", c.samples, 1, 100000);
  root.read("turns", c.turns, 1, 1000);
  root.read("reuse_verdicts", c.reuse_verdicts);
  std::string history = to_string(c.history);
  root.read("history", history);
  if (auto p = history_policy_from_string(history)) {
    c.history = *p;
  } else {
    ctx.errors.push_back(
        fmt::format("history: expected \"full\", \"last_attempt\" or \"none\", got \"{}\"", history));
  }
}

void parse_stop(FieldReader &root, ParseContext &ctx, StopTarget &stop) {
  const auto *j = root.get("stop");
  if (!j) return;
  if (j->is_null()) {
    stop = StopTarget{false, false, std::nullopt};
    return;
  }
  FieldReader r(*j, "stop", ctx.errors);
  r.read("correct", stop.correct);
  r.read("targets_executed", stop.targets_executed);
  r.read("min_speedup", stop.min_speedup, 0.0);
  r.finish();
}

void parse_run_sampling(FieldReader &root, ParseContext &ctx, llm::SamplingParams &sampling) {
  if (const auto *s = root.get("sampling")) {
    FieldReader r(*s, "sampling", ctx.errors);
    parse_sampling(r, sampling);
    r.finish();
  }
}

void parse_prices(FieldReader &root, ParseContext &ctx, std::map<std::string, EndpointPrice> &prices) {
  const auto *j = root.get("prices");
  if (!j) return;
  if (!j->is_object()) {
    root.error("prices",
               "expected an object {endpoint name: {prompt_usd_per_mtok, completion_usd_per_mtok}}, got " +
                   detail::describe_json_value(*j));
    return;
  }
  for (const auto &[name, entry] : j->items()) {
    FieldReader r(entry, "prices." + name, ctx.errors);
    EndpointPrice p;
    r.read("prompt_usd_per_mtok", p.prompt_usd_per_mtok, 0.0);
    r.read("completion_usd_per_mtok", p.completion_usd_per_mtok, 0.0);
    r.finish();
    prices[name] = p;
  }
}

void parse_variants(FieldReader &root, ParseContext &ctx, std::vector<Variant> &variants) {
  const auto *vs = root.get("variants");
  if (!vs) return;
  if (!vs->is_array()) {
    root.error("variants", "expected an array of variant objects, got " + detail::describe_json_value(*vs));
    return;
  }
  for (std::size_t i = 0; i < vs->size(); ++i) {
    Variant v;
    parse_variant((*vs)[i], fmt::format("variants[{}]", i), ctx.base_dir, ctx.errors, v);
    variants.push_back(std::move(v));
  }
}

void parse_repairs(FieldReader &root, ParseContext &ctx, std::optional<RepairsConfig> &repairs) {
  const auto *rep = root.get("repairs");
  if (rep == nullptr || rep->is_null()) return;
  FieldReader r(*rep, "repairs", ctx.errors);
  RepairsConfig rc;
  std::string seeds_file;
  r.read("seeds_file", seeds_file);
  if (seeds_file.empty()) r.error("seeds_file", "a repairs run needs its seeds file (repair_seeds.jsonl)");
  rc.seeds_file = resolve(ctx.base_dir, seeds_file);
  r.read("seeds_hash", rc.seeds_hash);
  r.read("synthesize_reasoning", rc.synthesize_reasoning);
  r.read("student_runs", rc.student_runs);
  r.read_object("selection", rc.selection);
  r.finish();
  repairs = std::move(rc);
}

void parse_budgets(FieldReader &root, ParseContext &ctx, TokenBudgets &budgets) {
  if (const auto *b = root.get("budgets")) {
    FieldReader r(*b, "budgets", ctx.errors);
    r.read("tokens_per_trajectory", budgets.per_trajectory, 0);
    r.read("tokens_per_run", budgets.per_run, 0);
    r.finish();
  }
}

/// "evaluator": the local evaluator's settings (flat older fields, then the policies' own forms).
void parse_evaluator_settings(FieldReader &r, ParseContext &ctx, evaluator::EvaluatorSettings &s) {
  r.read("run_gpu", s.run_gpu);
  r.read("run_sanitizer", s.run_sanitizer);
  r.read("num_sms", s.num_sms, 0, 100000);  // 0 = the task's reference GPU (tasks/arch.hpp)
  r.read("run_seed", s.run_seed);           // 0 = drawn when the run starts (recorded in run.json)
  if (const auto *h = r.get("hidden_workloads")) {
    FieldReader hr(*h, "evaluator.hidden_workloads", ctx.errors);
    hr.read("check", s.hidden.check);
    hr.read("time", s.hidden.time);
    hr.read("reveal", s.hidden.reveal);
    hr.finish();
  }
  std::string worker, lock_dir;
  r.read("worker_path", worker);
  if (!worker.empty()) s.worker_path = resolve(ctx.base_dir, worker);
  r.read("lock_dir", lock_dir);
  if (!lock_dir.empty()) s.lock_dir = resolve(ctx.base_dir, lock_dir);
  // Older configs give the worker's limits as flat fields; `worker` (below) is the policy's own form.
  r.read("worker_wall_ms", s.worker.wall);
  r.read("kernel_hang_ms", s.worker.kernel_hang);
  r.read("incorrect_execution_budget_ms", s.worker.incorrect_execution_budget);
  r.read("prestart_workers", s.worker.prestart);
  r.read("ptxas_wall_ms", s.compile.ptxas_wall);
  read_policy(r, "worker", s.worker);
  read_policy(r, "correctness", s.correctness);
  read_policy(r, "timing", s.timing);
  read_policy(r, "profile", s.profile);
}

/// "evaluator": a remote `ptxbench serve` instead (url, token, deadlines).
void parse_evaluator_service(FieldReader &r, EvaluatorService &service) {
  r.read("url", service.url);
  if (!service.url.empty() && !service.url.starts_with("http://") && !service.url.starts_with("https://"))
    r.error("url", "expected an http:// or https:// URL of a `ptxbench serve`, got \"" + service.url + "\"");
  while (service.url.ends_with("/")) service.url.pop_back();
  r.read("token_env", service.token_env);
  r.read("token", service.token);
  r.read("deadline_seconds", service.deadline_s, 0.001);
  r.read("retry_seconds", service.retry_s, 0.0);
  r.read("in_flight", service.in_flight, 1, 1024);
}

void parse_evaluator(FieldReader &root, ParseContext &ctx, RunConfig &c) {
  if (const auto *ev = root.get("evaluator")) {
    FieldReader r(*ev, "evaluator", ctx.errors);
    parse_evaluator_settings(r, ctx, c.evaluator);
    parse_evaluator_service(r, c.evaluator_service);
    r.finish();
  }
}

}  // namespace

util::Expected<RunConfig> parse_run_config(const nlohmann::json &j, const std::string &origin,
                                           const fs::path &base_dir) {
  std::vector<std::string> errors;
  ParseContext ctx{errors, base_dir};
  RunConfig c;
  FieldReader root(j, "", errors);
  // The sections in the order their errors are listed.
  const std::optional<int> requests_per_endpoint = parse_concurrency(root, ctx, c.concurrency);
  parse_endpoints(root, ctx, requests_per_endpoint, c.endpoints);
  parse_run_shape(root, ctx, c);
  parse_stop(root, ctx, c.stop);
  parse_run_sampling(root, ctx, c.sampling);
  parse_prices(root, ctx, c.prices);
  parse_variants(root, ctx, c.variants);
  parse_repairs(root, ctx, c.repairs);
  parse_budgets(root, ctx, c.budgets);
  parse_evaluator(root, ctx, c);
  root.finish();

  if (!errors.empty()) {
    std::string message;
    for (const auto &e : errors) message += (message.empty() ? "" : "\n") + origin + ": " + e;
    return util::unexpected(message);
  }
  return c;
}

util::Expected<RunConfig> load_run_config(const fs::path &file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) return util::unexpected(fmt::format("{}: cannot read the config file", file.string()));
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception &e) {  // also out_of_range (1e999)
    return util::unexpected(fmt::format("{}: not valid JSON: {}", file.string(), e.what()));
  }
  std::error_code ec;
  fs::path base = fs::absolute(file, ec).parent_path();
  return parse_run_config(j, file.string(), base);
}

util::Expected<void> validate(const RunConfig &c) {
  std::vector<std::string> problems;
  if (c.endpoints.empty())
    problems.push_back("no endpoints: give \"endpoints\" in the config or --endpoint/--model");
  std::set<std::string> names;
  for (const auto &e : c.endpoints) {
    if (!names.insert(e.name).second)
      problems.push_back(fmt::format("endpoint name '{}' is used twice", e.name));
    if (e.name.find('/') != std::string::npos) {
      problems.push_back(
          fmt::format("endpoint name '{}' must not contain '/' (it is part of trajectory ids)", e.name));
    }
    if (e.kind == "scripted" && e.scripted_file.empty()) {
      problems.push_back(fmt::format("endpoint '{}': a scripted endpoint needs \"scripted_file\"", e.name));
    }
    if (e.kind == "openai" && e.base_url.empty()) {
      problems.push_back(
          fmt::format("endpoint '{}': needs \"base_url\" (e.g. http://127.0.0.1:8000/v1)", e.name));
    }
  }
  for (const auto &[name, price] : c.prices) {
    (void)price;
    if (!names.count(name)) problems.push_back(fmt::format("prices: '{}' is not an endpoint name", name));
  }
  std::set<std::string> variant_names;
  for (const auto &v : c.variants) {
    if (!variant_names.insert(v.name).second)
      problems.push_back(fmt::format("variant name '{}' is used twice", v.name));
    if (v.name.find('/') != std::string::npos)
      problems.push_back(
          fmt::format("variant name '{}' must not contain '/' (it is part of trajectory ids)", v.name));
  }
  if (c.tasks.empty()) problems.push_back("no tasks: give task ids, \"core\" or \"all\"");
  if (c.repairs && !c.variants.empty())
    problems.push_back("a repairs run has no variants: the seeds fix the prompts");
  if (c.evaluator_service.enabled()) {
    for (const auto &v : c.variants)
      if (v.profile)
        problems.push_back(fmt::format(
            "variant '{}': \"profile\" cannot be chosen per variant with evaluator.url (the service decides "
            "the profile stage)",
            v.name));
    if (!c.evaluator_service.token_env.empty() && !c.evaluator_service.token.empty())
      problems.push_back("evaluator: give token_env or token, not both");
  } else if (!c.evaluator_service.token_env.empty() || !c.evaluator_service.token.empty()) {
    problems.push_back("evaluator: a token without evaluator.url");
  }
  if (c.samples < 1) problems.push_back("samples must be >= 1");
  if (c.turns < 1) problems.push_back("turns must be >= 1");
  if (problems.empty()) return {};
  std::string message;
  for (const auto &p : problems) message += (message.empty() ? "" : "\n") + p;
  return util::unexpected(message);
}

nlohmann::json RunConfig::prices_json() const {
  nlohmann::json j = nlohmann::json::object();
  for (const auto &[name, p] : prices)
    j[name] = {{"prompt_usd_per_mtok", p.prompt_usd_per_mtok},
               {"completion_usd_per_mtok", p.completion_usd_per_mtok}};
  return j;
}

nlohmann::json RunConfig::to_json() const {
  nlohmann::json eps = nlohmann::json::array();
  for (const auto &e : endpoints)
    eps.push_back(e.to_json_redacted());  // names the key variable, never the key
  const nlohmann::json sampling_json = sampling_to_json(sampling);
  nlohmann::json variants_json = nlohmann::json::array();
  for (const auto &v : variants) variants_json.push_back(v.to_json());
  nlohmann::json stop_json =
      nlohmann::json{{"correct", stop.correct}, {"targets_executed", stop.targets_executed}};
  stop_json["min_speedup"] = stop.min_speedup ? nlohmann::json(*stop.min_speedup) : nlohmann::json(nullptr);
  const auto &s = evaluator;
  nlohmann::json j = {
      {"endpoints", eps},
      {"tasks", tasks},
      {"task_dir", task_dir.string()},
      {"prompt_dir", prompt_dir.string()},
      {"samples", samples},
      {"turns", turns},
      {"reuse_verdicts", reuse_verdicts},
      {"history", to_string(history)},
      {"stop", stop_json},
      {"sampling", sampling_json},
      {"budgets", {{"tokens_per_trajectory", budgets.per_trajectory}, {"tokens_per_run", budgets.per_run}}},
      {"concurrency",
       {{"compile_workers", concurrency.compile_workers},
        {"gpus", concurrency.gpus},
        {"endpoint_failures_before_dead", concurrency.endpoint_failures_before_dead},
        {"in_flight_scope", to_string(concurrency.in_flight_scope)}}},
      {"evaluator",
       {{"run_gpu", s.run_gpu},
        {"run_sanitizer", s.run_sanitizer},
        {"worker_path", s.worker_path.string()},
        {"lock_dir", s.lock_dir.string()},
        {"ptxas_wall_ms", s.compile.ptxas_wall.count()},
        {"worker", s.worker},
        {"correctness", s.correctness},
        {"timing", s.timing}}},
      {"out_dir", out_dir.string()},
      {"prices", prices_json()},
      {"variants", variants_json}};
  // Only a repairs run has the key, so ordinary runs keep their config hash; likewise num_sms.
  if (repairs) j["repairs"] = repairs->to_json();
  if (s.num_sms > 0) j["evaluator"]["num_sms"] = s.num_sms;
  if (s.run_seed != 0) j["evaluator"]["run_seed"] = s.run_seed;
  // Likewise the hidden-workload settings, when not the defaults.
  if (s.hidden != evaluator::HiddenWorkloadSettings{})
    j["evaluator"]["hidden_workloads"] = {
        {"check", s.hidden.check}, {"time", s.hidden.time}, {"reveal", s.hidden.reveal}};
  if (s.profile != protocol::ProfilePolicy{}) j["evaluator"]["profile"] = s.profile;
  // Only a run on a service has these keys (ordinary runs keep their config hash); never the token itself.
  if (const auto &service = evaluator_service; service.enabled()) {
    j["evaluator"]["url"] = service.url;
    if (!service.token_env.empty()) j["evaluator"]["token_env"] = service.token_env;
    j["evaluator"]["deadline_seconds"] = service.deadline_s;
    j["evaluator"]["retry_seconds"] = service.retry_s;
    j["evaluator"]["in_flight"] = service.in_flight;
  }
  return j;
}

nlohmann::json RepairsConfig::to_json() const {
  return {{"seeds_file", seeds_file.string()},
          {"seeds_hash", seeds_hash},
          {"synthesize_reasoning", synthesize_reasoning},
          {"student_runs", student_runs},
          {"selection", selection}};
}

nlohmann::json Variant::to_json() const {
  nlohmann::json j = {{"name", name},
                      {"prompt_dir", prompt_dir.string()},
                      {"target_notes", target_notes},
                      {"packs", packs},
                      {"sampling", sampling_to_json(sampling)}};
  if (history) j["history"] = agent::to_string(*history);
  if (turns) j["turns"] = *turns;
  if (profile) j["profile"] = *profile;
  return j;
}

std::vector<Variant> RunConfig::arms() const {
  if (!variants.empty()) return variants;
  return {Variant{}};
}

llm::SamplingParams RunConfig::sampling_of(const Variant &v) const {
  llm::SamplingParams s = sampling;
  if (v.sampling.temperature) s.temperature = v.sampling.temperature;
  if (v.sampling.top_p) s.top_p = v.sampling.top_p;
  if (v.sampling.max_tokens) s.max_tokens = v.sampling.max_tokens;
  if (v.sampling.seed) s.seed = v.sampling.seed;
  if (!v.sampling.stop.empty()) s.stop = v.sampling.stop;
  return s;
}

util::Expected<void> select_variants(RunConfig &config, const std::vector<std::string> &names) {
  if (names.empty()) return {};
  std::vector<Variant> kept;
  for (const auto &n : names) {
    auto it = std::find_if(config.variants.begin(), config.variants.end(),
                           [&](const Variant &v) { return v.name == n; });
    if (it == config.variants.end()) {
      std::string known;
      for (const auto &v : config.variants) known += (known.empty() ? "" : ", ") + v.name;
      return util::unexpected(fmt::format("--variant {}: the config has no such variant (it has: {})", n,
                                          known.empty() ? "none" : known));
    }
    if (std::none_of(kept.begin(), kept.end(), [&](const Variant &v) { return v.name == n; }))
      kept.push_back(*it);
  }
  std::vector<Variant> ordered;  // config order, so trajectory order does not depend on the flag order
  for (const auto &v : config.variants)
    if (std::any_of(kept.begin(), kept.end(), [&](const Variant &k) { return k.name == v.name; }))
      ordered.push_back(v);
  config.variants = std::move(ordered);
  return {};
}

fs::path default_examples_dir() {
  return util::data_dir("PTXBENCH_EXAMPLES", "../share/ptxbench/examples",
                        fs::path(PTXBENCH_SOURCE_DIR) / "examples");
}

}  // namespace ptxbench::agent
