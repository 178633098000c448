// Machine fault versus kernel fault, as a typed value: why a GPU stage said nothing about the kernel.
#pragma once

#include <optional>
#include <string_view>

namespace ptxbench::evaluator {

/// The machine could not run the GPU stage (the worker client decides it where it happens, never from a
/// message). A verdict carrying one is not kept by the verdict cache: the next try may find the machine
/// able.
enum class MachineFault {
  worker_not_started,  ///< the worker process could not be started
  no_device,           ///< the worker found no usable GPU (its exit code says so)
  gpu_lock,            ///< the per-GPU lock file could not be opened
  /// the worker was killed by a signal the evaluator did not send (SIGKILL, SIGTERM, SIGINT, SIGHUP,
  /// SIGQUIT: the OOM killer, an operator, a job scheduler); the evaluator's own wall limit is a timeout
  worker_killed,
};

/// Whether a worker ended by `signal` was killed from outside (not a crash of its own, such as SIGSEGV).
bool killed_from_outside(int signal);

std::string_view to_string(MachineFault fault);
std::optional<MachineFault> machine_fault_from_string(std::string_view name);

}  // namespace ptxbench::evaluator
