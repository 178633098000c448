#include "llm_clients/detail/protocol.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>

#include <curl/curl.h>
#include <fmt/format.h>

#include "util/think_tags.hpp"

namespace ptxbench::llm::detail {

// ---------------------------------------------------------------- SSE

void SseParser::feed(std::string_view bytes) {
  bytes_seen_ += bytes.size();
  while (!bytes.empty()) {
    auto newline = bytes.find('\n');
    if (newline == std::string_view::npos) {
      pending_line_.append(bytes);
      return;
    }
    pending_line_.append(bytes.substr(0, newline));
    bytes.remove_prefix(newline + 1);
    std::string line = std::move(pending_line_);
    pending_line_.clear();
    if (!line.empty() && line.back() == '\r') line.pop_back();
    handle_line(line);
  }
}

void SseParser::finish() {
  if (!pending_line_.empty()) {
    std::string line = std::move(pending_line_);
    pending_line_.clear();
    if (!line.empty() && line.back() == '\r') line.pop_back();
    handle_line(line);
  }
  dispatch();
}

void SseParser::handle_line(std::string_view line) {
  if (line.empty()) {
    dispatch();
    return;
  }
  if (line.front() == ':') return;  // comment / keep-alive
  auto colon = line.find(':');
  std::string_view field = line.substr(0, colon);
  std::string_view value = colon == std::string_view::npos ? std::string_view{} : line.substr(colon + 1);
  if (!value.empty() && value.front() == ' ') value.remove_prefix(1);
  if (field != "data") return;  // event, id, retry: not used by chat completions
  if (has_data_) event_data_.push_back('\n');
  event_data_.append(value);
  has_data_ = true;
}

void SseParser::dispatch() {
  if (!has_data_) return;
  std::string data = std::move(event_data_);
  event_data_.clear();
  has_data_ = false;
  on_event_(std::move(data));
}

// ---------------------------------------------------------------- request

nlohmann::json build_request_body(const EndpointConfig &config, const ChatRequest &request) {
  nlohmann::json body = nlohmann::json::object();
  body["model"] = config.model;
  nlohmann::json messages = nlohmann::json::array();
  if (config.system_prompt == "user") {
    // Chat templates that drop system messages (Gemma's) would lose the contract: it goes in front of
    // the first user message instead.
    std::string system;
    for (const auto &m : request.messages)
      if (m.role == "system") system += (system.empty() ? "" : "\n\n") + m.content;
    bool placed = system.empty();
    for (const auto &m : request.messages) {
      if (m.role == "system") continue;
      if (!placed && m.role == "user") {
        messages.push_back({{"role", "user"}, {"content", system + "\n\n" + m.content}});
        placed = true;
      } else {
        messages.push_back({{"role", m.role}, {"content", m.content}});
      }
    }
    if (!placed) messages.insert(messages.begin(), {{"role", "user"}, {"content", system}});
  } else {
    for (const auto &m : request.messages) messages.push_back({{"role", m.role}, {"content", m.content}});
  }
  body["messages"] = std::move(messages);
  const auto &s = request.sampling;
  if (s.temperature) body["temperature"] = *s.temperature;
  if (s.top_p) body["top_p"] = *s.top_p;
  if (s.max_tokens) body["max_tokens"] = *s.max_tokens;
  if (s.seed) body["seed"] = *s.seed;
  if (!s.stop.empty()) body["stop"] = s.stop;
  if (s.n != 1) body["n"] = s.n;
  body["stream"] = config.stream;
  // Without this OpenAI-style servers send no usage on streams.
  if (config.stream) body["stream_options"] = {{"include_usage", true}};
  // merge_patch: extra keys added or replaced, a null removes a key (e.g. "stream_options": null).
  if (config.extra_body.is_object()) body.merge_patch(config.extra_body);
  return body;
}

// ---------------------------------------------------------------- responses

namespace {

std::string text_of(const nlohmann::json &value) {
  if (value.is_string()) return value.get<std::string>();
  if (value.is_array()) {  // content parts: [{"type": "text", "text": "..."}]
    std::string out;
    for (const auto &part : value)
      if (part.is_object() && part.contains("text") && part["text"].is_string())
        out += part["text"].get<std::string>();
    return out;
  }
  return {};
}

std::int64_t int_field(const nlohmann::json &object, const char *key) {
  if (!object.is_object()) return 0;
  auto it = object.find(key);
  if (it == object.end() || !it->is_number()) return 0;
  return it->get<std::int64_t>();
}

nlohmann::json meta_of(const nlohmann::json &body) {
  nlohmann::json meta = nlohmann::json::object();
  for (const char *key : {"id", "model", "created", "system_fingerprint"})
    if (body.contains(key) && !body[key].is_null()) meta[key] = body[key];
  return meta;
}

std::string server_error_text(const nlohmann::json &error) {
  if (error.is_object() && error.contains("message") && error["message"].is_string())
    return error["message"].get<std::string>();
  return error.dump();
}

void merge_reasoning(std::string &reasoning, std::string more) {
  if (more.empty()) return;
  if (!reasoning.empty()) reasoning.push_back('\n');
  reasoning += more;
}

}  // namespace

Usage parse_usage(const nlohmann::json &usage) {
  Usage out;
  if (!usage.is_object()) return out;
  out.prompt_tokens = int_field(usage, "prompt_tokens");
  out.completion_tokens = int_field(usage, "completion_tokens");
  if (usage.contains("completion_tokens_details"))
    out.reasoning_tokens = int_field(usage["completion_tokens_details"], "reasoning_tokens");
  if (out.reasoning_tokens == 0) out.reasoning_tokens = int_field(usage, "reasoning_tokens");
  return out;
}

util::Expected<ChatResponse> parse_completion_body(std::string_view body) {
  auto parsed = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded()) return util::unexpected(std::string("response body is not valid JSON"));
  if (!parsed.is_object()) return util::unexpected(std::string("response body is not a JSON object"));
  if (parsed.contains("error") && !parsed["error"].is_null())
    return util::unexpected("server returned an error object: " + server_error_text(parsed["error"]));
  if (!parsed.contains("choices") || !parsed["choices"].is_array() || parsed["choices"].empty())
    return util::unexpected(std::string("response has no \"choices\" array (or it is empty)"));
  ChatResponse out;
  std::vector<ChatChoice> choices;
  for (const auto &choice : parsed["choices"]) {
    if (!choice.is_object() || !choice.contains("message") || !choice["message"].is_object())
      return util::unexpected(std::string("a choice has no \"message\" object"));
    const auto &message = choice["message"];
    ChatChoice c;
    auto split =
        util::split_think_tags(message.contains("content") ? text_of(message["content"]) : std::string{});
    for (const char *key : {"reasoning_content", "reasoning"})
      if (message.contains(key)) merge_reasoning(c.reasoning, text_of(message[key]));
    merge_reasoning(c.reasoning, std::move(split.reasoning));
    c.content = std::move(split.content);
    if (choice.contains("finish_reason") && choice["finish_reason"].is_string())
      c.finish_reason = choice["finish_reason"].get<std::string>();
    choices.push_back(std::move(c));
  }
  out.content = std::move(choices[0].content);
  out.reasoning = std::move(choices[0].reasoning);
  out.finish_reason = std::move(choices[0].finish_reason);
  out.extra_choices.assign(std::make_move_iterator(choices.begin() + 1),
                           std::make_move_iterator(choices.end()));
  if (parsed.contains("usage")) out.usage = parse_usage(parsed["usage"]);
  out.raw_excerpt = meta_of(parsed);
  return out;
}

