#include "agent/detail/json_fields.hpp"

#include <cmath>
#include <limits>

#include <fmt/core.h>

namespace ptxbench::agent::detail {

std::string describe_json_value(const nlohmann::json &value) {
  std::string text = value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  if (text.size() > 60) text = text.substr(0, 57) + "...";
  const char *kind = "a value";
  switch (value.type()) {
    case nlohmann::json::value_t::null:
      kind = "null";
      break;
    case nlohmann::json::value_t::boolean:
      kind = "a boolean";
      break;
    case nlohmann::json::value_t::string:
      kind = "a string";
      break;
    case nlohmann::json::value_t::array:
      kind = "an array";
      break;
    case nlohmann::json::value_t::object:
      kind = "an object";
      break;
    case nlohmann::json::value_t::number_float:
      kind = "a number";
      break;
    case nlohmann::json::value_t::number_integer:
    case nlohmann::json::value_t::number_unsigned:
      kind = "an integer";
      break;
    default:
      break;
  }
  if (value.is_object() || value.is_null()) return kind;
  return fmt::format("{} {}", kind, text);
}

FieldReader::FieldReader(const nlohmann::json &object, std::string path, std::vector<std::string> &errors)
    : object_(object), path_(std::move(path)), errors_(errors) {
  if (!object_.is_object()) {
    errors_.push_back(fmt::format("{}: expected an object, got {}", path_.empty() ? "(top level)" : path_,
                                  describe_json_value(object_)));
    valid_ = false;
  }
}

std::string FieldReader::path_of(std::string_view key) const {
  return path_.empty() ? std::string(key) : fmt::format("{}.{}", path_, key);
}

void FieldReader::error(std::string_view key, const std::string &message) {
  errors_.push_back(fmt::format("{}: {}", path_of(key), message));
}

const nlohmann::json *FieldReader::get(std::string_view key) {
  known_.emplace(key);
  if (!valid_) return nullptr;
  auto it = object_.find(key);
  return it == object_.end() ? nullptr : &*it;
}

void FieldReader::read(std::string_view key, bool &out) {
  if (const auto *v = get(key)) {
    if (v->is_boolean())
      out = v->get<bool>();
    else
      error(key, "expected true or false, got " + describe_json_value(*v));
  }
}

namespace {
bool as_integer(const nlohmann::json &v, std::int64_t &out) {
  if (v.is_number_integer()) {
    if (v.is_number_unsigned() &&
        v.get<std::uint64_t>() > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
      return false;
    out = v.get<std::int64_t>();
    return true;
  }
  return false;
}
}  // namespace

void FieldReader::read(std::string_view key, int &out, std::int64_t min, std::int64_t max) {
  if (const auto *v = get(key)) {
    std::int64_t x = 0;
    if (!as_integer(*v, x) || x < min || x > max) {
      error(key, fmt::format("expected an integer in [{}, {}], got {}", min, max, describe_json_value(*v)));
      return;
    }
    out = static_cast<int>(x);
  }
}

void FieldReader::read(std::string_view key, std::int64_t &out, std::int64_t min) {
  if (const auto *v = get(key)) {
    std::int64_t x = 0;
    if (!as_integer(*v, x) || x < min) {
      error(key, fmt::format("expected an integer >= {}, got {}", min, describe_json_value(*v)));
      return;
    }
    out = x;
  }
}

void FieldReader::read(std::string_view key, std::uint64_t &out) {
  if (const auto *v = get(key)) {
    if (!v->is_number_unsigned() && !(v->is_number_integer() && v->get<std::int64_t>() >= 0)) {
      error(key, "expected a non-negative integer, got " + describe_json_value(*v));
      return;
    }
    out = v->get<std::uint64_t>();
  }
}

void FieldReader::read(std::string_view key, double &out, double min) {
  if (const auto *v = get(key)) {
    if (!v->is_number() || !std::isfinite(v->get<double>()) || v->get<double>() < min) {
      error(key, fmt::format("expected a number >= {}, got {}", min, describe_json_value(*v)));
      return;
    }
    out = v->get<double>();
  }
}

void FieldReader::read(std::string_view key, std::optional<double> &out, double min) {
  if (const auto *v = get(key)) {
    if (v->is_null()) {
      out.reset();
      return;
    }
    double x = 0;
    const std::size_t before = errors_.size();
    read(key, x, min);
    if (errors_.size() == before) out = x;
  }
}

void FieldReader::read(std::string_view key, std::optional<int> &out, std::int64_t min) {
  if (const auto *v = get(key)) {
    if (v->is_null()) {
      out.reset();
      return;
    }
    int x = 0;
    const std::size_t before = errors_.size();
    read(key, x, min, std::numeric_limits<int>::max());
    if (errors_.size() == before) out = x;
  }
}

void FieldReader::read(std::string_view key, std::optional<std::int64_t> &out) {
  if (const auto *v = get(key)) {
    if (v->is_null()) {
      out.reset();
      return;
    }
    std::int64_t x = 0;
    if (!as_integer(*v, x)) {
      error(key, "expected an integer or null, got " + describe_json_value(*v));
      return;
    }
    out = x;
  }
}

void FieldReader::read(std::string_view key, std::string &out) {
  if (const auto *v = get(key)) {
    if (v->is_string())
      out = v->get<std::string>();
    else
      error(key, "expected a string, got " + describe_json_value(*v));
  }
}

void FieldReader::read(std::string_view key, std::vector<std::string> &out) {
  if (const auto *v = get(key)) {
    if (v->is_string()) {  // a single string is accepted as a one-element list
      out = {v->get<std::string>()};
      return;
    }
    if (!v->is_array()) {
      error(key, "expected an array of strings, got " + describe_json_value(*v));
      return;
    }
    std::vector<std::string> items;
    for (std::size_t i = 0; i < v->size(); ++i) {
      if (!(*v)[i].is_string()) {
        error(fmt::format("{}[{}]", key, i), "expected a string, got " + describe_json_value((*v)[i]));
        return;
      }
      items.push_back((*v)[i].get<std::string>());
    }
    out = std::move(items);
  }
}

void FieldReader::read(std::string_view key, std::chrono::milliseconds &out) {
  if (const auto *v = get(key)) {
    std::int64_t x = 0;
    if (!as_integer(*v, x) || x < 0) {
      error(key, "expected a non-negative integer (milliseconds), got " + describe_json_value(*v));
      return;
    }
    out = std::chrono::milliseconds(x);
  }
}

void FieldReader::read_object(std::string_view key, nlohmann::json &out) {
  if (const auto *v = get(key)) {
    if (v->is_object())
      out = *v;
    else
      error(key, "expected an object, got " + describe_json_value(*v));
  }
}

void FieldReader::finish() {
  if (!valid_) return;
  for (const auto &[key, value] : object_.items()) {
    if (known_.count(key) != 0) continue;
    std::string known;
    for (const auto &k : known_) known += (known.empty() ? "" : ", ") + k;
    errors_.push_back(fmt::format("{}: unknown field (known fields here: {})", path_of(key), known));
  }
}

}  // namespace ptxbench::agent::detail
