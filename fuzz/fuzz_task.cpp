// libFuzzer target: task JSON loading with schema validation (tasks/task.hpp). The loader reads
// files, so each input is written to a private file under /dev/shm (or /tmp) first.
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "fuzz_common.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t *data, std::size_t size) {
  static const std::filesystem::path file = [] {
    const std::filesystem::path dir = std::filesystem::exists("/dev/shm") ? "/dev/shm" : "/tmp";
    return dir / ("ptxbench-fuzz-task-" + std::to_string(getpid()) + ".json");
  }();
  {
    std::ofstream out(file, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char *>(data), static_cast<std::streamsize>(size));
  }
  const auto task = ptxbench::tasks::load_task_file(file);
  if (!task) {
    if (task.error().empty()) __builtin_trap();
    return 0;
  }
  (void)task->to_json().dump();
  for (const auto &w : task->workloads)
    for (const auto &t : task->tensors) (void)task->shape_of(t, w);
  return 0;
}
