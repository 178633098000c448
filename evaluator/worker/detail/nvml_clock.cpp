#include "evaluator/worker/detail/nvml_clock.hpp"

#include <dlfcn.h>

namespace ptxbench::worker::detail {
namespace {

// The few NVML entry points used, declared by their documented C signatures.
using NvmlInit = int (*)();
using NvmlByPci = int (*)(const char *, void **);
using NvmlClock = int (*)(void *, int, unsigned *);
constexpr int kNvmlClockSm = 1;  // NVML_CLOCK_SM

struct Nvml {
  void *lib = nullptr;
  NvmlByPci by_pci = nullptr;
  NvmlClock clock = nullptr;
  bool ok = false;
  Nvml() {
    lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) return;
    auto init = reinterpret_cast<NvmlInit>(dlsym(lib, "nvmlInit_v2"));
    by_pci = reinterpret_cast<NvmlByPci>(dlsym(lib, "nvmlDeviceGetHandleByPciBusId_v2"));
    clock = reinterpret_cast<NvmlClock>(dlsym(lib, "nvmlDeviceGetClockInfo"));
    ok = init && by_pci && clock && init() == 0;
  }
};

}  // namespace

std::optional<unsigned> sm_clock_mhz(const std::string &pci_bus_id) {
  static Nvml nvml;
  if (!nvml.ok) return std::nullopt;
  void *dev = nullptr;
  if (nvml.by_pci(pci_bus_id.c_str(), &dev) != 0) return std::nullopt;
  unsigned mhz = 0;
  if (nvml.clock(dev, kNvmlClockSm, &mhz) != 0) return std::nullopt;
  return mhz;
}

}  // namespace ptxbench::worker::detail
