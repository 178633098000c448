// Reasoning that a model wrote inline in its answer as <think>...</think>, split from the answer.
#pragma once

#include <string>
#include <string_view>

namespace ptxbench::util {

struct ThinkSplit {
  std::string content;    ///< the answer without the blocks, leading white space removed
  std::string reasoning;  ///< the blocks' text, trimmed, several blocks joined by '\n'
};

/// Splits <think>...</think> out of model content. Handles a leading block, a block anywhere, a bare
/// "</think>" (a chat template opened the tag in the prompt: everything before it is reasoning) and an
/// unclosed "<think>" (cut off by a token limit: everything after it is reasoning).
ThinkSplit split_think_tags(std::string_view content);

}  // namespace ptxbench::util
