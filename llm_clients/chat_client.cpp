#include "llm_clients/chat_client.hpp"

#include <algorithm>
#include <cstdlib>
#include <iterator>
#include <stdexcept>

#include <fmt/format.h>

#include "llm_clients/detail/openai_client.hpp"
#include "llm_clients/detail/scripted_client.hpp"
#include "util/enum_names.hpp"

namespace ptxbench::llm {

namespace {
constexpr util::EnumName<ChatErrorKind> kErrorKindNames[] = {
    {ChatErrorKind::network, "network"},         {ChatErrorKind::timeout, "timeout"},
    {ChatErrorKind::http_status, "http_status"}, {ChatErrorKind::bad_response, "bad_response"},
    {ChatErrorKind::length, "length"},           {ChatErrorKind::cancelled, "cancelled"},
    {ChatErrorKind::budget, "budget"},           {ChatErrorKind::config, "config"}};
}  // namespace

std::string to_string(ChatErrorKind kind) {
  const std::string_view name = util::enum_to_string(kErrorKindNames, kind);
  return name.empty() ? "unknown" : std::string(name);
}

nlohmann::json EndpointConfig::to_json_redacted() const {
  // Only the NAME of the key's variable is stored; the key itself never enters this struct.
  return {{"name", name},
          {"kind", kind},
          {"base_url", base_url},
          {"model", model},
          {"api_key_env", api_key_env},
          {"stream", stream},
          {"extra_body", extra_body},
          {"request_timeout_ms", request_timeout.count()},
          {"connect_timeout_ms", connect_timeout.count()},
          {"stream_idle_timeout_ms", stream_idle_timeout.count()},
          {"max_retries", max_retries},
          {"backoff_initial_ms", backoff_initial.count()},
          {"backoff_max_ms", backoff_max.count()},
          {"retry_budget_ms", retry_budget.count()},
          {"max_response_bytes", max_response_bytes},
          {"max_in_flight", max_in_flight},
          {"system_prompt", system_prompt},
          {"scripted_file", scripted_file}};
}

namespace {

using nlohmann::json;

template <std::string EndpointConfig::*Field>
bool read_string(EndpointConfig &c, const json &value) {
  if (!value.is_string()) return false;
  c.*Field = value.get<std::string>();
  return true;
}

template <std::chrono::milliseconds EndpointConfig::*Field>
bool read_ms(EndpointConfig &c, const json &value) {
  if (!value.is_number_integer() || value.get<std::int64_t>() < 0) return false;
  c.*Field = std::chrono::milliseconds(value.get<std::int64_t>());
  return true;
}

template <int EndpointConfig::*Field, int Minimum>
bool read_count(EndpointConfig &c, const json &value) {
  if (!value.is_number_integer() || value.get<std::int64_t>() < Minimum || value.get<std::int64_t>() > 100000)
    return false;
  c.*Field = value.get<int>();
  return true;
}

bool read_system_prompt(EndpointConfig &c, const json &value) {
  return read_string<&EndpointConfig::system_prompt>(c, value) &&
         (c.system_prompt == "system" || c.system_prompt == "user");
}

bool read_stream(EndpointConfig &c, const json &value) {
  if (!value.is_boolean()) return false;
  c.stream = value.get<bool>();
  return true;
}

bool read_extra_body(EndpointConfig &c, const json &value) {
  if (!value.is_object()) return false;
  c.extra_body = value;
  return true;
}

bool read_max_response_bytes(EndpointConfig &c, const json &value) {
  if (!value.is_number_integer() || value.get<std::int64_t>() < 1024) return false;
  c.max_response_bytes = value.get<std::size_t>();
  return true;
}

/// One field of an endpoint object: what its value must be, and how it is read (false: it is not that).
struct EndpointField {
  std::string_view key;
  const char *expected;
  bool (*read)(EndpointConfig &, const json &);
};

constexpr const char *kMs = "an integer >= 0 (milliseconds)";
constexpr EndpointField kEndpointFields[] = {
    {"name", "a string", read_string<&EndpointConfig::name>},
    {"kind", "a string", read_string<&EndpointConfig::kind>},
    {"base_url", "a string", read_string<&EndpointConfig::base_url>},
    {"model", "a string", read_string<&EndpointConfig::model>},
    {"api_key_env", "a string", read_string<&EndpointConfig::api_key_env>},
    {"scripted_file", "a string", read_string<&EndpointConfig::scripted_file>},
    {"system_prompt", "\"system\" or \"user\"", read_system_prompt},
    {"stream", "true or false", read_stream},
    {"extra_body", "an object", read_extra_body},
    {"max_retries", "an integer >= 0", read_count<&EndpointConfig::max_retries, 0>},
    {"max_in_flight", "an integer >= 1", read_count<&EndpointConfig::max_in_flight, 1>},
    {"max_response_bytes", "an integer >= 1024 (bytes)", read_max_response_bytes},
    {"request_timeout_ms", kMs, read_ms<&EndpointConfig::request_timeout>},
    {"connect_timeout_ms", kMs, read_ms<&EndpointConfig::connect_timeout>},
    {"stream_idle_timeout_ms", kMs, read_ms<&EndpointConfig::stream_idle_timeout>},
    {"backoff_initial_ms", kMs, read_ms<&EndpointConfig::backoff_initial>},
    {"backoff_max_ms", kMs, read_ms<&EndpointConfig::backoff_max>},
    {"retry_budget_ms", kMs, read_ms<&EndpointConfig::retry_budget>},
};

}  // namespace

util::Expected<EndpointConfig> endpoint_config_from_json(const nlohmann::json &object,
                                                         const std::string &json_path) {
  auto fail = [&](const std::string &key, const std::string &what) {
    return util::unexpected(fmt::format("{}{}: {}", json_path, key.empty() ? "" : "." + key, what));
  };
  if (!object.is_object()) return fail("", std::string("must be an object, got ") + object.type_name());
  EndpointConfig c;
  for (const auto &item : object.items()) {
    // Named references, not a structured binding: clang 14 cannot capture bindings in lambdas.
    const std::string &key = item.key();
    const nlohmann::json &value = item.value();
    const auto field = std::find_if(std::begin(kEndpointFields), std::end(kEndpointFields),
                                    [&](const EndpointField &f) { return f.key == key; });
    if (field != std::end(kEndpointFields)) {
      if (!field->read(c, value))
        return fail(key, std::string("must be ") + field->expected + ", got " + value.dump().substr(0, 80));
    } else if (key == "api_key" || key == "key") {
      // Never echo the value: it is a secret that was put in the wrong place.
      return fail(key,
                  "keys are not accepted in config files; export the key in an environment variable "
                  "and give its name in \"api_key_env\"");
    } else {
      return fail(key,
                  "unknown field (expected name, kind, base_url, model, api_key_env, stream, extra_body, "
                  "request_timeout_ms, connect_timeout_ms, stream_idle_timeout_ms, max_retries, "
                  "backoff_initial_ms, backoff_max_ms, retry_budget_ms, max_response_bytes, max_in_flight, "
                  "scripted_file, system_prompt)");
    }
  }
  if (c.kind != "openai" && c.kind != "scripted")
    return fail("kind", "must be \"openai\" or \"scripted\", got \"" + c.kind + "\"");
  if (c.kind == "openai" && c.base_url.empty()) return fail("base_url", "is required for kind \"openai\"");
  if (c.kind == "openai" && c.model.empty()) return fail("model", "is required for kind \"openai\"");
  if (c.kind == "scripted" && c.scripted_file.empty())
    return fail("scripted_file", "is required for kind \"scripted\"");
  if (c.name.empty()) c.name = c.kind == "scripted" ? "scripted" : c.model;
  return c;
}

util::Expected<std::unique_ptr<ChatClient>> create_client(const EndpointConfig &config) {
  const std::string label = config.name.empty() ? config.model : config.name;
  if (config.kind == "scripted") {
    if (config.scripted_file.empty())
      return util::unexpected(fmt::format("endpoint '{}': kind \"scripted\" needs scripted_file", label));
    auto client = detail::ScriptedClient::load(config.scripted_file);
    if (!client) return util::unexpected(fmt::format("endpoint '{}': {}", label, client.error()));
    return std::unique_ptr<ChatClient>(std::move(client.value()));
  }
  if (config.kind != "openai")
    return util::unexpected(fmt::format(
        "endpoint '{}': unknown kind \"{}\" (expected \"openai\" or \"scripted\")", label, config.kind));
  if (config.base_url.empty())
    return util::unexpected(fmt::format("endpoint '{}': base_url is empty", label));
  if (config.base_url.rfind("http://", 0) != 0 && config.base_url.rfind("https://", 0) != 0)
    return util::unexpected(fmt::format("endpoint '{}': base_url \"{}\" must start with http:// or https://",
                                        label, config.base_url));
  if (config.model.empty()) return util::unexpected(fmt::format("endpoint '{}': model is empty", label));
  std::string key;
  if (!config.api_key_env.empty()) {
    const char *value = std::getenv(config.api_key_env.c_str());
    if (!value || !*value)
      return util::unexpected(fmt::format(
          "endpoint '{}': environment variable {} (api_key_env) is not set or empty; export it, or set "
          "api_key_env to \"\" for a server without keys",
          label, config.api_key_env));
    key = value;
  }
  return std::unique_ptr<ChatClient>(std::make_unique<detail::OpenAiClient>(config, std::move(key)));
}

void settle_usage(ChatResponse &response, const ChatRequest &request) {
  // About 4 bytes per token for English and code; no tokenizer packs more than ~16 bytes into one token
  // on average, so fewer tokens than bytes / 16 is a count that was not measured (a mock, a proxy's
  // placeholder).
  constexpr std::size_t kBytesPerToken = 4, kMostBytesPerToken = 16;
  auto estimate = [](std::size_t bytes) {
    return static_cast<std::int64_t>((bytes + kBytesPerToken - 1) / kBytesPerToken);
  };
  std::size_t prompt_bytes = 0;
  for (const auto &m : request.messages) prompt_bytes += m.content.size();
  std::size_t answer_bytes = response.content.size() + response.reasoning.size();
  for (const auto &c : response.extra_choices) answer_bytes += c.content.size() + c.reasoning.size();
  Usage &u = response.usage;
  std::string why;
  if (u.prompt_tokens <= 0 && u.completion_tokens <= 0) {
    why = "the server sent no usage";
  } else if (static_cast<std::size_t>(std::max<std::int64_t>(u.completion_tokens, 0)) * kMostBytesPerToken <
                 answer_bytes ||
             static_cast<std::size_t>(std::max<std::int64_t>(u.prompt_tokens, 0)) * kMostBytesPerToken <
                 prompt_bytes) {
    why = fmt::format(
        "implausible usage from the server ({} prompt tokens for {} bytes, {} completion tokens "
        "for {} bytes)",
        u.prompt_tokens, prompt_bytes, u.completion_tokens, answer_bytes);
  }
  if (why.empty()) return;
  std::size_t reasoning_bytes = response.reasoning.size();
  for (const auto &c : response.extra_choices) reasoning_bytes += c.reasoning.size();
  u.prompt_tokens = estimate(prompt_bytes);
  u.completion_tokens = estimate(answer_bytes);
  u.reasoning_tokens = estimate(reasoning_bytes);
  u.estimated = true;
  u.estimate_reason = std::move(why);
}

std::unique_ptr<ChatClient> make_client(const EndpointConfig &config) {
  auto client = create_client(config);
  if (!client) throw std::invalid_argument(client.error());
  return std::move(client.value());
}

}  // namespace ptxbench::llm
