#include "cli/cli.hpp"

#include <fmt/core.h>
#include <CLI/CLI.hpp>

#include <exception>

namespace ptxbench::cli {

int run_main(int argc, char **argv) {
  CLI::App app{
      "PTXBench: measures how well language models write architecture-specific GPU kernels in PTX.\n"
      "Each candidate is judged on three separate axes: correct, target instructions executed (CUPTI),\n"
      "and speedup over cuBLASLt/cuDNN.\n\n"
      "Exit codes: 0 ok; 1 eval verdict not ok; 2 usage or config error; 3 environment error\n"
      "(missing task, file or tool); 4 run/resume: some turns failed for a non-model reason (the endpoint;\n"
      "`ptxbench resume` retries them); 70 internal error (a bug); 130 interrupted (state saved).",
      "ptxbench"};
  app.set_version_flag("--version", std::string("ptxbench ") + PTXBENCH_VERSION);
  app.require_subcommand(1);
  Action action;
  register_tasks_commands(app, action);
  register_eval_command(app, action);
  register_doctor_command(app, action);
  register_run_commands(app, action);
  register_export_command(app, action);
  register_repairs_command(app, action);
  register_report_command(app, action);
  register_show_command(app, action);
  register_prompt_commands(app, action);
  register_slurm_commands(app, action);
  register_merge_command(app, action);
  register_serve_command(app, action);
  // CLI11 reports a misspelt subcommand as "a subcommand is required"; name it instead.
  if (argc > 1 && argv[1][0] != '-') {
    const std::string word = argv[1];
    const auto subs = app.get_subcommands([&](const CLI::App *s) { return s->check_name(word); });
    if (subs.empty()) {
      fmt::print(stderr, "ptxbench: unknown subcommand '{}' (see ptxbench --help)\n", word);
      return kExitUsage;
    }
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError &e) {
    int rc = app.exit(e);
    return rc == 0 ? kExitOk : kExitUsage;
  }
  // The one error boundary: expected failures are values handled inside the
  // commands; anything thrown here is a bug.
  try {
    return action.run ? action.run() : kExitUsage;
  } catch (const std::exception &e) {
    fmt::print(stderr, "ptxbench: internal error: {}\n", e.what());
    return kExitInternal;
  }
}

}  // namespace ptxbench::cli
