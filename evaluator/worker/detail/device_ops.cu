#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "evaluator/worker/detail/cuda_check.hpp"
#include "evaluator/worker/detail/device_ops.hpp"

namespace ptxbench::worker::detail {
namespace {

constexpr int kThreads = 256;

int blocks_for(std::int64_t count) {
  const std::int64_t b = (count + kThreads - 1) / kThreads;
  return static_cast<int>(b < 65536 ? (b < 1 ? 1 : b) : 65536);  // grid-stride loops cover the rest
}

// Reductions end in atomics on one address, which the L2 serializes: with a thread per element that
// was ~10^7 same-address atomics per pass over a core-shape tensor and most of the correctness
// stage's time. A grid that just fills the GPU (grid-stride loops do the rest) and one atomic per
// warp after a shuffle reduction make it ~10^4.
constexpr int kReductionBlocks = 1024;
int reduction_blocks_for(std::int64_t count) {
  const int b = blocks_for(count);
  return b < kReductionBlocks ? b : kReductionBlocks;
}

// Every lane of the warp must call these (the kernels below reach them with all lanes).
__device__ __forceinline__ unsigned long long warp_sum(unsigned long long v) {
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_down_sync(0xFFFFFFFFu, v, offset);
  return v;
}
__device__ __forceinline__ unsigned long long warp_min(unsigned long long v) {
  for (int offset = 16; offset > 0; offset /= 2) {
    const unsigned long long other = __shfl_down_sync(0xFFFFFFFFu, v, offset);
    v = other < v ? other : v;
  }
  return v;
}
__device__ __forceinline__ float warp_max(float v) {
  for (int offset = 16; offset > 0; offset /= 2) v = fmaxf(v, __shfl_down_sync(0xFFFFFFFFu, v, offset));
  return v;
}
__device__ __forceinline__ bool lane0() {
  return (threadIdx.x & 31) == 0;
}

__device__ __forceinline__ std::uint64_t mix64(std::uint64_t x) {
  // splitmix64 finalizer: a counter-based hash, so element i's value depends only on (seed, i).
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

__device__ __forceinline__ float unit_open(std::uint64_t bits) {
  // (0, 1]: 24 random bits, never 0 (log() below).
  return (static_cast<float>(bits >> 40) + 1.0f) * (1.0f / 16777216.0f);
}

__device__ __forceinline__ float normal_from(std::uint64_t h) {
  const float u1 = unit_open(h);
  const float u2 = unit_open(h << 24);
  return sqrtf(-2.0f * logf(u1)) * cospif(2.0f * u2);
}

template <class T>
__device__ __forceinline__ T from_float(float v);
template <>
__device__ __forceinline__ float from_float<float>(float v) {
  return v;
}
template <>
__device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}
template <>
__device__ __forceinline__ __half from_float<__half>(float v) {
  return __float2half_rn(v);
}
template <>
__device__ __forceinline__ __nv_fp8_e4m3 from_float<__nv_fp8_e4m3>(float v) {
  return __nv_fp8_e4m3(v);
}
template <>
__device__ __forceinline__ __nv_fp8_e5m2 from_float<__nv_fp8_e5m2>(float v) {
  return __nv_fp8_e5m2(v);
}
template <>
__device__ __forceinline__ int from_float<int>(float v) {
  return static_cast<int>(rintf(v * 8.0f));
}

template <class T>
__device__ __forceinline__ float to_float(T v) {
  return static_cast<float>(v);
}
template <>
__device__ __forceinline__ float to_float<__nv_bfloat16>(__nv_bfloat16 v) {
  return __bfloat162float(v);
}
template <>
__device__ __forceinline__ float to_float<__half>(__half v) {
  return __half2float(v);
}

template <class T>
__device__ __forceinline__ bool is_zero(T v) {
  return to_float(v) == 0.0f;
}

template <class T>
__global__ void fill_random_kernel(T *out, std::int64_t count, int distribution, std::uint64_t seed) {
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::uint64_t h = mix64(seed ^ mix64(static_cast<std::uint64_t>(i)));
    float v;
    if (distribution == 1) {  // uniform(-1, 1)
      v = 2.0f * unit_open(h) - 1.0f;
    } else {
      v = normal_from(h);
      if (distribution == 2) {  // spiky: + N(0,100)·Bernoulli(0.001)
        const std::uint64_t h2 = mix64(h ^ 0xD1B54A32D192ED03ull);
        if ((h2 & 0xFFFFF) < 1049) v += 10.0f * normal_from(mix64(h2));  // 1049 / 2^20 ≈ 0.001
      }
    }
    T t = from_float<T>(v);
    // Never zeros: they hide unwritten outputs and wrong indexing.
    if (is_zero(t)) t = from_float<T>((h & 1) ? 0.0625f : -0.0625f);
    out[i] = t;
  }
}

template <class Bits>
__global__ void fill_bits_kernel(Bits *out, std::int64_t count, Bits bits) {
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x)
    out[i] = bits;
}

