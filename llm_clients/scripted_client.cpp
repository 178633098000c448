#include "llm_clients/detail/scripted_client.hpp"

#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "llm_clients/chat_client.hpp"

namespace ptxbench::llm::detail {

namespace {

constexpr std::size_t kMaxScriptBytes = 64u << 20;        // the JSON file
constexpr std::size_t kMaxResponseFileBytes = 16u << 20;  // one {"file": ...} response

std::string type_name(const nlohmann::json &j) {
  return j.type_name();
}

std::int64_t estimate_tokens(std::size_t bytes) {
  return static_cast<std::int64_t>((bytes + 3) / 4);
}

class Loader {
 public:
  explicit Loader(std::filesystem::path file) : file_(std::move(file)) {}

  util::Expected<ScriptedTurns> turns(const nlohmann::json &list, const std::string &where) {
    if (!list.is_array() || list.empty())
      return fail(where, "must be a non-empty array of turns (got " + type_name(list) + ")");
    ScriptedTurns out;
    for (std::size_t i = 0; i < list.size(); ++i) {
      auto entry = this->entry(list[i], fmt::format("{}[{}]", where, i));
      if (!entry) return util::unexpected(entry.error());
      out.push_back(std::move(entry.value()));
    }
    return out;
  }

  util::Unexpected<std::string> fail(const std::string &where, const std::string &what) const {
    return {fmt::format("{}: {}: {}", file_.string(), where, what)};
  }

 private:
  util::Expected<ScriptedEntry> entry(const nlohmann::json &value, const std::string &where) {
    ScriptedEntry out;
    if (value.is_string()) {
      out.content = value.get<std::string>();
      return out;
    }
    if (!value.is_object())
      return fail(where, "must be a string or an object (got " + type_name(value) + ")");
    for (const auto &[key, field] : value.items()) {
      const std::string at = where + "." + key;
      if (key == "content" || key == "reasoning" || key == "finish_reason" || key == "file") {
        if (!field.is_string()) return fail(at, "must be a string");
      } else if (key != "error") {
        return fail(at, "unknown field (expected content, reasoning, file, finish_reason or error)");
      }
    }
    if (value.contains("content") && value.contains("file"))
      return fail(where, "has both \"content\" and \"file\"; use one");
    if (value.contains("content")) out.content = value["content"].get<std::string>();
    if (value.contains("reasoning")) out.reasoning = value["reasoning"].get<std::string>();
    if (value.contains("finish_reason")) out.finish_reason = value["finish_reason"].get<std::string>();
    if (value.contains("file")) {
      std::filesystem::path response = value["file"].get<std::string>();
      if (response.is_relative()) response = file_.parent_path() / response;
      auto text = read_bounded(response, kMaxResponseFileBytes);
      if (!text) return fail(where + ".file", text.error());
      out.content = std::move(text.value());
    }
    if (value.contains("error")) {
      const auto &error = value["error"];
      const std::string at = where + ".error";
      if (!error.is_object()) return fail(at, "must be an object");
      ChatError e;
      for (const auto &[key, field] : error.items()) {
        if (key == "kind") {
          auto kind = field.is_string() ? error_kind_from_string(field.get<std::string>()) : std::nullopt;
          if (!kind)
            return fail(at + ".kind",
                        "must be one of network, timeout, http_status, bad_response, length, "
                        "cancelled, budget, config");
          e.kind = *kind;
        } else if (key == "http_status") {
          if (!field.is_number_integer()) return fail(at + ".http_status", "must be an integer");
          e.http_status = field.get<int>();
        } else if (key == "message") {
          if (!field.is_string()) return fail(at + ".message", "must be a string");
          e.message = field.get<std::string>();
        } else {
          return fail(at + "." + key, "unknown field (expected kind, http_status, message)");
        }
      }
      if (!error.contains("kind")) return fail(at, "needs a \"kind\"");
      out.error = std::move(e);
    }
    return out;
  }

  std::filesystem::path file_;
};

}  // namespace

util::Expected<std::string> read_bounded(const std::filesystem::path &path, std::size_t max_bytes) {
  std::error_code ec;
  auto size = std::filesystem::file_size(path, ec);
  if (ec) return util::unexpected(fmt::format("cannot read {}: {}", path.string(), ec.message()));
  if (size > max_bytes)
    return util::unexpected(
        fmt::format("{} is {} bytes, more than the {} allowed", path.string(), size, max_bytes));
  std::ifstream in(path, std::ios::binary);
  if (!in) return util::unexpected(fmt::format("cannot open {}", path.string()));
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) return util::unexpected(fmt::format("error reading {}", path.string()));
  return text.str();
}

