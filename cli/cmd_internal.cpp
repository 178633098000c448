// Placeholder until the 'internal' command lands: it registers nothing.
#include "cli/cli.hpp"

namespace ptxbench::cli {
void register_internal_commands(CLI::App &, Action &) {}
}  // namespace ptxbench::cli
