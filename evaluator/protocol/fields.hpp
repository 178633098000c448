// One field list per struct drives both directions: `fields(io, value)` names each member once, and a
// FieldWriter or FieldReader walks it. The reader checks types and bounds and rejects unknown keys, so
// what one side writes the other reads back unchanged, and a hand-edited file gets a message naming
// the field. The protocol's codecs use it, and so does traces' run.json codec (traces/run_record.cpp).
#pragma once

#include <chrono>
#include <cmath>
#include <filesystem>
#include <iterator>
#include <limits>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "evaluator/protocol/error.hpp"
#include "util/enum_names.hpp"

namespace ptxbench::protocol::codec {

/// Inclusive bounds of a numeric field (the reader's check; the writer ignores them).
struct Bounds {
  double min = -std::numeric_limits<double>::infinity();
  double max = std::numeric_limits<double>::infinity();
};

/// Milliseconds travel as seconds (a number), under a key ending in _seconds.
class FieldWriter {
 public:
  template <class T>
  void operator()(const char *key, const T &value, Bounds = {}) {
    out[key] = value;
  }
  void operator()(const char *key, const std::chrono::milliseconds &value, Bounds = {}) {
    out[key] = static_cast<double>(value.count()) / 1000.0;
  }
  void operator()(const char *key, const std::filesystem::path &value, Bounds = {}) {
    out[key] = value.string();
  }
  /// An optional value travels as the value or null.
  template <class T>
  void operator()(const char *key, const std::optional<T> &value, Bounds bounds = {}) {
    if (!value) {
      out[key] = nullptr;
      return;
    }
    (*this)(key, *value, bounds);
  }
  nlohmann::json out = nlohmann::json::object();
};

class FieldReader {
 public:
  explicit FieldReader(const nlohmann::json &in) : in_(in) {
    if (!in_.is_object()) throw ProtocolError("", "expected an object, got " + std::string(in_.type_name()));
  }

  template <class T>
  void operator()(const char *key, T &value, Bounds bounds = {}) {
    known_.insert(key);
    const auto it = in_.find(key);
    if (it == in_.end()) return;  // absent: the struct's default
    if constexpr (std::is_same_v<T, bool>) {
      if (!it->is_boolean()) throw ProtocolError(key, "expected true or false");
      value = it->template get<bool>();
    } else if constexpr (std::is_arithmetic_v<T>) {
      if (!it->is_number()) throw ProtocolError(key, "expected a number");
      if constexpr (std::is_integral_v<T>)
        if (!it->is_number_integer()) throw ProtocolError(key, "expected an integer");
      const double v = it->template get<double>();
      if (v < bounds.min || v > bounds.max)
        throw ProtocolError(key, "must be within [" + nlohmann::json(bounds.min).dump() + ", " +
                                     nlohmann::json(bounds.max).dump() + "], got " + it->dump());
      if constexpr (std::is_unsigned_v<T>)
        if (v < 0) throw ProtocolError(key, "expected an integer >= 0");
      value = it->template get<T>();
    } else if constexpr (std::is_same_v<T, std::chrono::milliseconds>) {
      if (!it->is_number()) throw ProtocolError(key, "expected a number of seconds");
      const double s = it->template get<double>();
      if (!(s >= 0) || s > 1e9) throw ProtocolError(key, "must be seconds >= 0, got " + it->dump());
      value = std::chrono::milliseconds(std::llround(s * 1000.0));
    } else if constexpr (std::is_same_v<T, std::filesystem::path>) {
      if (!it->is_string()) throw ProtocolError(key, "expected a string");
      value = it->template get<std::string>();
    } else {
      try {
        value = it->template get<T>();
      } catch (const ProtocolError &e) {
        throw ProtocolError(std::string(key) + (e.field().empty() ? "" : "." + e.field()), e.message());
      } catch (const nlohmann::json::exception &e) {
        throw ProtocolError(key, e.what());
      }
    }
  }

