// `ptxbench serve` from its settings: loads the tasks and prompt templates, starts the verdict service and
// its HTTP front, returns the process's exit code.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "serve/server.hpp"
#include "serve/service.hpp"

namespace ptxbench::serve {

struct ServeConfig {
  ServerOptions server;
  ServiceOptions service;
  std::string tasks_dir;              ///< empty = tasks::default_task_dir()
  bool no_gpu = false;                ///< skip the GPU stages for every request
  std::optional<std::uint64_t> seed;  ///< the run seed of every verdict; none = drawn once (printed)
  double ptxas_timeout_s = 30;
  int device = 0;  ///< CUDA device of the GPU stages
};

/// 0 after a drained stop; 2 bad settings; 3 tasks, prompts or the address unavailable; 130 a second signal.
int run_serve(const ServeConfig &config);

}  // namespace ptxbench::serve