util::Expected<void> StreamAccumulator::add_event(const std::string &data) {
  if (data == "[DONE]") {
    done_ = true;
    return {};
  }
  auto chunk = nlohmann::json::parse(data, nullptr, /*allow_exceptions=*/false);
  if (chunk.is_discarded() || !chunk.is_object())
    return util::unexpected("stream event is not a JSON object: " + data.substr(0, 200));
  if (chunk.contains("error") && !chunk["error"].is_null())
    return util::unexpected("server sent an error event: " + server_error_text(chunk["error"]));
  if (meta_.empty()) meta_ = meta_of(chunk);
  if (chunk.contains("usage") && chunk["usage"].is_object()) usage_ = parse_usage(chunk["usage"]);
  if (!chunk.contains("choices") || !chunk["choices"].is_array()) return {};
  for (const auto &choice : chunk["choices"]) {
    if (!choice.is_object()) continue;
    std::size_t index = 0;
    if (choice.contains("index") && choice["index"].is_number_unsigned())
      index = choice["index"].get<std::size_t>();
    if (index > 1024) return util::unexpected(std::string("stream chunk has an absurd choice index"));
    if (choices_.size() <= index) choices_.resize(index + 1);
    Choice &c = choices_[index];
    if (choice.contains("delta") && choice["delta"].is_object()) {
      const auto &delta = choice["delta"];
      const std::size_t before = c.content.size() + c.reasoning.size();
      if (delta.contains("content")) c.content += text_of(delta["content"]);
      for (const char *key : {"reasoning_content", "reasoning"})
        if (delta.contains(key)) c.reasoning += text_of(delta[key]);
      text_bytes_ += c.content.size() + c.reasoning.size() - before;
    }
    if (choice.contains("finish_reason") && choice["finish_reason"].is_string())
      c.finish_reason = choice["finish_reason"].get<std::string>();
  }
  return {};
}

bool StreamAccumulator::finished() const {
  return !choices_.empty() && !choices_[0].finish_reason.empty();
}

std::string StreamAccumulator::partial_content() const {
  return choices_.empty() ? std::string{} : choices_[0].content;
}

