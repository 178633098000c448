// ptxbench: thin entry point; the subcommands live in cli/.
#include "cli/cli.hpp"

int main(int argc, char **argv) {
  return ptxbench::cli::run_main(argc, argv);
}
