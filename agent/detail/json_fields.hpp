// Reads a JSON object field by field, collecting errors that name the JSON
// path ("endpoints[1].max_in_flight") and rejecting unknown fields.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace ptxbench::agent::detail {

class FieldReader {
 public:
  /// `path` is the object's own path ("" for the root); errors go to `errors`.
  FieldReader(const nlohmann::json &object, std::string path, std::vector<std::string> &errors);

  /// The field's value, or nullptr when absent (or when the object itself was not an object).
  const nlohmann::json *get(std::string_view key);
  std::string path_of(std::string_view key) const;
  void error(std::string_view key, const std::string &message);

  void read(std::string_view key, bool &out);
  void read(std::string_view key, int &out, std::int64_t min, std::int64_t max);
  void read(std::string_view key, std::int64_t &out, std::int64_t min);
  void read(std::string_view key, std::uint64_t &out);
  void read(std::string_view key, double &out, double min);
  void read(std::string_view key, std::optional<double> &out, double min);
  void read(std::string_view key, std::optional<int> &out, std::int64_t min);
  void read(std::string_view key, std::optional<std::int64_t> &out);
  void read(std::string_view key, std::string &out);
  void read(std::string_view key, std::vector<std::string> &out);
  void read(std::string_view key, std::chrono::milliseconds &out);  ///< integer milliseconds >= 0
  void read_object(std::string_view key, nlohmann::json &out);

  /// Reports fields that were never asked for: "unknown field 'x' (known: a, b, c)".
  void finish();

 private:
  const nlohmann::json &object_;
  std::string path_;
  std::vector<std::string> &errors_;
  std::set<std::string, std::less<>> known_;
  bool valid_ = true;
};

/// "an integer", "a string", ... for error messages, with the offending value excerpted.
std::string describe_json_value(const nlohmann::json &value);

}  // namespace ptxbench::agent::detail
