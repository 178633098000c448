#include "agent/conversation.hpp"

namespace ptxbench::agent {

namespace {
/// Some servers reject empty assistant turns; say what happened instead.
std::string visible(const std::string &content) {
  return content.empty() ? "(empty response)" : content;
}
}  // namespace

std::vector<llm::ChatMessage> build_messages(HistoryPolicy policy, const std::string &system_prompt,
                                             const std::string &task_prompt,
                                             const std::vector<Attempt> &history) {
  std::vector<llm::ChatMessage> messages;
  messages.reserve(2 + 2 * history.size());
  messages.push_back({"system", system_prompt});
  if (history.empty()) {
    messages.push_back({"user", task_prompt});
    return messages;
  }
  switch (policy) {
    case HistoryPolicy::full:
      messages.push_back({"user", task_prompt});
      for (const auto &a : history) {
        messages.push_back({"assistant", visible(a.response_content)});
        messages.push_back({"user", a.feedback});
      }
      break;
    case HistoryPolicy::last_attempt:
      messages.push_back({"user", task_prompt});
      messages.push_back({"assistant", visible(history.back().response_content)});
      messages.push_back({"user", history.back().feedback});
      break;
    case HistoryPolicy::none:
      messages.push_back({"user", task_prompt + "\n\n" + history.back().feedback});
      break;
  }
  return messages;
}

std::vector<llm::ChatMessage> build_seeded_messages(HistoryPolicy policy,
                                                    const std::vector<llm::ChatMessage> &seed,
                                                    const std::vector<Attempt> &history) {
  std::vector<llm::ChatMessage> messages = seed;
  if (history.empty()) return messages;
  switch (policy) {
    case HistoryPolicy::full:
      for (const auto &a : history) {
        messages.push_back({"assistant", visible(a.response_content)});
        messages.push_back({"user", a.feedback});
      }
      break;
    case HistoryPolicy::last_attempt:
      messages.push_back({"assistant", visible(history.back().response_content)});
      messages.push_back({"user", history.back().feedback});
      break;
    case HistoryPolicy::none:
      messages.back().content += "\n\n" + history.back().feedback;
      break;
  }
  return messages;
}

}  // namespace ptxbench::agent
