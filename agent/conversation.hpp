// Turn n+1's request = system prompt + task + history under a policy + the
// feedback of turn n. Reasoning is never fed back: only the
// visible answer, as chat servers expect.
#pragma once

#include <string>
#include <vector>

#include "agent/run_config.hpp"
#include "llm_clients/chat_client.hpp"

namespace ptxbench::agent {

/// One finished turn, as later prompts see it.
struct Attempt {
  std::string response_content;  ///< the model's visible answer (reasoning excluded)
  std::string feedback;          ///< the user message written from its verdict
};

/// The messages for the next turn. `history` holds every earlier turn in order.
///   full:         system, task, (assistant, feedback)*
///   last_attempt: system, task, assistant(last), feedback(last)
///   none:         system, task + "\n\n" + feedback(last)   (one user message; no attempt shown)
std::vector<llm::ChatMessage> build_messages(HistoryPolicy policy, const std::string &system_prompt,
                                             const std::string &task_prompt,
                                             const std::vector<Attempt> &history);

/// A repairs trajectory's messages: the seeded conversation (a student's request, its answer and the
/// feedback on it), then the teacher's own attempts under the policy:
///   full:         seed, (assistant, feedback)*
///   last_attempt: seed, assistant(last), feedback(last)
///   none:         seed with feedback(last) appended to its final user message
std::vector<llm::ChatMessage> build_seeded_messages(HistoryPolicy policy,
                                                    const std::vector<llm::ChatMessage> &seed,
                                                    const std::vector<Attempt> &history);

}  // namespace ptxbench::agent
