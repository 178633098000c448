// SM clock and GPU identity through NVML, loaded with dlopen at run time
// (the worker never links NVML: machines without it still run the worker).
#pragma once

#include <optional>
#include <string>

namespace ptxbench::worker::detail {

/// Current SM clock in MHz of the GPU with this PCI bus id ("0000:3b:00.0"), if NVML answers.
std::optional<unsigned> sm_clock_mhz(const std::string &pci_bus_id);

}  // namespace ptxbench::worker::detail
