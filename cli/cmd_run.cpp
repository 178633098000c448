// Placeholder until the 'run' command lands: it registers nothing.
#include "cli/cli.hpp"

namespace ptxbench::cli {
void register_run_commands(CLI::App &, Action &) {}
}  // namespace ptxbench::cli