__global__ void checksum_kernel(const unsigned char *data, std::size_t bytes, unsigned long long *sum) {
  unsigned long long local = 0;
  const std::size_t words = bytes / 8;
  const auto *w = reinterpret_cast<const std::uint64_t *>(data);
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < words;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x)
    local += mix64(w[i] ^ mix64(i));
  if (blockIdx.x == 0 && threadIdx.x == 0)
    for (std::size_t i = words * 8; i < bytes; ++i) local += mix64(data[i] ^ mix64(i + (1ull << 60)));
  local = warp_sum(local);
  if (lane0()) atomicAdd(sum, local);
}

__global__ void guard_kernel(const unsigned char *data, std::size_t bytes, unsigned long long *damaged) {
  unsigned long long local = 0;
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < bytes;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x)
    local += data[i] != kGuardByte;
  local = warp_sum(local);
  if (lane0() && local) atomicAdd(damaged, local);
}

struct DeviceStats {
  unsigned long long mismatches, nan_count, unwritten;
  unsigned int max_abs_bits, max_rel_bits;  // non-negative floats order like their bit patterns
  unsigned int max_ratio_bits;              // |error| / tolerance, the same way
  unsigned long long first_mismatch;        // atomicMin; ULLONG_MAX = none
};

template <class T, class Bits>
__global__ void compare_kernel(const T *out, const float *ref, std::int64_t count, float atol, float rtol,
                               Bits poison, DeviceStats *stats) {
  unsigned long long mism = 0, nans = 0, unwritten = 0;
  float max_abs = 0, max_rel = 0, max_ratio = 0;
  unsigned long long first = ~0ull;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    Bits bits;
    memcpy(&bits, out + i, sizeof(Bits));
    const float r = ref[i];
    bool bad;
    if (bits == poison) {
      ++unwritten;
      bad = true;
    } else {
      const float x = to_float(out[i]);
      if (isnan(x)) {
        ++nans;
        bad = true;
      } else {
        const float err = fabsf(x - r);
        const float tol = atol + rtol * fabsf(r);
        bad = !(err <= tol);  // inf and NaN references count as mismatches
        if (isfinite(err)) {
          max_abs = fmaxf(max_abs, err);
          max_rel = fmaxf(max_rel, err / fmaxf(fabsf(r), 1e-3f));
        }
        // The margin, over every element: an infinite error or any error against a zero tolerance reads as
        // the largest float; a NaN error (non-finite reference) is left out (fmaxf ignores NaN).
        if (err > 0) max_ratio = fmaxf(max_ratio, fminf(err / tol, 3.4028235e38f));
      }
    }
    if (bad) {
      ++mism;
      if (static_cast<unsigned long long>(i) < first) first = static_cast<unsigned long long>(i);
    }
  }
  mism = warp_sum(mism);
  nans = warp_sum(nans);
  unwritten = warp_sum(unwritten);
  max_abs = warp_max(max_abs);
  max_rel = warp_max(max_rel);
  max_ratio = warp_max(max_ratio);
  first = warp_min(first);
  if (!lane0()) return;
  if (mism) atomicAdd(&stats->mismatches, mism);
  if (nans) atomicAdd(&stats->nan_count, nans);
  if (unwritten) atomicAdd(&stats->unwritten, unwritten);
  atomicMax(&stats->max_abs_bits, __float_as_uint(max_abs));
  atomicMax(&stats->max_rel_bits, __float_as_uint(max_rel));
  atomicMax(&stats->max_ratio_bits, __float_as_uint(max_ratio));
  if (first != ~0ull) atomicMin(&stats->first_mismatch, first);
}

