// Placeholder until the 'eval' command lands: it registers nothing.
#include "cli/cli.hpp"

namespace ptxbench::cli {
void register_eval_command(CLI::App &, Action &) {}
}  // namespace ptxbench::cli
