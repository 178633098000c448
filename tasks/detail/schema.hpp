// Strict reading of a JSON document against a fixed schema: every error
// names the JSON path and the reason, and reading goes on so that one pass
// reports every problem of a file.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace ptxbench::tasks::detail {

/// "tensors[2]" + "dtype" -> "tensors[2].dtype"; "" + "id" -> "id".
std::string join_path(const std::string &parent, std::string_view key);
std::string index_path(const std::string &parent, std::size_t index);

class SchemaReader {
 public:
  /// Records "<path>: <reason>" (path "(root)" when empty).
  void error(const std::string &path, const std::string &reason);
  bool ok() const { return errors_.empty(); }
  const std::vector<std::string> &errors() const { return errors_; }

  /// Errors on keys of `object` outside `allowed`.
  void reject_unknown_fields(const nlohmann::json &object, const std::string &path,
                             std::initializer_list<std::string_view> allowed);

  /// The member `key` of `object`: nullptr (and an error if `required`) when absent.
  const nlohmann::json *member(const nlohmann::json &object, const std::string &path, std::string_view key,
                               bool required);

  /// Typed reads of a member; nullopt when absent or of the wrong type (an error is recorded
  /// for the wrong type, and for absence when required).
  std::optional<std::string> string_member(const nlohmann::json &object, const std::string &path,
                                           std::string_view key, bool required);
  std::optional<double> number_member(const nlohmann::json &object, const std::string &path,
                                      std::string_view key, bool required);
  std::optional<bool> bool_member(const nlohmann::json &object, const std::string &path, std::string_view key,
                                  bool required);
  /// An array member (pointer into `object`), or nullptr.
  const nlohmann::json *array_member(const nlohmann::json &object, const std::string &path,
                                     std::string_view key, bool required);
  const nlohmann::json *object_member(const nlohmann::json &object, const std::string &path,
                                      std::string_view key, bool required);

  /// Checks the type of a value found at `path`; records an error when it differs.
  bool expect_object(const nlohmann::json &value, const std::string &path);
  bool expect_string(const nlohmann::json &value, const std::string &path);
  /// A string or an integer (shape entries and expressions may be written either way).
  std::optional<std::string> expression_value(const nlohmann::json &value, const std::string &path);
  std::optional<std::int64_t> integer_value(const nlohmann::json &value, const std::string &path);

 private:
  std::vector<std::string> errors_;
};

/// "a identifier": letters, digits, '_', not starting with a digit, at most 64 characters.
bool is_identifier(std::string_view text);

/// Parses JSON text; on failure returns the parser's message. Duplicate keys in
/// an object are an error too (nlohmann would silently keep the last one).
struct ParsedJson {
  nlohmann::json value;
  std::string error;  ///< "" on success
};
ParsedJson parse_json_strict(const std::string &text);

}  // namespace ptxbench::tasks::detail
