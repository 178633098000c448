// Placeholder until the 'export' command lands: it registers nothing.
#include "cli/cli.hpp"

namespace ptxbench::cli {
void register_export_command(CLI::App &, Action &) {}
}  // namespace ptxbench::cli