// ---- the pattern of the mismatches (run only on an output that has some) ----

// Bins of the error over tolerance: finite ratios by their top float bits (non-negative floats order like
// their bits, so a higher bin holds larger ratios); the rest in bins of their own.
constexpr int kRatioBins = 2048;
constexpr unsigned kFiniteBins = 0x7F8;  // bits >> 20 of +inf: the first non-finite bin (infinite errors)
constexpr unsigned kBinRefNotFinite = 2045, kBinUnwritten = 2046, kBinNan = 2047;

struct WorstSlot {
  long long index;
  float got, expected, ratio;
  int unwritten;
};

// One element's check, as compare_kernel makes it; for a mismatch also its ratio bin.
template <class T, class Bits>
__device__ __forceinline__ bool mismatch_at(const T *out, const float *ref, std::int64_t i, float atol,
                                            float rtol, Bits poison, float &x, float &r, float &ratio,
                                            unsigned &bin) {
  Bits bits;
  memcpy(&bits, out + i, sizeof(Bits));
  r = ref[i];
  if (bits == poison) {
    x = __int_as_float(0x7FC00000);
    ratio = x;
    bin = kBinUnwritten;
    return true;
  }
  x = to_float(out[i]);
  if (isnan(x)) {
    ratio = x;
    bin = kBinNan;
    return true;
  }
  const float err = fabsf(x - r);
  const float tol = atol + rtol * fabsf(r);
  if (err <= tol) return false;
  if (isnan(err)) {
    ratio = err;
    bin = kBinRefNotFinite;
    return true;
  }
  ratio = isinf(err) ? err : fminf(err / tol, 3.4028235e38f);  // tol 0: the largest finite ratio
  bin = __float_as_uint(ratio) >> 20;                          // inf lands in kFiniteBins
  return true;
}

template <class T, class Bits>
__global__ void ratio_histogram_kernel(const T *out, const float *ref, std::int64_t count, float atol,
                                       float rtol, Bits poison, unsigned long long *hist) {
  __shared__ unsigned int local[kRatioBins];
  for (int b = threadIdx.x; b < kRatioBins; b += blockDim.x) local[b] = 0;
  __syncthreads();
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    float x, r, ratio;
    unsigned bin;
    if (mismatch_at(out, ref, i, atol, rtol, poison, x, r, ratio, bin)) atomicAdd(&local[bin], 1u);
  }
  __syncthreads();
  for (int b = threadIdx.x; b < kRatioBins; b += blockDim.x)
    if (local[b]) atomicAdd(&hist[b], static_cast<unsigned long long>(local[b]));
}

// Keeps mismatching index i in the sample when keep_all or its hash falls under `keep_below` (a uniform
// sample of the mismatches, independent of the order blocks run in), and as a worst-element candidate
// when its bin is at or above `min_bin` (finite) or `specials` says the non-finite bins are wanted. The
// bins above min_bin hold fewer than kMaxWorstElements, so they have slots of their own (worst[0, 8),
// counters[2]) and are always kept; min_bin's and the non-finite ones share the rest (counters[1]).
template <class T, class Bits>
__global__ void mismatch_collect_kernel(const T *out, const float *ref, std::int64_t count, float atol,
                                        float rtol, Bits poison, bool keep_all, unsigned long long keep_below,
                                        unsigned min_bin, bool specials, unsigned long long *counters,
                                        long long *sample, WorstSlot *worst) {
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    float x, r, ratio;
    unsigned bin;
    if (!mismatch_at(out, ref, i, atol, rtol, poison, x, r, ratio, bin)) continue;
    if (keep_all || mix64(static_cast<std::uint64_t>(i) ^ 0x5DEECE66Dull) < keep_below) {
      const unsigned long long slot = atomicAdd(&counters[0], 1ull);
      if (slot < static_cast<unsigned long long>(kMismatchSample)) sample[slot] = i;
    }
    const bool finite_bin = bin < kFiniteBins;
    const WorstSlot slot_value{static_cast<long long>(i), x, r, ratio, bin == kBinUnwritten ? 1 : 0};
    if (finite_bin && bin > min_bin) {
      const unsigned long long slot = atomicAdd(&counters[2], 1ull);
      if (slot < kMaxWorstElements) worst[slot] = slot_value;
    } else if ((finite_bin && bin == min_bin) || (!finite_bin && specials)) {
      // Read before the atomic: once full, a wholly wrong output costs no more same-address atomics.
      if (*static_cast<volatile unsigned long long *>(&counters[1]) >= kWorstCandidates) continue;
      const unsigned long long slot = atomicAdd(&counters[1], 1ull);
      if (slot < static_cast<unsigned long long>(kWorstCandidates))
        worst[kMaxWorstElements + slot] = slot_value;
    }
  }
}

