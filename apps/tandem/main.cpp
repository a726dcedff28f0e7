// The stock `tandem` program: the command line in cli.cpp, with only the built-in accelerators
// (plus any loaded with --plugin=lib.so).
#include "apps/tandem/subcommands.h"

int main(int argc, char** argv) {
  return tandem::cli::run_cli(argc > 0 ? argv[0] : "tandem", std::vector<std::string>(argv + 1, argv + argc));
}
