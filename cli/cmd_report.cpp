// Placeholder until the 'report' command lands: it registers nothing.
#include "cli/cli.hpp"

namespace ptxbench::cli {
void register_report_command(CLI::App &, Action &) {}
}  // namespace ptxbench::cli