template <class Bits>
__global__ void bitdiff_kernel(const Bits *a, const Bits *b, std::int64_t count, unsigned long long *diff) {
  unsigned long long local = 0;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x)
    local += a[i] != b[i];
  local = warp_sum(local);
  if (lane0() && local) atomicAdd(diff, local);
}

/// A small device scratch for reductions, freed on scope exit.
template <class T>
struct DeviceScalar {
  T *ptr = nullptr;
  explicit DeviceScalar(cudaStream_t s, const T &init) {
    PTXB_CUDA(cudaMallocAsync(&ptr, sizeof(T), s));
    PTXB_CUDA(cudaMemcpyAsync(ptr, &init, sizeof(T), cudaMemcpyHostToDevice, s));
  }
  T read(cudaStream_t s) const {
    T v;
    PTXB_CUDA(cudaMemcpyAsync(&v, ptr, sizeof(T), cudaMemcpyDeviceToHost, s));
    PTXB_CUDA(cudaStreamSynchronize(s));
    return v;
  }
  ~DeviceScalar() {
    if (ptr) cudaFree(ptr);
  }
};

/// Device scratch for the mismatch pattern: the ratio histogram, three counters (sample, worst ties, worst
/// above the tie bin), the
/// sample and the worst candidates; freed on scope exit.
struct PatternScratch {
  unsigned long long *hist = nullptr;
  unsigned long long *counters = nullptr;
  long long *sample = nullptr;
  WorstSlot *worst = nullptr;
  void *base = nullptr;
  static constexpr std::size_t kHistBytes = kRatioBins * sizeof(unsigned long long);
  static constexpr std::size_t kCounterBytes = 4 * sizeof(unsigned long long);  // 3 used, 8-byte aligned
  static constexpr std::size_t kSampleBytes = kMismatchSample * sizeof(long long);
  static constexpr std::size_t kWorstBytes = (kMaxWorstElements + kWorstCandidates) * sizeof(WorstSlot);
  explicit PatternScratch(cudaStream_t s) {
    PTXB_CUDA(cudaMallocAsync(&base, kHistBytes + kCounterBytes + kSampleBytes + kWorstBytes, s));
    auto *bytes = static_cast<unsigned char *>(base);
    hist = reinterpret_cast<unsigned long long *>(bytes);
    counters = reinterpret_cast<unsigned long long *>(bytes + kHistBytes);
    sample = reinterpret_cast<long long *>(bytes + kHistBytes + kCounterBytes);
    worst = reinterpret_cast<WorstSlot *>(bytes + kHistBytes + kCounterBytes + kSampleBytes);
    PTXB_CUDA(cudaMemsetAsync(base, 0, kHistBytes + kCounterBytes, s));
  }
  PatternScratch(const PatternScratch &) = delete;
  PatternScratch &operator=(const PatternScratch &) = delete;
  ~PatternScratch() {
    if (base) cudaFree(base);
  }
};

