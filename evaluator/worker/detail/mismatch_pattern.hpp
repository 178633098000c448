// Where an output's mismatches sit: from the compare's sample of mismatching flat indices and its worst
// elements to the typed protocol::TensorMismatches (per dimension which indices, the position inside 64-
// and 128-wide tiles, one block or spread). Pure host code (CPU tests compile it in).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "evaluator/protocol/job.hpp"
#include "evaluator/protocol/mismatch.hpp"

namespace ptxbench::worker::detail {

/// One mismatching element as the compare found it (flat index, values as float).
struct FlatMismatch {
  std::int64_t index = 0;
  double got = 0;
  double expected = 0;
  double error_ratio = 0;  ///< |got - expected| / (atol + rtol·|expected|); may be inf or NaN
  bool unwritten = false;  ///< still the NaN poison
};

/// One dimension of an output: the task's symbol for it ("" when unknown) and its size.
struct NamedDim {
  std::string name;
  std::int64_t size = 0;
};

/// The most elements `worst` keeps and the most ranges a dimension lists.
inline constexpr std::size_t kMaxWorstElements = 8;
inline constexpr std::size_t kMaxDimRanges = 8;
/// Tile sizes the residues and blocks are computed for (the usual CTA tile edges).
inline constexpr std::int64_t kPatternTiles[] = {64, 128};

/// `sample`: mismatching flat indices (any order, duplicates ignored): all of them, or a uniform sample
/// when there were more than the compare keeps. `worst`: candidates for the worst elements, any order.
protocol::TensorMismatches analyze_mismatches(const std::string &tensor, const std::vector<NamedDim> &dims,
                                              std::uint64_t mismatches, std::uint64_t nan_count,
                                              std::uint64_t unwritten_count, std::vector<std::int64_t> sample,
                                              std::vector<FlatMismatch> worst);

/// The symbol naming each dimension of `t`: the one symbol of the workload with that value; when several
/// share it, the task's usual order (B, H, S, D; M, N, K) assigns them outermost first; "" when none.
std::vector<NamedDim> named_dims(const protocol::WorkloadSpec &spec, const protocol::TensorSpec &t);

}  // namespace ptxbench::worker::detail
