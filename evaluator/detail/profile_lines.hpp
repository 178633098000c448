// The profile's sampled PCs on the candidate's own lines: the SASS listing's line info (nvdisasm, from the
// cubin's line tables) names a line of the PTX the model wrote or of its CUDA source for each PC; the
// samples of a line's PCs add up, and the most sampled lines keep their text, warp states and opcodes.
#pragma once

#include <cstddef>
#include <string_view>

#include "evaluator/protocol/profile.hpp"

namespace ptxbench::evaluator {
struct SassListing;
}  // namespace ptxbench::evaluator

namespace ptxbench::evaluator::detail {

/// Lines kept in the record, and sampled PCs kept beside them.
inline constexpr std::size_t kMaxHotLines = 8;
inline constexpr std::size_t kMaxKeptPcs = 16;
/// Characters of a line's text kept.
inline constexpr std::size_t kMaxHotLineChars = 160;

/// Fills `sampling.hot_lines` (most sampled first), `line_source` or `line_error`, and trims `pcs` to
/// kMaxKeptPcs. `source` is the text whose lines the listing's line info counts: the PTX the model sent
/// (`cuda == false`, line info file ".nv_debug_ptx_txt") or its CUDA source (file "kernel.cu").
/// PCs whose line lies in another file (a toolkit header's inlined code) count in no line.
void map_hot_lines(protocol::PcSampling &sampling, const SassListing &listing, std::string_view source,
                   bool cuda);

}  // namespace ptxbench::evaluator::detail