/// The mismatch sample and worst candidates of an output known to have `mismatches` > 0.
template <class T, class Bits>
void collect_pattern(const T *out, const float *ref, std::int64_t count, float atol, float rtol, Bits poison,
                     std::uint64_t mismatches, cudaStream_t stream, CompareStats &s) {
  PatternScratch scratch(stream);
  const int blocks = reduction_blocks_for(count);
  ratio_histogram_kernel<<<blocks, kThreads, 0, stream>>>(out, ref, count, atol, rtol, poison, scratch.hist);
  PTXB_CUDA(cudaGetLastError());
  std::vector<unsigned long long> hist(kRatioBins);
  PTXB_CUDA(
      cudaMemcpyAsync(hist.data(), scratch.hist, PatternScratch::kHistBytes, cudaMemcpyDeviceToHost, stream));
  PTXB_CUDA(cudaStreamSynchronize(stream));
  // The lowest finite bin such that the bins from it up hold at least kMaxWorstElements; the non-finite
  // ones are candidates only when fewer than that are finite.
  unsigned min_bin = kFiniteBins;
  unsigned long long finite = 0;
  while (min_bin > 0 && finite < kMaxWorstElements) finite += hist[--min_bin];
  const bool specials = finite < kMaxWorstElements;
  const bool keep_all = mismatches <= static_cast<std::uint64_t>(kMismatchSample);
  const double p = 0.9 * static_cast<double>(kMismatchSample) / static_cast<double>(mismatches);
  const auto keep_below = keep_all ? 0ull : static_cast<unsigned long long>(p * 18446744073709551616.0);
  mismatch_collect_kernel<<<blocks, kThreads, 0, stream>>>(out, ref, count, atol, rtol, poison, keep_all,
                                                           keep_below, min_bin, specials, scratch.counters,
                                                           scratch.sample, scratch.worst);
  PTXB_CUDA(cudaGetLastError());
  unsigned long long counters[3] = {0, 0, 0};
  PTXB_CUDA(cudaMemcpyAsync(counters, scratch.counters, sizeof(counters), cudaMemcpyDeviceToHost, stream));
  PTXB_CUDA(cudaStreamSynchronize(stream));
  const auto sampled = static_cast<std::size_t>(std::min<unsigned long long>(counters[0], kMismatchSample));
  const auto above = static_cast<std::size_t>(std::min<unsigned long long>(counters[2], kMaxWorstElements));
  const auto ties = static_cast<std::size_t>(std::min<unsigned long long>(counters[1], kWorstCandidates));
  std::vector<long long> sample(sampled);
  std::vector<WorstSlot> slots(kMaxWorstElements + ties);
  if (sampled)
    PTXB_CUDA(cudaMemcpyAsync(sample.data(), scratch.sample, sampled * sizeof(long long),
                              cudaMemcpyDeviceToHost, stream));
  PTXB_CUDA(cudaMemcpyAsync(slots.data(), scratch.worst, slots.size() * sizeof(WorstSlot),
                            cudaMemcpyDeviceToHost, stream));
  PTXB_CUDA(cudaStreamSynchronize(stream));
  s.sample.assign(sample.begin(), sample.end());
  for (std::size_t k = 0; k < slots.size(); ++k)
    if (k < above || k >= kMaxWorstElements)
      s.worst.push_back(FlatMismatch{slots[k].index, slots[k].got, slots[k].expected, slots[k].ratio,
                                     slots[k].unwritten != 0});
}

template <class T, class Bits>
void compare_typed(const T *out, const float *ref, std::int64_t count, float atol, float rtol, Bits poison,
                   DeviceStats *stats, cudaStream_t stream) {
  compare_kernel<<<reduction_blocks_for(count), kThreads, 0, stream>>>(out, ref, count, atol, rtol, poison,
                                                                       stats);
  PTXB_CUDA(cudaGetLastError());
}

int dist_code(InputDistribution d) {
  switch (d) {
    case InputDistribution::uniform:
      return 1;
    case InputDistribution::spiky:
      return 2;
    default:
      return 0;
  }
}

}  // namespace

std::uint32_t poison_bits(ElemType type) {
  switch (type) {
    case ElemType::bf16:
      return 0x7FA1;  // NaN, payload 0x21
    case ElemType::f16:
      return 0x7E5A;  // NaN, payload 0x25A
    case ElemType::f32:
      return 0x7FA5A5A5u;  // NaN, payload 0x25A5A5
    case ElemType::e4m3:
      return 0x7F;  // the only NaN encoding (with its sign twin)
    case ElemType::e5m2:
      return 0x7F;
    case ElemType::i32:
      return 0x7FA5A5A5u;  // a value random inputs never produce
  }
  return 0;
}

