#include "evaluator/nvrtc/nvrtc_compile.hpp"

#include <nvrtc.h>

#include <vector>

#include "evaluator/nvrtc/detail/cuda_headers.hpp"

namespace ptxbench::evaluator {

util::Expected<std::string> nvrtc_compile_in_process(const std::string &source, const std::string &arch) {
  // The stand-in standard headers and the prelude (evaluator/detail/cuda_headers.hpp) are handed to NVRTC
  // in memory; the toolkit's own headers come from its include folders.
  const auto &shims = detail::nvrtc_shim_headers();
  std::vector<const char *> header_sources, header_names;
  for (const auto &[name, text] : shims) {
    header_names.push_back(name.c_str());
    header_sources.push_back(text.c_str());
  }
  nvrtcProgram program = nullptr;
  nvrtcResult rc = nvrtcCreateProgram(&program, source.c_str(), "kernel.cu", static_cast<int>(shims.size()),
                                      header_sources.data(), header_names.data());
  if (rc != NVRTC_SUCCESS)
    return util::unexpected(std::string("nvrtcCreateProgram: ") + nvrtcGetErrorString(rc));
  // compute_90a: PTX for the arch-specific feature set (wgmma, setmaxnreg need it).
  std::string arch_option = "--gpu-architecture=compute_" + (arch.starts_with("sm_") ? arch.substr(3) : arch);
  std::vector<std::string> options{arch_option, "--std=c++17", "-default-device", "-lineinfo",
                                   "--pre-include=" + std::string(detail::kPreludeName)};
  const auto include_dirs = detail::find_cuda_include_dirs();
  if (!include_dirs) {
    nvrtcDestroyProgram(&program);
    return util::unexpected(std::string(
        "the CUDA toolkit's headers were not found (CUDA_PATH, CUDA_HOME, nvcc on PATH, the NVRTC library's "
        "folder): NVRTC cannot compile CUDA candidates"));
  }
  for (const auto &dir : include_dirs->dirs) options.push_back("-I" + dir.string());
  std::vector<const char *> option_ptrs;
  for (const auto &o : options) option_ptrs.push_back(o.c_str());
  rc = nvrtcCompileProgram(program, static_cast<int>(option_ptrs.size()), option_ptrs.data());
  std::size_t log_size = 0;
  std::string log;
  if (nvrtcGetProgramLogSize(program, &log_size) == NVRTC_SUCCESS && log_size > 1) {
    log.resize(log_size);
    if (nvrtcGetProgramLog(program, log.data()) != NVRTC_SUCCESS) log.clear();
    while (!log.empty() && (log.back() == '\0' || log.back() == '\n')) log.pop_back();
  }
  if (rc != NVRTC_SUCCESS) {
    nvrtcDestroyProgram(&program);
    if (std::string hint = detail::host_code_hint(log); !hint.empty()) log = hint + "\n" + log;
    return util::unexpected(log.empty() ? std::string(nvrtcGetErrorString(rc)) : log);
  }
  std::size_t ptx_size = 0;
  std::string ptx;
  rc = nvrtcGetPTXSize(program, &ptx_size);
  if (rc == NVRTC_SUCCESS) {
    ptx.resize(ptx_size);
    rc = nvrtcGetPTX(program, ptx.data());
  }
  nvrtcDestroyProgram(&program);
  if (rc != NVRTC_SUCCESS) return util::unexpected(std::string("nvrtcGetPTX: ") + nvrtcGetErrorString(rc));
  while (!ptx.empty() && ptx.back() == '\0') ptx.pop_back();
  return ptx;
}

}  // namespace ptxbench::evaluator
