// FlashInfer-Trace definitions as read by tasks/flashinfer.cpp (import) and what both directions share:
// the definition's fields, the dtype names, and which PTXBench family a definition maps onto.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "util/expected.hpp"

namespace ptxbench::tasks {
enum class DType;
}  // namespace ptxbench::tasks

namespace ptxbench::tasks::flashinfer {
struct Mapping;
}  // namespace ptxbench::tasks::flashinfer

namespace ptxbench::tasks::flashinfer::detail {

struct Axis {
  bool is_const = false;
  std::int64_t value = 0;
};

struct TensorDef {
  std::string name;
  std::optional<std::vector<std::string>> shape;  ///< nullopt: a scalar (shape null)
  std::string dtype;
  std::string description;
  bool is_scalar() const { return !shape.has_value(); }
};

struct Definition {
  std::string name, op_type, description;
  std::vector<std::string> tags, constraints;
  std::map<std::string, Axis> axes;
  std::vector<TensorDef> inputs, outputs;
};

/// Their tensor names (case-insensitive) for our O and dO; export writes the first of each.
inline constexpr std::string_view kO[] = {"output", "o", "out"};
inline constexpr std::string_view kDO[] = {"do", "d_output", "grad_output", "dout"};

std::string lower(std::string s);
bool contains(std::string_view text, std::string_view part);

/// The definition's fields (what the schema requires is required here too); the error names the field.
util::Expected<Definition> read_definition(const nlohmann::json &root);

/// Their dtype name -> ours (nullopt: none of ours), and ours -> theirs.
std::optional<DType> dtype_of(const std::string &theirs);
std::string their_dtype(DType d);

/// The first tensor of `list` with one of `names`, or nullptr.
const TensorDef *find(const std::vector<TensorDef> &list, std::initializer_list<std::string_view> names);

/// Which of our families the definition maps onto, or why none.
util::Expected<Mapping> classify_definition(const Definition &d);

}  // namespace ptxbench::tasks::flashinfer::detail
