// Placeholder until the 'tasks' command lands: it registers nothing.
#include "cli/cli.hpp"

namespace ptxbench::cli {
void register_tasks_commands(CLI::App &, Action &) {}
}  // namespace ptxbench::cli
