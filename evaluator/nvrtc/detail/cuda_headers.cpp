#include "evaluator/nvrtc/detail/cuda_headers.hpp"

#include <dlfcn.h>
#include <nvrtc.h>

#include <cstdlib>
#include <sstream>

#include <fmt/core.h>

namespace ptxbench::evaluator::detail {

namespace fs = std::filesystem;

namespace {

bool is_toolkit_root(const fs::path &root) {
  std::error_code ec;
  return !root.empty() && fs::exists(root / "include" / "cuda_runtime.h", ec);
}

std::optional<fs::path> root_from_env(const char *name) {
  const char *value = std::getenv(name);
  if (!value || !*value) return std::nullopt;
  fs::path root(value);
  return is_toolkit_root(root) ? std::optional(root) : std::nullopt;
}

std::optional<fs::path> root_from_nvcc_on_path() {
  const char *path = std::getenv("PATH");
  if (!path) return std::nullopt;
  std::stringstream dirs(path);
  for (std::string dir; std::getline(dirs, dir, ':');) {
    if (dir.empty()) continue;
    std::error_code ec;
    fs::path nvcc = fs::path(dir) / "nvcc";
    if (!fs::exists(nvcc, ec)) continue;
    fs::path real = fs::canonical(nvcc, ec);
    if (ec) continue;
    fs::path root = real.parent_path().parent_path();  // <root>/bin/nvcc
    if (is_toolkit_root(root)) return root;
  }
  return std::nullopt;
}

std::optional<fs::path> root_from_nvrtc_library() {
  Dl_info info{};
  if (::dladdr(reinterpret_cast<void *>(&nvrtcVersion), &info) == 0 || info.dli_fname == nullptr)
    return std::nullopt;
  std::error_code ec;
  fs::path lib = fs::canonical(info.dli_fname, ec);
  if (ec) return std::nullopt;
  // <root>/lib64/libnvrtc.so, <root>/targets/<arch>/lib/libnvrtc.so, or a distribution's /usr/lib/<triple>.
  for (fs::path p = lib.parent_path(); !p.empty() && p != p.parent_path(); p = p.parent_path()) {
    if (is_toolkit_root(p)) return p;
    if (p.filename() == "targets") break;
  }
  fs::path up = lib.parent_path();
  for (int i = 0; i < 4 && !up.empty(); ++i, up = up.parent_path())
    if (is_toolkit_root(up)) return up;
  return std::nullopt;
}

// Standard names nvcc resolves through the host's C and C++ headers. NVRTC has the math functions as
// builtins in the global namespace; <cmath> adds them to std, as libstdc++ does.
constexpr const char *kMathNames[] = {
    "abs",       "fabs",     "fmod",     "remainder", "remquo",  "fma",       "fmax",   "fmin",
    "fdim",      "nan",      "exp",      "exp2",      "expm1",   "log",       "log10",  "log2",
    "log1p",     "pow",      "sqrt",     "rsqrt",     "cbrt",    "hypot",     "sin",    "cos",
    "tan",       "asin",     "acos",     "atan",      "atan2",   "sinh",      "cosh",   "tanh",
    "asinh",     "acosh",    "atanh",    "erf",       "erfc",    "tgamma",    "lgamma", "ceil",
    "floor",     "trunc",    "round",    "lround",    "llround", "nearbyint", "rint",   "lrint",
    "llrint",    "frexp",    "ldexp",    "modf",      "scalbn",  "scalbln",   "ilogb",  "logb",
    "nextafter", "copysign", "isfinite", "isinf",     "isnan",   "signbit",   "min",    "max"};

constexpr const char *kIntNames[] = {
    "int8_t",         "int16_t",        "int32_t",       "int64_t",       "uint8_t",       "uint16_t",
    "uint32_t",       "uint64_t",       "intptr_t",      "uintptr_t",     "intmax_t",      "uintmax_t",
    "int_least8_t",   "int_least16_t",  "int_least32_t", "int_least64_t", "uint_least8_t", "uint_least16_t",
    "uint_least32_t", "uint_least64_t", "int_fast8_t",   "int_fast16_t",  "int_fast32_t",  "int_fast64_t",
    "uint_fast8_t",   "uint_fast16_t",  "uint_fast32_t", "uint_fast64_t"};

std::string usings(const char *const *names, std::size_t count) {
  std::string out = "namespace std {\n";
  for (std::size_t i = 0; i < count; ++i) out += fmt::format("using ::{};\n", names[i]);
  return out + "}\n";
}

std::vector<std::pair<std::string, std::string>> make_shims() {
  std::vector<std::pair<std::string, std::string>> h;
  auto add = [&](std::initializer_list<const char *> names, const std::string &body) {
    for (const char *name : names) h.emplace_back(name, "#pragma once\n" + body);
  };
  add({"cstdint", "stdint.h"}, "#include <cuda/std/cstdint>\n" + usings(kIntNames, std::size(kIntNames)));
  add({"cstddef", "stddef.h"},
      "#include <cuda/std/cstddef>\nnamespace std { using ::size_t; using ::ptrdiff_t; using "
      "cuda::std::nullptr_t; "
      "using cuda::std::byte; }\n");
  add({"climits", "limits.h"}, "#include <cuda/std/climits>\n");
  // IEEE-754 binary32/binary64 limits, as <float.h> gives them on every CUDA host.
  add({"cfloat", "float.h"}, R"(#ifndef FLT_MAX
#define FLT_RADIX 2
#define FLT_MANT_DIG 24
#define DBL_MANT_DIG 53
#define FLT_DIG 6
#define DBL_DIG 15
#define FLT_MIN_EXP (-125)
#define FLT_MAX_EXP 128
#define DBL_MIN_EXP (-1021)
#define DBL_MAX_EXP 1024
#define FLT_MAX 3.40282346638528859811704183484516925e+38F
#define FLT_MIN 1.17549435082228750796873653722224568e-38F
#define FLT_EPSILON 1.19209289550781250000000000000000000e-7F
#define FLT_TRUE_MIN 1.40129846432481707092372958328991613e-45F
#define DBL_MAX 1.79769313486231570814527423731704357e+308
#define DBL_MIN 2.22507385850720138309023271733240406e-308
#define DBL_EPSILON 2.22044604925031308084726333618164062e-16
#define DBL_TRUE_MIN 4.94065645841246544176568792868221372e-324
#endif
)");
  add({"cmath", "math.h"},
      "#include <math_constants.h>\n#include <float.h>\n" + usings(kMathNames, std::size(kMathNames)));
  add({"cstdlib", "stdlib.h"}, "#include <cstddef>\n");  // malloc, free, abs: NVRTC builtins
  add({"cstring", "string.h"}, "#include <cstddef>\n");  // memcpy, memset: NVRTC builtins
  add({"cstdio", "stdio.h"}, "#include <cstddef>\n");    // printf: an NVRTC builtin
  // Device assert as CUDA's <assert.h> defines it: a failed assert reports and traps the kernel.
  add({"cassert", "assert.h"}, R"(#include <cstddef>
extern "C" __device__ void __assertfail(const char *, const char *, unsigned int, const char *, size_t);
#undef assert
#ifdef NDEBUG
#define assert(e) ((void)0)
#else
#define assert(e) ((e) ? (void)0 : __assertfail(#e, __FILE__, __LINE__, __func__, sizeof(char)))
#endif
)");
  for (const char *name : {"type_traits", "utility", "limits", "array", "tuple", "functional"}) {
    h.emplace_back(name, fmt::format("#pragma once\n#include <cuda/std/{}>\nnamespace std {{ using namespace "
                                     "::cuda::std; }}\n",
                                     name));
  }
  // nvcc's device compilation includes cuda_runtime.h and through it math.h: INFINITY, NAN and the
  // math functions need no include there. The CUDART_* constants and FLT_MAX come along here too.
  h.emplace_back(std::string(kPreludeName), R"(#pragma once
#include <math_constants.h>
#include <float.h>
#ifndef INFINITY
#define INFINITY CUDART_INF_F
#endif
#ifndef NAN
#define NAN CUDART_NAN_F
#endif
#ifndef HUGE_VALF
#define HUGE_VALF CUDART_INF_F
#endif
#ifndef HUGE_VAL
#define HUGE_VAL CUDART_INF
#endif
)");
  return h;
}

}  // namespace

std::optional<CudaIncludeDirs> find_cuda_include_dirs() {
  std::optional<fs::path> root;
  std::string by;
  if ((root = root_from_env("CUDA_PATH"))) {
    by = "CUDA_PATH";
  } else if ((root = root_from_env("CUDA_HOME"))) {
    by = "CUDA_HOME";
  } else if ((root = root_from_nvcc_on_path())) {
    by = "nvcc on PATH";
  } else if ((root = root_from_nvrtc_library())) {
    by = "the NVRTC library";
  } else {
    return std::nullopt;
  }
  CudaIncludeDirs out;
  out.found_by = by;
  std::error_code ec;
  const fs::path include = fs::canonical(*root / "include", ec);
  out.dirs.push_back(ec ? *root / "include" : include);
  // CUDA 13 keeps libcu++ (<cuda/std/...>, <cuda/barrier>, <cuda/ptx>), CUB and Thrust under include/cccl.
  if (fs::is_directory(out.dirs[0] / "cccl", ec)) out.dirs.push_back(out.dirs[0] / "cccl");
  return out;
}

const std::vector<std::pair<std::string, std::string>> &nvrtc_shim_headers() {
  static const auto shims = make_shims();
  return shims;
}

std::string host_code_hint(std::string_view log) {
  static constexpr std::string_view kHostHeaders[] = {
      "iostream", "vector",         "string\"",           "map",    "memory", "fstream", "sstream",  "thread",
      "chrono",   "cuda_runtime.h", "cuda_runtime_api.h", "cublas", "cudnn",  "torch",   "algorithm"};
  const auto open = log.find("cannot open source file \"");
  if (open != std::string_view::npos) {
    const auto start = open + std::string_view("cannot open source file \"").size();
    const auto end = log.find('"', start);
    const std::string_view name = log.substr(start, end == std::string_view::npos ? 0 : end - start);
    for (std::string_view h : kHostHeaders) {
      std::string_view bare = h.back() == '"' ? h.substr(0, h.size() - 1) : h;
      if (name == bare || name.starts_with(bare))
        return fmt::format(
            "<{}> is host-only: a ```cuda candidate is device code alone (__global__ and __device__ "
            "functions, compiled like `nvcc -ptx` of a device-only .cu for sm_90a); the harness allocates, "
            "launches and times it. Device headers (<cstdint>, <cmath>, <cuda/barrier>, <cuda/ptx>, "
            "<cuda.h>, "
            "<cooperative_groups.h>, <cuda_bf16.h>, ...) are available.",
            name);
    }
  }
  if (log.find("<<<") != std::string_view::npos || log.find("cudaMalloc") != std::string_view::npos ||
      log.find("cudaMemcpy") != std::string_view::npos)
    return "host code (a <<<...>>> launch, cudaMalloc, cudaMemcpy) is not accepted: a ```cuda candidate is "
           "device code alone; the harness allocates, launches and times it from the manifest.";
  return {};
}

}  // namespace ptxbench::evaluator::detail
