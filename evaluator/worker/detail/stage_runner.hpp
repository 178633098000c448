// The worker's stages over one job, in their running order: correctness, timing, execution counts,
// generalization, profile (so that no timed launch ever runs patched by CUPTI, and a fault on a hidden
// shape comes after the shown workloads' stages are written). What the stages share is a StageContext
// (stage_context.hpp); each stage is an object of its own, given that context: CorrectnessStage,
// TimingStage, ExecutionStage, GeneralizationStage, ProfileStage (one header each in detail/, one source
// file each in evaluator/worker/).
#pragma once

#include <string>

#include "evaluator/worker/detail/protocol_names.hpp"
#include "evaluator/worker/detail/stage_context.hpp"
#include "evaluator/worker/detail/worker_support.hpp"

namespace ptxbench::worker::detail {

class Worker {
 public:
  Worker(Job job, std::string result_path, Device device, json worker_figures);

  /// Runs the stages the job asks for; returns the exit code (a fatal stage exits the process instead).
  int run();

 private:
  StageContext ctx_;
};

}  // namespace ptxbench::worker::detail