ChatResponse StreamAccumulator::take_response() {
  ChatResponse out;
  if (choices_.empty()) choices_.resize(1);
  for (std::size_t i = 0; i < choices_.size(); ++i) {
    auto split = util::split_think_tags(choices_[i].content);
    ChatChoice c;
    c.reasoning = std::move(choices_[i].reasoning);
    merge_reasoning(c.reasoning, std::move(split.reasoning));
    c.content = std::move(split.content);
    c.finish_reason = std::move(choices_[i].finish_reason);
    if (i == 0) {
      out.content = std::move(c.content);
      out.reasoning = std::move(c.reasoning);
      out.finish_reason = std::move(c.finish_reason);
    } else {
      out.extra_choices.push_back(std::move(c));
    }
  }
  out.usage = usage_;
  out.raw_excerpt = meta_;
  return out;
}

// ---------------------------------------------------------------- retries

std::optional<std::chrono::milliseconds> parse_retry_after(std::string_view value,
                                                           std::chrono::system_clock::time_point now) {
  auto b = value.find_first_not_of(" \t");
  auto e = value.find_last_not_of(" \t\r\n");
  if (b == std::string_view::npos) return std::nullopt;
  value = value.substr(b, e - b + 1);
  if (std::all_of(value.begin(), value.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    if (value.size() > 9) return std::chrono::milliseconds(std::int64_t{999'999'999} * 1000);
    return std::chrono::milliseconds(std::stoll(std::string(value)) * 1000);
  }
  // curl_getdate knows the three HTTP date formats and is thread-safe and locale-free.
  std::string text(value);
  time_t when = curl_getdate(text.c_str(), nullptr);
  if (when == -1) return std::nullopt;
  auto delta = std::chrono::system_clock::from_time_t(when) - now;
  if (delta <= std::chrono::system_clock::duration::zero()) return std::chrono::milliseconds(0);
  return std::chrono::ceil<std::chrono::milliseconds>(delta);
}

std::chrono::milliseconds backoff_delay(int retry_index, std::chrono::milliseconds initial,
                                        std::chrono::milliseconds cap, std::mt19937_64 &rng) {
  double ceiling = static_cast<double>(initial.count()) * std::ldexp(1.0, std::clamp(retry_index, 0, 60));
  ceiling = std::min(ceiling, static_cast<double>(cap.count()));
  if (ceiling <= 0) return std::chrono::milliseconds(0);
  std::uniform_real_distribution<double> uniform(0.0, ceiling);
  return std::chrono::milliseconds(static_cast<std::int64_t>(uniform(rng)));
}

bool is_retryable_status(long status) {
  return status == 408 || status == 409 || status == 429 || status >= 500;
}

std::string redact(std::string text, const std::string &secret) {
  if (secret.empty()) return text;
  for (auto pos = text.find(secret); pos != std::string::npos; pos = text.find(secret, pos + 10))
    text.replace(pos, secret.size(), "[REDACTED]");
  return text;
}

std::string redacted_excerpt(std::string_view text, const std::string &secret, std::size_t max_chars) {
  // Redact the whole text before cutting so a key straddling the cut cannot leak its first half.
  std::string out = redact(std::string(text), secret);
  for (char &c : out)
    if (static_cast<unsigned char>(c) < 0x20) c = ' ';
  if (out.size() > max_chars) {
    out.resize(max_chars - 3);
    // Do not end in the middle of a UTF-8 sequence.
    while (!out.empty() && (static_cast<unsigned char>(out.back()) & 0xC0) == 0x80) out.pop_back();
    if (!out.empty() && (static_cast<unsigned char>(out.back()) & 0xC0) == 0xC0) out.pop_back();
    out += "...";
  }
  return out;
}

}  // namespace ptxbench::llm::detail

namespace ptxbench::llm::detail {

bool looks_like_key_error(std::string_view body) {
  std::string text(body.substr(0, 64u << 10));
  for (char &c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  for (const char *needle : {"api key", "api_key", "apikey", "authentication", "unauthorized", "auth_error",
                             "invalid key", "no key"})
    if (text.find(needle) != std::string::npos) return true;
  return false;
}

std::string server_error_message(std::string_view body) {
  auto parsed = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded() || !parsed.is_object()) return {};
  if (parsed.contains("error")) {
    const auto &e = parsed["error"];
    if (e.is_string()) return e.get<std::string>();
    if (e.is_object() && e.contains("message") && e["message"].is_string())
      return e["message"].get<std::string>();
  }
  for (const char *key : {"detail", "message"})
    if (parsed.contains(key) && parsed[key].is_string()) return parsed[key].get<std::string>();
  return {};
}

std::vector<std::string> model_ids(std::string_view body) {
  std::vector<std::string> out;
  auto parsed = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded() || !parsed.is_object() || !parsed.contains("data") || !parsed["data"].is_array())
    return out;
  for (const auto &m : parsed["data"])
    if (m.is_object() && m.contains("id") && m["id"].is_string()) out.push_back(m["id"].get<std::string>());
  return out;
}

}  // namespace ptxbench::llm::detail