  /// null reads as none; anything else as the value, with the value's checks. Absent: the default.
  template <class T>
  void operator()(const char *key, std::optional<T> &value, Bounds bounds = {}) {
    known_.insert(key);
    const auto it = in_.find(key);
    if (it == in_.end()) return;
    if (it->is_null()) {
      value.reset();
      return;
    }
    T inner{};
    (*this)(key, inner, bounds);
    value = std::move(inner);
  }

  /// Every key of the object must have been named.
  void finish() const {
    for (const auto &[key, value] : in_.items())
      if (!known_.count(key)) throw ProtocolError(key, "unknown field");
  }

 private:
  const nlohmann::json &in_;
  std::set<std::string, std::less<>> known_;
};

/// to_json / from_json of a struct that has a `fields(io, value)` overload.
template <class T>
nlohmann::json write_fields(T &value) {
  FieldWriter w;
  fields(w, value);
  return std::move(w.out);
}

template <class T>
void read_fields(const nlohmann::json &j, T &value) {
  FieldReader r(j);
  fields(r, value);
  r.finish();
}

/// The codec of a struct whose JSON is its field list, no more: write, and read into a fresh value.
template <class T>
nlohmann::json plain_json(const T &value) {
  return write_fields(const_cast<T &>(value));
}
template <class T>
void read_plain(const nlohmann::json &j, T &value) {
  value = T{};
  read_fields(j, value);
}

/// Drops `key` when it holds null: for keys written only when there is something under them.
inline void erase_if_null(nlohmann::json &j, const char *key) {
  if (const auto it = j.find(key); it != j.end() && it->is_null()) j.erase(it);
}

/// A closed enum written as its name in `table` (util/enum_names.hpp); another name is refused, listing the
/// known ones.
template <class E, std::size_t N>
void read_enum(const nlohmann::json &j, E &value, const util::EnumName<E> (&table)[N]) {
  if (!j.is_string()) throw ProtocolError("", "expected a string, got " + j.dump());
  const auto parsed = util::enum_from_string(table, j.template get<std::string>());
  if (!parsed)
    throw ProtocolError("", "unknown value " + j.dump() + " (known: " + util::enum_names(table) + ")");
  value = *parsed;
}

/// Drops every key holding null: for records that write an absent value by leaving its key out.
inline void erase_nulls(nlohmann::json &j) {
  for (auto it = j.begin(); it != j.end();) it = it->is_null() ? j.erase(it) : std::next(it);
}

/// A stage's figures as the typed record T: nullopt when the stage wrote none (not an object, or empty);
/// malformed ones throw ProtocolError naming the field.
template <class T>
std::optional<T> figures_record(const nlohmann::json &figures) {
  if (!figures.is_object() || figures.empty()) return std::nullopt;
  return figures.template get<T>();
}

/// An array of records under `key`, read one by one so an error names the row ("workloads[1].name").
template <class T>
std::vector<T> read_rows(const nlohmann::json &rows, const std::string &key) {
  if (!rows.is_array()) throw ProtocolError(key, "expected an array, got " + rows.dump());
  std::vector<T> out;
  out.reserve(rows.size());
  for (std::size_t i = 0; i < rows.size(); ++i) {
    try {
      out.push_back(rows[i].template get<T>());
    } catch (const ProtocolError &e) {
      throw ProtocolError(key + "[" + std::to_string(i) + "]" + (e.field().empty() ? "" : "." + e.field()),
                          e.message());
    }
  }
  return out;
}

/// A typed record kept under `key` in a stage's figures: nullopt when absent or null; a malformed one
/// throws ProtocolError with the field path prefixed by `key` ("matrix_work.fma_share").
template <class T>
std::optional<T> record_in_figures(const nlohmann::json &figures, const char *key) {
  if (!figures.is_object()) return std::nullopt;
  const auto it = figures.find(key);
  if (it == figures.end() || it->is_null()) return std::nullopt;
  try {
    return it->template get<T>();
  } catch (const ProtocolError &e) {
    throw ProtocolError(std::string(key) + (e.field().empty() ? "" : "." + e.field()), e.message());
  }
}

}  // namespace ptxbench::protocol::codec
