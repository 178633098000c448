// Prompt templates: plain text with {{name}} placeholders, filled in one pass
// (a value is inserted verbatim, so text from a model or a compiler that
// happens to contain "{{x}}" is never expanded), plus bounded list helpers.
#pragma once

#include <cstddef>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace ptxbench::agent::detail {

/// Names used as {{name}} in `text` (name: letters, digits, '_').
std::set<std::string> template_placeholders(std::string_view text);

/// Replaces every {{name}} with values.at(name); text that is not a well-formed placeholder is kept.
/// Throws std::logic_error when a placeholder has no value: templates are validated at load, so a
/// missing value is a bug in the builder. Runs of 3+ newlines left by empty sections collapse to 2.
std::string render_template(std::string_view text, const std::map<std::string, std::string> &values,
                            std::string_view template_name);

/// "  - item" lines, at most `max_items` (then "  ... N more"), each item cut at `max_item_chars`.
std::string bullet_list(const std::vector<std::string> &items, std::size_t max_items,
                        std::size_t max_item_chars);

/// `text` cut to at most `max_chars` bytes (at a UTF-8 boundary), with "... (N more characters)" appended.
std::string truncate_text(std::string_view text, std::size_t max_chars);

}  // namespace ptxbench::agent::detail
