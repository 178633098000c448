#include "serve/serve.hpp"

#include <chrono>
#include <memory>

#include <fmt/core.h>

#include "agent/prompt_builder.hpp"
#include "evaluator/evaluator.hpp"
#include "tasks/task.hpp"

namespace ptxbench::serve {

int run_serve(const ServeConfig &config) {
  const std::filesystem::path dir =
      config.tasks_dir.empty() ? tasks::default_task_dir() : std::filesystem::path(config.tasks_dir);
  auto suite = tasks::load_task_dir(dir);
  if (!suite) {
    fmt::print(stderr, "ptxbench serve: cannot load the tasks from {}:\n{}\n", dir.string(), suite.error());
    return 3;
  }
  auto builder = agent::PromptBuilder::load(agent::PromptBuilder::default_dir());
  if (!builder) {
    fmt::print(stderr, "ptxbench serve: cannot load prompt templates: {}\n", builder.error());
    return 3;
  }
  evaluator::EvaluatorSettings base;
  base.run_gpu = !config.no_gpu;
  base.device = config.device;
  base.compile.ptxas_wall = std::chrono::milliseconds(static_cast<long>(config.ptxas_timeout_s * 1000));
  base.run_seed = config.seed && *config.seed != 0 ? *config.seed : evaluator::draw_run_seed();
  ServerOptions server = config.server;
  server.gpu_note = config.no_gpu ? "skipped (--no-gpu)" : evaluator::gpu_unavailable_reason(base);
  fmt::print(stderr,
             "ptxbench serve: {} tasks, {} evaluation thread(s), queue of {}, run seed {}; GPU stages: {}\n",
             suite->size(), config.service.workers, config.service.max_queue, base.run_seed,
             server.gpu_note.empty() ? "run" : server.gpu_note);
  const nlohmann::json environment = {{"gpu_stages", server.gpu_note.empty() ? "run" : server.gpu_note},
                                      {"device", config.device}};
  VerdictService service(config.service, std::move(*suite),
                         std::make_shared<const agent::PromptBuilder>(std::move(*builder)), environment);
  return run_server(server, service, base);
}

}  // namespace ptxbench::serve