std::optional<ChatErrorKind> error_kind_from_string(const std::string &name) {
  for (auto kind : {ChatErrorKind::network, ChatErrorKind::timeout, ChatErrorKind::http_status,
                    ChatErrorKind::bad_response, ChatErrorKind::length, ChatErrorKind::cancelled,
                    ChatErrorKind::budget, ChatErrorKind::config})
    if (to_string(kind) == name) return kind;
  return std::nullopt;
}

util::Expected<std::unique_ptr<ScriptedClient>> ScriptedClient::load(const std::filesystem::path &file) {
  auto text = read_bounded(file, kMaxScriptBytes);
  if (!text) return util::unexpected("scripted responses: " + text.error());
  auto root = nlohmann::json::parse(text.value(), nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded())
    return util::unexpected(fmt::format("{}: not valid JSON (check commas and quotes)", file.string()));
  Loader loader(file);
  if (!root.is_object()) return loader.fail("top level", "must be an object");
  auto client = std::unique_ptr<ScriptedClient>(new ScriptedClient());
  client->file_ = file;
  for (const auto &[key, value] : root.items()) {
    if (key == "comment") continue;
    if (key == "default") {
      auto turns = loader.turns(value, "default");
      if (!turns) return util::unexpected(turns.error());
      client->default_ = std::move(turns.value());
    } else if (key == "tasks") {
      if (!value.is_object()) return loader.fail("tasks", "must be an object {task_id: [turns]}");
      for (const auto &[task, list] : value.items()) {
        auto turns = loader.turns(list, "tasks." + task);
        if (!turns) return util::unexpected(turns.error());
        client->tasks_[task] = std::move(turns.value());
      }
    } else if (key == "samples") {
      if (!value.is_object()) return loader.fail("samples", "must be an object {task_id: {sample: [turns]}}");
      for (const auto &[task, per_sample] : value.items()) {
        if (!per_sample.is_object())
          return loader.fail("samples." + task, "must be an object {sample: [turns]}");
        for (const auto &[sample, list] : per_sample.items()) {
          const std::string where = "samples." + task + "." + sample;
          int index = -1;
          try {
            std::size_t used = 0;
            index = std::stoi(sample, &used);
            if (used != sample.size()) index = -1;
          } catch (const std::exception &) {
            index = -1;
          }
          if (index < 0) return loader.fail(where, "sample key must be a non-negative integer");
          auto turns = loader.turns(list, where);
          if (!turns) return util::unexpected(turns.error());
          client->samples_[task][index] = std::move(turns.value());
        }
      }
    } else {
      return loader.fail(key, "unknown field (expected default, tasks, samples, comment)");
    }
  }
  if (client->default_.empty() && client->tasks_.empty() && client->samples_.empty())
    return loader.fail("top level", "has no responses (add a \"default\" list)");
  return client;
}

util::Expected<ChatResponse, ChatError> ScriptedClient::complete(const ChatRequest &request) {
  if (cancelled_) {
    ChatError e;
    e.kind = ChatErrorKind::cancelled;
    e.message = "request cancelled";
    e.attempts = 0;
    return util::unexpected(std::move(e));
  }
  const ScriptedTurns *turns = nullptr;
  if (auto task = samples_.find(request.task_id); task != samples_.end())
    if (auto sample = task->second.find(request.sample_index); sample != task->second.end())
      turns = &sample->second;
  if (!turns)
    if (auto task = tasks_.find(request.task_id); task != tasks_.end()) turns = &task->second;
  if (!turns && !default_.empty()) turns = &default_;
  if (!turns) {
    ChatError e;
    e.kind = ChatErrorKind::config;
    e.message =
        fmt::format("{} has no responses for task '{}' (add it under \"tasks\" or add a \"default\" list)",
                    file_.string(), request.task_id);
    return util::unexpected(std::move(e));
  }
  const auto turn = static_cast<std::size_t>(std::max(request.turn_index, 0));
  const ScriptedEntry &entry = (*turns)[std::min(turn, turns->size() - 1)];
  if (entry.error) return util::unexpected(*entry.error);
  ChatResponse response;
  response.content = entry.content;
  response.reasoning = entry.reasoning;
  response.finish_reason = entry.finish_reason;
  std::size_t prompt_bytes = 0;
  for (const auto &m : request.messages) prompt_bytes += m.content.size();
  response.usage.prompt_tokens = estimate_tokens(prompt_bytes);
  response.usage.reasoning_tokens = estimate_tokens(entry.reasoning.size());
  response.usage.completion_tokens = estimate_tokens(entry.content.size()) + response.usage.reasoning_tokens;
  response.usage.estimated = true;
  response.usage.estimate_reason = "a scripted answer has no tokenizer";
  response.raw_excerpt = {{"model", "scripted"}, {"file", file_.filename().string()}};
  return response;
}

}  // namespace ptxbench::llm::detail
