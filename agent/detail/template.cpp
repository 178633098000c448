#include "agent/detail/template.hpp"

#include <algorithm>
#include <stdexcept>

#include <fmt/core.h>

namespace ptxbench::agent::detail {
namespace {

bool is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

/// If a placeholder starts at `pos` ("{{name}}"), its name and length; else length 0.
std::size_t placeholder_at(std::string_view text, std::size_t pos, std::string_view &name) {
  if (text.compare(pos, 2, "{{") != 0) return 0;
  std::size_t end = pos + 2;
  while (end < text.size() && is_name_char(text[end])) ++end;
  if (end == pos + 2 || text.compare(end, 2, "}}") != 0) return 0;
  name = text.substr(pos + 2, end - pos - 2);
  return end + 2 - pos;
}

std::string collapse_blank_runs(const std::string &text) {
  std::string out;
  out.reserve(text.size());
  int newlines = 0;
  for (char c : text) {
    newlines = c == '\n' ? newlines + 1 : 0;
    if (newlines <= 2) out += c;
  }
  return out;
}

}  // namespace

std::set<std::string> template_placeholders(std::string_view text) {
  std::set<std::string> names;
  for (std::size_t pos = 0; pos < text.size(); ++pos) {
    std::string_view name;
    if (std::size_t len = placeholder_at(text, pos, name)) {
      names.emplace(name);
      pos += len - 1;
    }
  }
  return names;
}

std::string render_template(std::string_view text, const std::map<std::string, std::string> &values,
                            std::string_view template_name) {
  std::string out;
  out.reserve(text.size() * 2);
  for (std::size_t pos = 0; pos < text.size();) {
    std::string_view name;
    if (std::size_t len = placeholder_at(text, pos, name)) {
      auto it = values.find(std::string(name));
      if (it == values.end())
        throw std::logic_error(fmt::format(
            "prompt template '{}' uses {{{{{}}}}}, which the builder does not set", template_name, name));
      out += it->second;
      pos += len;
    } else {
      out += text[pos++];
    }
  }
  return collapse_blank_runs(out);
}

std::string truncate_text(std::string_view text, std::size_t max_chars) {
  if (text.size() <= max_chars) return std::string(text);
  std::size_t cut = max_chars;
  // Do not split a UTF-8 sequence: back up over continuation bytes.
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;
  return fmt::format("{}... ({} more characters)", text.substr(0, cut), text.size() - cut);
}

std::string bullet_list(const std::vector<std::string> &items, std::size_t max_items,
                        std::size_t max_item_chars) {
  std::string out;
  std::size_t shown = std::min(items.size(), max_items);
  for (std::size_t i = 0; i < shown; ++i) out += "  - " + truncate_text(items[i], max_item_chars) + "\n";
  if (items.size() > shown) out += fmt::format("  ... {} more\n", items.size() - shown);
  return out;
}

}  // namespace ptxbench::agent::detail
