// What `run`, `resume` and `repairs` share: Ctrl-C handling, progress options
// and the summary printed when a run session ends.
#pragma once

#include <string>

#include "agent/runner.hpp"

namespace ptxbench::cli {

/// First Ctrl-C (or SIGTERM): finish in-flight turns and stop, resumable; second: quit at once.
void install_run_signal_handlers();
/// Run options for a --progress value (auto | redraw | lines | quiet), with the interrupt counter.
agent::RunOptions run_options_for(const std::string &progress);
/// Prints the summary table and figures; returns the exit code for how the run ended.
int finish_run_session(const agent::RunResult &result);

}  // namespace ptxbench::cli
