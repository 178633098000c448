// The worker's own small device kernels: fresh random inputs (counter-based
// hash RNG, never zeros), NaN poison, guard patterns, checksums, the
// output-vs-reference comparison and bit-for-bit comparison.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include <cuda_runtime_api.h>

#include "evaluator/worker/detail/mismatch_pattern.hpp"
#include "evaluator/worker/detail/protocol_names.hpp"

namespace ptxbench::worker::detail {

/// Byte written into every guard region (checked after each launch).
inline constexpr unsigned char kGuardByte = 0xCB;

/// The poison bit pattern of one element of `type` (a NaN with a distinct payload
/// where the format has payloads; e4m3/e5m2 have one NaN encoding).
std::uint32_t poison_bits(ElemType type);

/// Fills `count` elements with values of `distribution` (never exactly zero), from `seed`.
void fill_random(void *data, ElemType type, std::int64_t count, InputDistribution distribution,
                 std::uint64_t seed, cudaStream_t stream);

/// Writes poison_bits(type) into every element.
void fill_poison(void *data, ElemType type, std::int64_t count, cudaStream_t stream);

/// Order-independent 64-bit checksum of `bytes` bytes (multiple of 4 or not).
std::uint64_t checksum(const void *data, std::size_t bytes, cudaStream_t stream);

/// Bytes in [data, data+bytes) that differ from kGuardByte.
std::uint64_t count_guard_damage(const void *data, std::size_t bytes, cudaStream_t stream);

/// Result of comparing one output against its float32 reference.
struct CompareStats {
  std::uint64_t elements = 0;
  std::uint64_t mismatches = 0;       ///< outside atol + rtol·|ref| (NaN and unwritten included)
  std::uint64_t nan_count = 0;        ///< NaN values that are not the poison pattern
  std::uint64_t unwritten_count = 0;  ///< still the poison bits
  double max_abs_error = 0;           ///< over finite values
  double max_rel_error = 0;           ///< |x - ref| / max(|ref|, 1e-3), over finite values
  /// |x - ref| / (atol + rtol·|ref|) over every element (1 = at the tolerance), in the compare's fp32;
  /// infinite errors and errors against a zero tolerance read as the largest float, NaN errors are left out
  double max_error_ratio = 0;
  std::int64_t first_mismatch = -1;  ///< lowest flat index that mismatched
  double first_got = 0;
  double first_expected = 0;
  /// With `pattern` and mismatches only: mismatching flat indices, every one when there are at most
  /// kMismatchSample, else a uniform random sample of about 0.9·kMismatchSample; and candidates for the
  /// worst elements (every element whose error over tolerance is in the top histogram bins holding at
  /// least kMaxWorstElements: those above the lowest such bin all, that bin's at most kWorstCandidates; NaN
  /// and never-written ones when fewer are finite).
  std::vector<std::int64_t> sample;
  std::vector<FlatMismatch> worst;
};
inline constexpr std::int64_t kMismatchSample = 4096;
inline constexpr std::int64_t kWorstCandidates = 1024;
/// `pattern`: also collect `sample` and `worst` (two more passes over the output, only when it has
/// mismatches: a correct output costs what it did without).
CompareStats compare_to_reference(const void *output, ElemType type, const float *reference,
                                  std::int64_t count, double atol, double rtol, cudaStream_t stream,
                                  bool pattern = false);

/// Elements whose bits differ between a and b.
std::uint64_t count_bit_differences(const void *a, const void *b, ElemType type, std::int64_t count,
                                    cudaStream_t stream);

/// Converts one element at `index` to double (reads it back to the host).
double read_element(const void *data, ElemType type, std::int64_t index, cudaStream_t stream);

}  // namespace ptxbench::worker::detail
