// The scripted client: canned responses from a JSON file, per task, sample and
// turn. Deterministic and instant; used by the quick start and by tests.
//
// File format:
//   {"default": [turn0, turn1, ...],                  // any task
//    "tasks":   {"<task_id>": [turn0, ...]},          // overrides "default" for a task
//    "samples": {"<task_id>": {"<sample>": [...]}},   // overrides "tasks" for one sample
//    "comment": "..."}                                // ignored
// A turn entry is a string (the content), or an object with "content" and/or "file" (a path
// relative to the JSON file whose text is the content), optional "reasoning" and
// "finish_reason" (default "stop"), or {"error": {"kind": "<ChatErrorKind>", "http_status": N,
// "message": "..."}} to script a failure. A turn past the end of a list repeats its last entry.
#pragma once

#include <atomic>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "llm_clients/detail/chat_types.hpp"

namespace ptxbench::llm::detail {

struct ScriptedEntry {
  std::string content;
  std::string reasoning;
  std::string finish_reason = "stop";
  std::optional<ChatError> error;
};
using ScriptedTurns = std::vector<ScriptedEntry>;

class ScriptedClient final : public ChatClient {
 public:
  /// Reads and validates the whole file (and every referenced response file) up front.
  static util::Expected<std::unique_ptr<ScriptedClient>> load(const std::filesystem::path &file);
  util::Expected<ChatResponse, ChatError> complete(const ChatRequest &request) override;
  void cancel() override { cancelled_ = true; }

 private:
  std::filesystem::path file_;
  ScriptedTurns default_;
  std::map<std::string, ScriptedTurns> tasks_;
  std::map<std::string, std::map<int, ScriptedTurns>> samples_;
  std::atomic<bool> cancelled_{false};
};

/// Reads a file of at most max_bytes; the error names the path.
util::Expected<std::string> read_bounded(const std::filesystem::path &path, std::size_t max_bytes);

/// ChatErrorKind from its to_string() name.
std::optional<ChatErrorKind> error_kind_from_string(const std::string &name);

}  // namespace ptxbench::llm::detail