void fill_random(void *data, ElemType type, std::int64_t count, InputDistribution distribution,
                 std::uint64_t seed, cudaStream_t stream) {
  const int code = dist_code(distribution);
  const int blocks = blocks_for(count);
  switch (type) {
    case ElemType::bf16:
      fill_random_kernel<<<blocks, kThreads, 0, stream>>>(static_cast<__nv_bfloat16 *>(data), count, code,
                                                          seed);
      break;
    case ElemType::f16:
      fill_random_kernel<<<blocks, kThreads, 0, stream>>>(static_cast<__half *>(data), count, code, seed);
      break;
    case ElemType::f32:
      fill_random_kernel<<<blocks, kThreads, 0, stream>>>(static_cast<float *>(data), count, code, seed);
      break;
    case ElemType::e4m3:
      fill_random_kernel<<<blocks, kThreads, 0, stream>>>(static_cast<__nv_fp8_e4m3 *>(data), count, code,
                                                          seed);
      break;
    case ElemType::e5m2:
      fill_random_kernel<<<blocks, kThreads, 0, stream>>>(static_cast<__nv_fp8_e5m2 *>(data), count, code,
                                                          seed);
      break;
    case ElemType::i32:
      fill_random_kernel<<<blocks, kThreads, 0, stream>>>(static_cast<int *>(data), count, code, seed);
      break;
  }
  PTXB_CUDA(cudaGetLastError());
}

void fill_poison(void *data, ElemType type, std::int64_t count, cudaStream_t stream) {
  const std::uint32_t bits = poison_bits(type);
  const int blocks = blocks_for(count);
  switch (size_of(type)) {
    case 1:
      fill_bits_kernel<<<blocks, kThreads, 0, stream>>>(static_cast<std::uint8_t *>(data), count,
                                                        static_cast<std::uint8_t>(bits));
      break;
    case 2:
      fill_bits_kernel<<<blocks, kThreads, 0, stream>>>(static_cast<std::uint16_t *>(data), count,
                                                        static_cast<std::uint16_t>(bits));
      break;
    default:
      fill_bits_kernel<<<blocks, kThreads, 0, stream>>>(static_cast<std::uint32_t *>(data), count, bits);
      break;
  }
  PTXB_CUDA(cudaGetLastError());
}

std::uint64_t checksum(const void *data, std::size_t bytes, cudaStream_t stream) {
  DeviceScalar<unsigned long long> sum(stream, 0ull);
  checksum_kernel<<<reduction_blocks_for(static_cast<std::int64_t>(bytes / 8) + 1), kThreads, 0, stream>>>(
      static_cast<const unsigned char *>(data), bytes, sum.ptr);
  PTXB_CUDA(cudaGetLastError());
  return sum.read(stream);
}

std::uint64_t count_guard_damage(const void *data, std::size_t bytes, cudaStream_t stream) {
  DeviceScalar<unsigned long long> damaged(stream, 0ull);
  guard_kernel<<<reduction_blocks_for(static_cast<std::int64_t>(bytes)), kThreads, 0, stream>>>(
      static_cast<const unsigned char *>(data), bytes, damaged.ptr);
  PTXB_CUDA(cudaGetLastError());
  return damaged.read(stream);
}

