// Prompts from the text templates in prompts/: the system prompt (candidate
// contract + target architecture + reference notes), the task prompt, and one
// feedback template per outcome.
#pragma once

#include <filesystem>
#include <map>
#include <string>

#include "agent/knowledge_pack.hpp"
#include "evaluator/verdict.hpp"
#include "tasks/task.hpp"
#include "util/expected.hpp"

namespace ptxbench::agent {

/// The texts a verdict's line numbers point into, so that feedback can quote the offending line.
struct FeedbackSources {
  std::string_view kernel_source;  ///< the kernel block as sent (PTX, or CUDA: NVRTC lines point here)
  std::string_view ptx;            ///< the PTX that was checked and compiled (the NVRTC output for CUDA)
  bool cuda = false;               ///< the kernel block is CUDA
};

/// What reference material a system prompt carries (a run variant's choice).
struct ReferenceSelection {
  bool target_notes = true;        ///< the notes for the task's target instructions (prompts/notes)
  std::vector<std::string> packs;  ///< knowledge packs appended after the notes, in this order
};

class PromptBuilder {
 public:
  /// Loads every template under `dir` (default: the installed/source prompts/ folder).
  static util::Expected<PromptBuilder> load(const std::filesystem::path &dir);
  /// prompts/ next to the executable's share dir, $PTXBENCH_PROMPTS, or the source tree.
  static std::filesystem::path default_dir();

  /// System message: role, candidate contract, target architecture, and the selected reference material
  /// (by default the notes for the task's targets). Packs must exist (see check_packs).
  std::string system_prompt(const tasks::Task &task, const ReferenceSelection &reference = {}) const;
  /// The packs found under `<dir>/packs` (or, when the folder has none, the default prompts' packs).
  const std::map<std::string, KnowledgePack> &packs() const { return packs_; }
  /// Error naming every unknown pack and the known ones.
  util::Expected<void> check_packs(const std::vector<std::string> &names) const;
  /// First user message: the task (tensors, shapes, layouts, dtypes, tolerance, targets, what "fast" means).
  std::string task_prompt(const tasks::Task &task) const;
  /// User message after an evaluated attempt: the outcome-specific template filled from the verdict.
  /// Each fact is stated once; with `sources`, a compile or static error quotes the line it points at.
  std::string feedback(const tasks::Task &task, const evaluator::Verdict &verdict,
                       const FeedbackSources *sources = nullptr) const;
  /// User message after a response that could not be used (request failed, empty, cut by length).
  std::string feedback_unusable_response(const std::string &reason) const;

 private:
  std::map<std::string, std::string> templates_;  ///< file stem -> text
  std::map<std::string, KnowledgePack> packs_;    ///< pack name -> pack
};

}  // namespace ptxbench::agent
