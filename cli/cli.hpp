// The ptxbench command line: subcommands registered by cli/cmd_*.cpp, one
// error boundary in run_main.
#pragma once

#include <functional>
#include <string>

namespace CLI {
class App;
}

namespace ptxbench::cli {

/// Exit codes shared by every subcommand (documented in --help).
enum ExitCode : int {
  kExitOk = 0,              ///< success (eval: verdict ok, GPU stages possibly skipped)
  kExitVerdictFailed = 1,   ///< eval: the candidate's verdict is not ok
  kExitUsage = 2,           ///< bad arguments or config
  kExitEnvironment = 3,     ///< missing files, tasks, tools; unreadable run dirs
  kExitRequestsFailed = 4,  ///< run/resume: a turn failed for a reason other than the model (the endpoint)
  kExitInterrupted = 130,   ///< stopped by Ctrl-C (state saved)
  kExitInternal = 70,       ///< a bug: please report
};

/// Set by a subcommand's callback: what to run after parsing.
struct Action {
  std::function<int()> run;
};

void register_tasks_commands(CLI::App &app, Action &action);
void register_eval_command(CLI::App &app, Action &action);
void register_doctor_command(CLI::App &app, Action &action);
void register_run_commands(CLI::App &app, Action &action);  // run, resume
void register_export_command(CLI::App &app, Action &action);
void register_repairs_command(CLI::App &app, Action &action);
void register_report_command(CLI::App &app, Action &action);
void register_show_command(CLI::App &app, Action &action);     // in cmd_report.cpp
void register_prompt_commands(CLI::App &app, Action &action);  // prompt show, prompt packs
void register_slurm_commands(CLI::App &app, Action &action);   // slurm submit, status, resubmit
void register_merge_command(CLI::App &app, Action &action);
void register_serve_command(CLI::App &app, Action &action);  // verdicts over HTTP (serve/)

int run_main(int argc, char **argv);

}  // namespace ptxbench::cli
