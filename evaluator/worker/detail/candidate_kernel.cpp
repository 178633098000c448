#include "evaluator/worker/detail/candidate_kernel.hpp"

#include <chrono>
#include <cstring>
#include <thread>

#include "evaluator/worker/detail/cuda_check.hpp"

namespace ptxbench::worker::detail {
namespace {

int device_attribute(CUdevice_attribute a) {
  CUdevice dev;
  PTXB_CU(cuCtxGetDevice(&dev));
  int v = 0;
  PTXB_CU(cuDeviceGetAttribute(&v, a, dev));
  return v;
}

int function_attribute(CUfunction f, CUfunction_attribute a) {
  int v = 0;
  PTXB_CU(cuFuncGetAttribute(&v, a, f));
  return v;
}

std::string dims(const std::array<std::int64_t, 3> &d) {
  std::string s = "(";  // appended piecewise: GCC 12 warns falsely on "(" + std::string
  s += std::to_string(d[0]);
  s += ", ";
  s += std::to_string(d[1]);
  s += ", ";
  s += std::to_string(d[2]);
  s += ")";
  return s;
}

std::optional<CUtensorMapDataType> tensor_map_type(ElemType t) {
  switch (t) {
    case ElemType::bf16:
      return CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
    case ElemType::f16:
      return CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
    case ElemType::f32:
      return CU_TENSOR_MAP_DATA_TYPE_FLOAT32;
    case ElemType::e4m3:
    case ElemType::e5m2:
      return CU_TENSOR_MAP_DATA_TYPE_UINT8;  // TMA moves fp8 as bytes
    case ElemType::i32:
      return CU_TENSOR_MAP_DATA_TYPE_INT32;
  }
  return std::nullopt;
}

std::optional<CUtensorMapSwizzle> swizzle_of(const std::string &s) {
  if (s == "none" || s.empty()) return CU_TENSOR_MAP_SWIZZLE_NONE;
  if (s == "32B" || s == "b32" || s == "32") return CU_TENSOR_MAP_SWIZZLE_32B;
  if (s == "64B" || s == "b64" || s == "64") return CU_TENSOR_MAP_SWIZZLE_64B;
  if (s == "128B" || s == "b128" || s == "128") return CU_TENSOR_MAP_SWIZZLE_128B;
  return std::nullopt;
}

std::optional<CUtensorMapL2promotion> l2_of(const std::string &s) {
  if (s == "none" || s.empty()) return CU_TENSOR_MAP_L2_PROMOTION_NONE;
  if (s == "64B") return CU_TENSOR_MAP_L2_PROMOTION_L2_64B;
  if (s == "128B") return CU_TENSOR_MAP_L2_PROMOTION_L2_128B;
  if (s == "256B") return CU_TENSOR_MAP_L2_PROMOTION_L2_256B;
  return std::nullopt;
}

std::optional<CUtensorMapInterleave> interleave_of(const std::string &s) {
  if (s == "none" || s.empty()) return CU_TENSOR_MAP_INTERLEAVE_NONE;
  if (s == "16B") return CU_TENSOR_MAP_INTERLEAVE_16B;
  if (s == "32B") return CU_TENSOR_MAP_INTERLEAVE_32B;
  return std::nullopt;
}

std::string strip_dot(const std::string &t) {
  return (!t.empty() && t[0] == '.') ? t.substr(1) : t;
}

}  // namespace

std::string CandidateKernel::load(const std::string &cubin_bytes, const std::string &entry) {
  entry_ = entry;
  CUresult r = cuModuleLoadData(&module_, cubin_bytes.data());
  if (r != CUDA_SUCCESS) return "the device could not load the compiled module: " + describe(r);
  r = cuModuleGetFunction(&function_, module_, entry.c_str());
  if (r != CUDA_SUCCESS) return "entry '" + entry + "' not found in the compiled module: " + describe(r);
  return "";
}

int CandidateKernel::registers() const {
  return function_attribute(function_, CU_FUNC_ATTRIBUTE_NUM_REGS);
}

std::string CandidateKernel::prepare_launch(const LaunchPlan &l) {
  for (int i = 0; i < 3; ++i)
    if (l.grid[i] < 1 || l.block[i] < 1 || l.cluster[i] < 1)
      return "grid " + dims(l.grid) + ", block " + dims(l.block) + " and cluster " + dims(l.cluster) +
             " must all be >= 1 in every dimension";
  if (l.grid[0] > 2147483647LL || l.grid[1] > 65535 || l.grid[2] > 65535)
    return "grid " + dims(l.grid) + " exceeds the device limits (2147483647, 65535, 65535)";
  if (l.block[0] > 1024 || l.block[1] > 1024 || l.block[2] > 64)
    return "block " + dims(l.block) + " exceeds the per-dimension limits (1024, 1024, 64)";
  const std::int64_t threads = l.block[0] * l.block[1] * l.block[2];
  const int max_threads = function_attribute(function_, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK);
  if (threads > max_threads)
    return "block of " + std::to_string(threads) + " threads exceeds what this kernel can run per block (" +
           std::to_string(max_threads) + " with its " + std::to_string(registers()) +
           " registers per thread and launch bounds)";
  const int static_smem = function_attribute(function_, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES);
  const int optin = device_attribute(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN);
  if (l.shared_bytes < 0 || l.shared_bytes + static_smem > optin)
    return "shared memory per block " + std::to_string(l.shared_bytes) + " dynamic + " +
           std::to_string(static_smem) + " static bytes exceeds the device limit of " +
           std::to_string(optin) + " bytes";
  if (l.shared_bytes > 48 * 1024) {
    const CUresult r = cuFuncSetAttribute(function_, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                          static_cast<int>(l.shared_bytes));
    if (r != CUDA_SUCCESS)
      return "the device refused " + std::to_string(l.shared_bytes) +
             " bytes of dynamic shared memory: " + describe(r);
  }
  const std::int64_t cluster_blocks = l.cluster[0] * l.cluster[1] * l.cluster[2];
  if (cluster_blocks > 1) {
    for (int i = 0; i < 3; ++i)
      if (l.grid[i] % l.cluster[i] != 0)
        return "grid " + dims(l.grid) + " is not a multiple of the cluster shape " + dims(l.cluster);
    if (cluster_blocks > 16)
      return "cluster of " + std::to_string(cluster_blocks) + " blocks exceeds the limit of 16";
    if (cluster_blocks > 8) {
      const CUresult r =
          cuFuncSetAttribute(function_, CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 1);
      if (r != CUDA_SUCCESS)
        return "clusters above 8 blocks (non-portable) are not allowed here: " + describe(r);
    }
    // Can such a cluster be co-scheduled at all (shared memory and registers of all its blocks on one GPC)?
    CUlaunchConfig config{};
    CUlaunchAttribute attr{};
    attr.id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
    attr.value.clusterDim.x = static_cast<unsigned>(l.cluster[0]);
    attr.value.clusterDim.y = static_cast<unsigned>(l.cluster[1]);
    attr.value.clusterDim.z = static_cast<unsigned>(l.cluster[2]);
    config.gridDimX = static_cast<unsigned>(l.grid[0]);
    config.gridDimY = static_cast<unsigned>(l.grid[1]);
    config.gridDimZ = static_cast<unsigned>(l.grid[2]);
    config.blockDimX = static_cast<unsigned>(l.block[0]);
    config.blockDimY = static_cast<unsigned>(l.block[1]);
    config.blockDimZ = static_cast<unsigned>(l.block[2]);
    config.sharedMemBytes = static_cast<unsigned>(l.shared_bytes);
    config.attrs = &attr;
    config.numAttrs = 1;
    int clusters = 0;
    const CUresult r = cuOccupancyMaxActiveClusters(&clusters, function_, &config);
    if (r != CUDA_SUCCESS)
      return "the device refused the cluster shape " + dims(l.cluster) + ": " + describe(r);
    if (clusters == 0)
      return "a cluster of " + std::to_string(cluster_blocks) + " blocks with " +
             std::to_string(l.shared_bytes) +
             " bytes of dynamic shared memory each cannot be scheduled on this device";
  }
  return "";
}

std::string CandidateKernel::pack(const LaunchPlan &l, const WorkloadSpec &w, const TensorSet &tensors,
                                  PackedParams &out) const {
  out.slots.assign(l.params.size(), PackedParams::Slot{});
  out.pointers.clear();
  for (std::size_t i = 0; i < l.params.size(); ++i) {
    const ResolvedParam &p = l.params[i];
    unsigned char *slot = out.slots[i].bytes;
    const std::string where = "parameter " + std::to_string(i) + " ('" + p.name + "')";
    if (p.kind == ParamKind::tensor) {
      auto it = tensors.find(p.name);
      if (it == tensors.end()) return where + ": no tensor of that name";
      const CUdeviceptr ptr = reinterpret_cast<CUdeviceptr>(it->second.data);
      std::memcpy(slot, &ptr, sizeof(ptr));
    } else if (p.kind == ParamKind::scalar) {
      double value;
      if (const ScalarSpec *s = w.find_scalar(p.name))
        value = s->value;
      else if (auto sym = w.symbols.find(p.name); sym != w.symbols.end())
        value = static_cast<double>(sym->second);
      else
        return where + ": no scalar or symbol of that name";
      const std::string t = strip_dot(p.ptx_type.empty() ? "f32" : p.ptx_type);
      if (t == "f32") {
        const float f = static_cast<float>(value);
        std::memcpy(slot, &f, 4);
      } else if (t == "f64") {
        std::memcpy(slot, &value, 8);
      } else if (t == "u32" || t == "s32" || t == "b32") {
        const std::int32_t v = static_cast<std::int32_t>(value);
        std::memcpy(slot, &v, 4);
      } else if (t == "u64" || t == "s64" || t == "b64") {
        const std::int64_t v = static_cast<std::int64_t>(value);
        std::memcpy(slot, &v, 8);
      } else {
        return where + ": unsupported scalar parameter type ." + t;
      }
    } else if (p.kind == ParamKind::workspace) {
      auto it = tensors.find(protocol::kWorkspaceName);
      if (it == tensors.end()) return where + ": the launch declares no workspace (workspace_bytes)";
      const CUdeviceptr ptr = reinterpret_cast<CUdeviceptr>(it->second.data);
      std::memcpy(slot, &ptr, sizeof(ptr));
    } else if (p.kind == ParamKind::tensor_map) {
      auto it = tensors.find(p.name);
      if (it == tensors.end() || !it->second.spec)
        return where + ": no tensor of that name for the tensor map";
      const DeviceTensor &t = it->second;
      const auto type = tensor_map_type(t.spec->type);
      const auto swz = swizzle_of(to_string(p.swizzle));
      const auto l2 = l2_of(p.l2_promotion);
      const auto il = interleave_of(p.interleave);
      if (!type || !swz || !l2 || !il) return where + ": unsupported tensor-map setting";
      std::vector<cuuint64_t> gdim, gstride;
      std::vector<cuuint32_t> box, estride;
      if (p.dims.empty()) {  // the tensor's own shape, innermost first
        std::int64_t stride = static_cast<std::int64_t>(size_of(t.spec->type));
        for (auto d = t.spec->shape.rbegin(); d != t.spec->shape.rend(); ++d) {
          gdim.push_back(static_cast<cuuint64_t>(*d));
          if (d != t.spec->shape.rbegin()) gstride.push_back(static_cast<cuuint64_t>(stride));
          stride *= *d;
        }
      } else {
        for (auto d : p.dims) gdim.push_back(static_cast<cuuint64_t>(d));
        for (auto s : p.strides_bytes) gstride.push_back(static_cast<cuuint64_t>(s));
      }
      for (auto b : p.box) box.push_back(static_cast<cuuint32_t>(b));
      if (gdim.empty() || gdim.size() > 5 || box.size() != gdim.size() || gstride.size() + 1 != gdim.size())
        return where + ": tensor map needs rank 1..5 with one box size per dimension (got " +
               std::to_string(gdim.size()) + " dims, " + std::to_string(box.size()) + " box sizes, " +
               std::to_string(gstride.size()) + " strides)";
      estride.assign(gdim.size(), 1);
      CUtensorMap map;
      const CUresult r =
          cuTensorMapEncodeTiled(&map, *type, static_cast<cuuint32_t>(gdim.size()), t.data, gdim.data(),
                                 gstride.data(), box.data(), estride.data(), *il, *swz, *l2,
                                 p.oob_fill == "nan" ? CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA
                                                     : CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
      if (r != CUDA_SUCCESS)
        return where +
               ": cuTensorMapEncodeTiled rejected the tensor map (box sizes must be <= 256, the inner box " +
               "times the element size a multiple of 16 bytes and within the swizzle span, strides multiples "
               "of " +
               "16 bytes): " + describe(r);
      static_assert(sizeof(map) == 128);
      std::memcpy(slot, &map, sizeof(map));
    } else {
      return where + ": unknown parameter kind '" + to_string(p.kind) + "'";
    }
    out.pointers.push_back(slot);
  }
  return "";
}

CUresult CandidateKernel::launch(const LaunchPlan &l, PackedParams &params, CUstream stream) const {
  CUlaunchConfig config{};
  CUlaunchAttribute attr{};
  config.gridDimX = static_cast<unsigned>(l.grid[0]);
  config.gridDimY = static_cast<unsigned>(l.grid[1]);
  config.gridDimZ = static_cast<unsigned>(l.grid[2]);
  config.blockDimX = static_cast<unsigned>(l.block[0]);
  config.blockDimY = static_cast<unsigned>(l.block[1]);
  config.blockDimZ = static_cast<unsigned>(l.block[2]);
  config.sharedMemBytes = static_cast<unsigned>(l.shared_bytes);
  config.hStream = stream;
  if (l.cluster[0] * l.cluster[1] * l.cluster[2] > 1) {
    attr.id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
    attr.value.clusterDim.x = static_cast<unsigned>(l.cluster[0]);
    attr.value.clusterDim.y = static_cast<unsigned>(l.cluster[1]);
    attr.value.clusterDim.z = static_cast<unsigned>(l.cluster[2]);
    config.attrs = &attr;
    config.numAttrs = 1;
  }
  return cuLaunchKernelEx(&config, function_, params.pointers.data(), nullptr);
}

WaitOutcome wait_with_deadline(CUstream stream, double deadline_ms) {
  CUevent done;
  PTXB_CU(cuEventCreate(&done, CU_EVENT_DISABLE_TIMING));
  CUresult r = cuEventRecord(done, stream);
  if (r != CUDA_SUCCESS) {
    cuEventDestroy(done);
    return {WaitOutcome::fault, r};
  }
  const auto start = std::chrono::steady_clock::now();
  auto pause = std::chrono::microseconds(20);
  while (true) {
    r = cuEventQuery(done);
    if (r == CUDA_SUCCESS) {
      cuEventDestroy(done);
      return {WaitOutcome::done, CUDA_SUCCESS};
    }
    if (r != CUDA_ERROR_NOT_READY) return {WaitOutcome::fault, r};
    const double waited =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    if (waited > deadline_ms) return {WaitOutcome::hang, CUDA_ERROR_NOT_READY};
    std::this_thread::sleep_for(pause);
    if (pause < std::chrono::microseconds(1000)) pause *= 2;
  }
}

}  // namespace ptxbench::worker::detail