CompareStats compare_to_reference(const void *output, ElemType type, const float *reference,
                                  std::int64_t count, double atol, double rtol, cudaStream_t stream,
                                  bool pattern) {
  DeviceScalar<DeviceStats> stats(stream, DeviceStats{0, 0, 0, 0, 0, 0, ~0ull});
  const float fa = static_cast<float>(atol), fr = static_cast<float>(rtol);
  const std::uint32_t p = poison_bits(type);
  // One switch over the element types for the compare and, when asked and needed, the pattern passes.
  auto each_type = [&](auto &&run) {
    switch (type) {
      case ElemType::bf16:
        return run(static_cast<const __nv_bfloat16 *>(output), static_cast<std::uint16_t>(p));
      case ElemType::f16:
        return run(static_cast<const __half *>(output), static_cast<std::uint16_t>(p));
      case ElemType::f32:
        return run(static_cast<const float *>(output), p);
      case ElemType::e4m3:
        return run(static_cast<const __nv_fp8_e4m3 *>(output), static_cast<std::uint8_t>(p));
      case ElemType::e5m2:
        return run(static_cast<const __nv_fp8_e5m2 *>(output), static_cast<std::uint8_t>(p));
      case ElemType::i32:
        return run(static_cast<const int *>(output), p);
    }
  };
  each_type([&](const auto *out, auto poison) {
    compare_typed(out, reference, count, fa, fr, poison, stats.ptr, stream);
  });
  const DeviceStats d = stats.read(stream);
  CompareStats s;
  s.elements = static_cast<std::uint64_t>(count);
  s.mismatches = d.mismatches;
  s.nan_count = d.nan_count;
  s.unwritten_count = d.unwritten;
  float fabs_err, frel_err, fratio;
  std::memcpy(&fabs_err, &d.max_abs_bits, 4);
  std::memcpy(&frel_err, &d.max_rel_bits, 4);
  std::memcpy(&fratio, &d.max_ratio_bits, 4);
  s.max_abs_error = fabs_err;
  s.max_rel_error = frel_err;
  s.max_error_ratio = fratio;
  if (d.first_mismatch != ~0ull) {
    s.first_mismatch = static_cast<std::int64_t>(d.first_mismatch);
    s.first_got = read_element(output, type, s.first_mismatch, stream);
    float e;
    PTXB_CUDA(cudaMemcpyAsync(&e, reference + s.first_mismatch, 4, cudaMemcpyDeviceToHost, stream));
    PTXB_CUDA(cudaStreamSynchronize(stream));
    s.first_expected = e;
  }
  if (pattern && d.mismatches > 0)
    each_type([&](const auto *out, auto poison) {
      collect_pattern(out, reference, count, fa, fr, poison, d.mismatches, stream, s);
    });
  return s;
}

std::uint64_t count_bit_differences(const void *a, const void *b, ElemType type, std::int64_t count,
                                    cudaStream_t stream) {
  DeviceScalar<unsigned long long> diff(stream, 0ull);
  const int blocks = reduction_blocks_for(count);
  switch (size_of(type)) {
    case 1:
      bitdiff_kernel<<<blocks, kThreads, 0, stream>>>(static_cast<const std::uint8_t *>(a),
                                                      static_cast<const std::uint8_t *>(b), count, diff.ptr);
      break;
    case 2:
      bitdiff_kernel<<<blocks, kThreads, 0, stream>>>(static_cast<const std::uint16_t *>(a),
                                                      static_cast<const std::uint16_t *>(b), count, diff.ptr);
      break;
    default:
      bitdiff_kernel<<<blocks, kThreads, 0, stream>>>(static_cast<const std::uint32_t *>(a),
                                                      static_cast<const std::uint32_t *>(b), count, diff.ptr);
      break;
  }
  PTXB_CUDA(cudaGetLastError());
  return diff.read(stream);
}

double read_element(const void *data, ElemType type, std::int64_t index, cudaStream_t stream) {
  unsigned char raw[4] = {0, 0, 0, 0};
  const std::size_t sz = size_of(type);
  PTXB_CUDA(cudaMemcpyAsync(raw, static_cast<const unsigned char *>(data) + index * sz, sz,
                            cudaMemcpyDeviceToHost, stream));
  PTXB_CUDA(cudaStreamSynchronize(stream));
  switch (type) {
    case ElemType::bf16: {
      __nv_bfloat16_raw r;
      std::memcpy(&r.x, raw, 2);
      return static_cast<double>(__bfloat162float(__nv_bfloat16(r)));
    }
    case ElemType::f16: {
      __half_raw r;
      std::memcpy(&r.x, raw, 2);
      return static_cast<double>(__half2float(__half(r)));
    }
    case ElemType::f32: {
      float f;
      std::memcpy(&f, raw, 4);
      return f;
    }
    case ElemType::e4m3: {
      __nv_fp8_e4m3 v;
      v.__x = raw[0];
      return static_cast<double>(static_cast<float>(v));
    }
    case ElemType::e5m2: {
      __nv_fp8_e5m2 v;
      v.__x = raw[0];
      return static_cast<double>(static_cast<float>(v));
    }
    case ElemType::i32: {
      int i;
      std::memcpy(&i, raw, 4);
      return i;
    }
  }
  return 0;
}

}  // namespace ptxbench::worker::detail
