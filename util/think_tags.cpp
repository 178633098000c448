#include "util/think_tags.hpp"

#include "util/strings.hpp"

namespace ptxbench::util {

ThinkSplit split_think_tags(std::string_view content) {
  static constexpr std::string_view kOpen = "<think>";
  static constexpr std::string_view kClose = "</think>";
  ThinkSplit out;
  auto open = content.find(kOpen);
  auto close = content.find(kClose);
  if (close != std::string_view::npos && (open == std::string_view::npos || close < open)) {
    // The chat template opened the block in the prompt: everything before </think> is reasoning.
    out.reasoning.assign(content.substr(0, close));
    content.remove_prefix(close + kClose.size());
    open = content.find(kOpen);
  }
  while (open != std::string_view::npos) {
    out.content.append(content.substr(0, open));
    content.remove_prefix(open + kOpen.size());
    close = content.find(kClose);
    if (!out.reasoning.empty()) out.reasoning.push_back('\n');
    if (close == std::string_view::npos) {  // unclosed: cut off while thinking
      out.reasoning.append(content);
      content = {};
      break;
    }
    out.reasoning.append(content.substr(0, close));
    content.remove_prefix(close + kClose.size());
    open = content.find(kOpen);
  }
  out.content.append(content);
  // The model usually puts a blank line after </think>; it is not part of the answer.
  const auto first = out.content.find_first_not_of(" \t\r\n");
  out.content.erase(0, first == std::string::npos ? out.content.size() : first);
  out.reasoning = std::string(trim(out.reasoning));
  return out;
}

}  // namespace ptxbench::util
