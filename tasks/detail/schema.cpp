#include "tasks/detail/schema.hpp"

#include <algorithm>
#include <cmath>
#include <set>

#include <fmt/core.h>

namespace ptxbench::tasks::detail {

using nlohmann::json;

std::string join_path(const std::string &parent, std::string_view key) {
  if (parent.empty()) return std::string(key);
  return parent + "." + std::string(key);
}

std::string index_path(const std::string &parent, std::size_t index) {
  return fmt::format("{}[{}]", parent, index);
}

void SchemaReader::error(const std::string &path, const std::string &reason) {
  errors_.push_back(fmt::format("{}: {}", path.empty() ? "(root)" : path, reason));
}

void SchemaReader::reject_unknown_fields(const json &object, const std::string &path,
                                         std::initializer_list<std::string_view> allowed) {
  if (!object.is_object()) return;
  for (const auto &[key, value] : object.items()) {
    if (std::find(allowed.begin(), allowed.end(), key) != allowed.end()) continue;
    std::string known;
    for (auto a : allowed) known += (known.empty() ? "" : ", ") + std::string(a);
    error(join_path(path, key), fmt::format("unknown field (known fields here: {})", known));
  }
}

const json *SchemaReader::member(const json &object, const std::string &path, std::string_view key,
                                 bool required) {
  if (!object.is_object()) return nullptr;
  auto it = object.find(key);
  if (it == object.end()) {
    if (required) error(join_path(path, key), "missing required field");
    return nullptr;
  }
  return &*it;
}

namespace {
std::string wrong_type(std::string_view expected, const json &got) {
  return fmt::format("expected {}, got {}", expected, got.type_name());
}
}  // namespace

bool SchemaReader::expect_object(const json &value, const std::string &path) {
  if (value.is_object()) return true;
  error(path, wrong_type("an object", value));
  return false;
}

bool SchemaReader::expect_string(const json &value, const std::string &path) {
  if (value.is_string()) return true;
  error(path, wrong_type("a string", value));
  return false;
}

std::optional<std::string> SchemaReader::string_member(const json &object, const std::string &path,
                                                       std::string_view key, bool required) {
  const json *v = member(object, path, key, required);
  if (!v) return std::nullopt;
  if (!expect_string(*v, join_path(path, key))) return std::nullopt;
  return v->get<std::string>();
}

std::optional<double> SchemaReader::number_member(const json &object, const std::string &path,
                                                  std::string_view key, bool required) {
  const json *v = member(object, path, key, required);
  if (!v) return std::nullopt;
  if (!v->is_number()) {
    error(join_path(path, key), wrong_type("a number", *v));
    return std::nullopt;
  }
  double d = v->get<double>();
  if (!std::isfinite(d)) {
    error(join_path(path, key), "expected a finite number");
    return std::nullopt;
  }
  return d;
}

std::optional<bool> SchemaReader::bool_member(const json &object, const std::string &path,
                                              std::string_view key, bool required) {
  const json *v = member(object, path, key, required);
  if (!v) return std::nullopt;
  if (!v->is_boolean()) {
    error(join_path(path, key), wrong_type("true or false", *v));
    return std::nullopt;
  }
  return v->get<bool>();
}

const json *SchemaReader::array_member(const json &object, const std::string &path, std::string_view key,
                                       bool required) {
  const json *v = member(object, path, key, required);
  if (!v) return nullptr;
  if (!v->is_array()) {
    error(join_path(path, key), wrong_type("an array", *v));
    return nullptr;
  }
  return v;
}

const json *SchemaReader::object_member(const json &object, const std::string &path, std::string_view key,
                                        bool required) {
  const json *v = member(object, path, key, required);
  if (!v) return nullptr;
  if (!expect_object(*v, join_path(path, key))) return nullptr;
  return v;
}

std::optional<std::string> SchemaReader::expression_value(const json &value, const std::string &path) {
  if (value.is_string()) return value.get<std::string>();
  if (value.is_number_integer()) return value.dump();
  error(path, wrong_type("an integer expression (string) or an integer", value));
  return std::nullopt;
}

std::optional<std::int64_t> SchemaReader::integer_value(const json &value, const std::string &path) {
  if (value.is_number_unsigned()) {
    auto u = value.get<std::uint64_t>();
    if (u > static_cast<std::uint64_t>(INT64_MAX)) {
      error(path, "integer out of range (more than 2^63-1)");
      return std::nullopt;
    }
    return static_cast<std::int64_t>(u);
  }
  if (value.is_number_integer()) return value.get<std::int64_t>();
  error(path, wrong_type("an integer", value));
  return std::nullopt;
}

bool is_identifier(std::string_view text) {
  if (text.empty() || text.size() > 64) return false;
  auto alpha = [](char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; };
  if (!alpha(text[0])) return false;
  return std::all_of(text.begin(), text.end(), [&](char c) { return alpha(c) || (c >= '0' && c <= '9'); });
}

ParsedJson parse_json_strict(const std::string &text) {
  ParsedJson out;
  std::vector<std::set<std::string>> keys_per_object;
  std::string duplicate;
  json::parser_callback_t on_event = [&](int, json::parse_event_t event, json &parsed) {
    switch (event) {
      case json::parse_event_t::object_start:
        keys_per_object.emplace_back();
        break;
      case json::parse_event_t::object_end:
        if (!keys_per_object.empty()) keys_per_object.pop_back();
        break;
      case json::parse_event_t::key:
        if (!keys_per_object.empty() && !keys_per_object.back().insert(parsed.get<std::string>()).second &&
            duplicate.empty())
          duplicate = parsed.get<std::string>();
        break;
      default:
        break;
    }
    return true;
  };
  try {
    out.value = json::parse(text, on_event);
  } catch (const json::exception &e) {  // parse_error, or out_of_range for numbers like 1e999
    out.error = fmt::format("invalid JSON: {}", e.what());
    return out;
  }
  if (!duplicate.empty())
    out.error = fmt::format("invalid JSON: key '{}' appears twice in one object", duplicate);
  return out;
}

}  // namespace ptxbench::tasks::detail
