// The pattern of an incorrect output's mismatches, written by the worker's correctness stage per workload
// (figures.workloads[i].mismatch_pattern) and read by the feedback: how many elements are wrong in each
// output tensor, the worst of them, and where they sit (which leading indices, row and column ranges, the
// position inside 64- and 128-wide tiles, one block or spread). A hidden workload's record is the coarse
// form: no sizes, indices or counts that would give its shape away.
//
// mismatch_pattern: {coarse, trial, tensors: [{tensor, elements, mismatches, share, nan_count,
//   unwritten_count, sampled, dims: [{name, size, affected, coverage, ranges: [[first, last]],
//   more_ranges, tiles: [{tile, first, last, tiles_touched}], partial_tile_only}],
//   blocks: [{tile, touched, total}], one_block, worst: [{index, got, expected, error_ratio, kind}]}]}
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "evaluator/protocol/detail/equality.hpp"

namespace ptxbench::protocol {

/// One mismatching element. Non-finite values travel as 0 with `kind` saying what they were.
struct MismatchElement {
  std::vector<std::int64_t> index;  ///< coordinates, outermost first; empty in the coarse form
  double got = 0;
  double expected = 0;
  double error_ratio = 0;      ///< |got - expected| / (atol + rtol·|expected|); 0 when not finite
  std::string kind = "value";  ///< "value" | "nan" (a NaN written) | "unwritten" (still the poison) |
                               ///< "infinite" (got or error infinite) | "reference_not_finite"
  PTXBENCH_PROTOCOL_EQUALITY(MismatchElement)
};

/// Where the mismatching indices of one dimension sit inside tiles of `tile` elements.
struct TileResidue {
  std::int64_t tile = 0;           ///< 64 | 128
  std::int64_t first = 0;          ///< lowest index mod tile among the mismatches
  std::int64_t last = 0;           ///< highest index mod tile among the mismatches
  std::int64_t tiles_touched = 0;  ///< distinct tiles (index / tile) holding a mismatch
  PTXBENCH_PROTOCOL_EQUALITY(TileResidue)
};

/// Which indices of one dimension hold mismatches.
struct DimSpread {
  std::string name;           ///< the task's symbol for it (B, H, S, D; M, N), "" when not known
  std::int64_t size = 0;      ///< 0 in the coarse form
  std::int64_t affected = 0;  ///< distinct indices holding a mismatch; 0 in the coarse form
  std::string coverage;       ///< "all" (every index) | "one" (a single index) | "some"
  std::vector<std::array<std::int64_t, 2>> ranges;  ///< runs [first, last], lowest first, at most 8
  bool more_ranges = false;                         ///< runs past the 8 listed
  std::vector<TileResidue> tiles;  ///< the two innermost dimensions, when longer than the tile
  bool partial_tile_only = false;  ///< every mismatch in the last, partial 64-wide tile of this dimension
  PTXBENCH_PROTOCOL_EQUALITY(DimSpread)
};

/// Distinct (leading indices, row tile, column tile) blocks holding a mismatch.
struct BlockCount {
  std::int64_t tile = 0;  ///< the block is tile x tile (rows x columns)
  std::int64_t touched = 0;
  std::int64_t total = 0;
  PTXBENCH_PROTOCOL_EQUALITY(BlockCount)
};

/// One output tensor's mismatches in the trial.
struct TensorMismatches {
  std::string tensor;
  std::uint64_t elements = 0;         ///< 0 in the coarse form
  std::uint64_t mismatches = 0;       ///< 0 in the coarse form
  double share = 0;                   ///< mismatches / elements
  std::uint64_t nan_count = 0;        ///< NaN values written (not the poison); coarse: 0 or 1 (some)
  std::uint64_t unwritten_count = 0;  ///< elements still holding the NaN poison; coarse: 0 or 1 (some)
  std::uint64_t sampled = 0;    ///< mismatching indices the spread was computed from (all when == mismatches)
  std::vector<DimSpread> dims;  ///< outermost first
  std::vector<BlockCount> blocks;      ///< per tile size (64, 128); empty in the coarse form
  bool one_block = false;              ///< every mismatch inside one 64x64 (or failing that 128x128) block
  std::vector<MismatchElement> worst;  ///< largest error over tolerance first, at most 8
  PTXBENCH_PROTOCOL_EQUALITY(TensorMismatches)
};

struct MismatchPattern {
  bool coarse = false;                    ///< a hidden workload's: no sizes, indices or counts
  int trial = 0;                          ///< 1-based trial the pattern comes from (the first failing one)
  std::vector<TensorMismatches> tensors;  ///< every output tensor, in the task's order
  PTXBENCH_PROTOCOL_EQUALITY(MismatchPattern)
};

/// The pattern without what would give a hidden shape away: sizes, counts, indices, ranges, residues and
/// block counts go; shares, coverage words, partial-tile and one-block facts and the worst values stay.
MismatchPattern coarse_pattern(const MismatchPattern &exact);

void to_json(nlohmann::json &j, const MismatchElement &e);
void from_json(const nlohmann::json &j, MismatchElement &e);
void to_json(nlohmann::json &j, const TileResidue &t);
void from_json(const nlohmann::json &j, TileResidue &t);
void to_json(nlohmann::json &j, const DimSpread &d);
void from_json(const nlohmann::json &j, DimSpread &d);
void to_json(nlohmann::json &j, const BlockCount &b);
void from_json(const nlohmann::json &j, BlockCount &b);
void to_json(nlohmann::json &j, const TensorMismatches &t);
void from_json(const nlohmann::json &j, TensorMismatches &t);
void to_json(nlohmann::json &j, const MismatchPattern &p);
/// Throws ProtocolError naming the field on a record not of that form.
void from_json(const nlohmann::json &j, MismatchPattern &p);

}  // namespace ptxbench::protocol
