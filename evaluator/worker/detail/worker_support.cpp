#include "evaluator/worker/detail/worker_support.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <iterator>

#include <cublasLt.h>

#include "evaluator/worker/detail/sass_counts.hpp"
#include "evaluator/worker/family.hpp"
#include "util/files.hpp"

namespace ptxbench::worker::detail {

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

double monotonic_seconds() {
  return std::chrono::duration<double>(Clock::now().time_since_epoch()).count();
}

std::uint64_t mix(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

std::uint64_t name_hash(const std::string &s) {
  return util::fnv1a64(s);
}

/// Atomic write (temp file + rename, fsynced): a reader never sees half a result.
void write_atomic(const std::string &path, const std::string &data) {
  if (auto written = util::write_file_atomic(path, data); !written)
    throw WorkerError("internal", written.error());
}

std::string read_all(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw WorkerError("internal", "cannot read " + path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

/// A stage's result; `diagnostics` is a JSON array of diag() entries (stages collect them as JSON).
protocol::StageResult stage_json(Status status, const std::string &summary, json diagnostics, json figures,
                                 double wall) {
  return protocol::StageResult{status, summary, diagnostics.get<std::vector<protocol::Diagnostic>>(),
                               std::move(figures), wall};
}

json diag(const std::string &text, const std::string &severity) {
  return protocol::Diagnostic{severity, text, std::nullopt};
}

std::string fmt_num(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

std::string dims_text(const std::array<std::int64_t, 3> &d) {
  std::string s = "(";  // appended piecewise: GCC 12 warns falsely on "(" + std::string
  s += std::to_string(d[0]);
  s += ",";
  s += std::to_string(d[1]);
  s += ",";
  s += std::to_string(d[2]);
  s += ")";
  return s;
}

/// Flat row-major index -> coordinates of `shape`.
std::vector<std::int64_t> unflatten(std::int64_t index, const std::vector<std::int64_t> &shape) {
  std::vector<std::int64_t> coord(shape.size(), 0);
  for (std::size_t d = shape.size(); d-- > 0;) {
    coord[d] = shape[d] ? index % shape[d] : 0;
    index = shape[d] ? index / shape[d] : 0;
  }
  return coord;
}

std::uint64_t output_elements(const WorkloadSpec &spec) {
  std::uint64_t elements = 0;
  for (const auto &t : spec.tensors)
    if (t.is_output) elements += static_cast<std::uint64_t>(t.elements());
  return elements;
}

std::string coord_text(const std::vector<std::int64_t> &c) {
  std::string s = "[";
  for (std::size_t i = 0; i < c.size(); ++i) s += (i ? ", " : "") + std::to_string(c[i]);
  return s + "]";
}

std::uint64_t guard_damage(const DeviceTensor &t, cudaStream_t s) {
  const auto *base = static_cast<const unsigned char *>(t.base);
  std::uint64_t n = detail::count_guard_damage(base, t.guard_bytes, s);
  n += detail::count_guard_damage(base + t.guard_bytes + t.bytes, t.guard_bytes, s);
  if (n) {  // restore the pattern so later trials report their own damage
    PTXB_CUDA(cudaMemsetAsync(t.base, detail::kGuardByte, t.guard_bytes, s));
    PTXB_CUDA(cudaMemsetAsync(static_cast<unsigned char *>(t.base) + t.guard_bytes + t.bytes,
                              detail::kGuardByte, t.guard_bytes, s));
  }
  return n;
}

json DeviceFacts::to_json() const {
  return json{{"gpu_name", name},
              {"gpu_index", ordinal},
              {"gpu_pci_bus_id", pci_bus_id},
              {"gpu_uuid", uuid},
              {"compute_capability", std::to_string(cc_major) + "." + std::to_string(cc_minor)},
              {"sm_count", sm_count},
              {"l2_bytes", l2_bytes},
              {"memory_bytes", memory_bytes},
              {"max_sm_clock_mhz", clock_khz / 1000},
              {"memory_clock_mhz", mem_clock_khz / 1000},
              {"memory_bus_width_bits", bus_width_bits},
              {"driver_version", driver_version},
              {"cuda_runtime_version", runtime_version},
              {"cublaslt_version", cublasLtGetVersion()},
              {"cupti_version", detail::cupti_version()}};
}

DeviceFacts device_facts(CUdevice dev, int ordinal) {
  DeviceFacts f;
  f.ordinal = ordinal;
  char name[256] = {0};
  PTXB_CU(cuDeviceGetName(name, sizeof name, dev));
  f.name = name;
  char pci[64] = {0};
  if (cuDeviceGetPCIBusId(pci, sizeof pci, dev) == CUDA_SUCCESS) f.pci_bus_id = pci;
  CUuuid uuid;
  if (cuDeviceGetUuid(&uuid, dev) == CUDA_SUCCESS) {
    char hex[40];
    for (int i = 0; i < 16; ++i)
      std::snprintf(hex + 2 * i, 3, "%02x", static_cast<unsigned>(static_cast<unsigned char>(uuid.bytes[i])));
    f.uuid = std::string("GPU-") + hex;
  }
  auto attr = [&](CUdevice_attribute a) {
    int v = 0;
    PTXB_CU(cuDeviceGetAttribute(&v, a, dev));
    return v;
  };
  f.sm_count = attr(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
  f.cc_major = attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
  f.cc_minor = attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
  f.clock_khz = attr(CU_DEVICE_ATTRIBUTE_CLOCK_RATE);
  f.mem_clock_khz = attr(CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE);
  f.bus_width_bits = attr(CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH);
  f.l2_bytes = attr(CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE);
  std::size_t mem = 0;
  PTXB_CU(cuDeviceTotalMem(&mem, dev));
  f.memory_bytes = static_cast<std::int64_t>(mem);
  PTXB_CU(cuDriverGetVersion(&f.driver_version));
  cudaRuntimeGetVersion(&f.runtime_version);
  return f;
}

Device::Device(int ordinal) {
  CUresult r = cuInit(0);
  if (r != CUDA_SUCCESS) throw WorkerError("device", "cuInit failed: " + detail::describe(r));
  int count = 0;
  PTXB_CU(cuDeviceGetCount(&count));
  if (ordinal < 0 || ordinal >= count)
    throw WorkerError("device", "CUDA device " + std::to_string(ordinal) + " does not exist (" +
                                    std::to_string(count) + " visible)");
  PTXB_CU(cuDeviceGet(&dev, ordinal));
  PTXB_CU(cuDevicePrimaryCtxRetain(&ctx, dev));
  PTXB_CU(cuCtxSetCurrent(ctx));
  PTXB_CUDA(cudaSetDevice(ordinal));
  PTXB_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  facts = device_facts(dev, ordinal);
}

detail::DeviceRates device_rates(const DeviceFacts &f) {
  return {f.cc_major, f.sm_count, static_cast<double>(f.clock_khz), static_cast<double>(f.mem_clock_khz),
          f.bus_width_bits};
}

}  // namespace ptxbench::worker::detail
