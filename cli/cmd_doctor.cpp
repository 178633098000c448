// Placeholder until the 'doctor' command lands: it registers nothing.
#include "cli/cli.hpp"

namespace ptxbench::cli {
void register_doctor_command(CLI::App &, Action &) {}
}  // namespace ptxbench::cli
