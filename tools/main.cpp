// The `iron` command line.
#include <CLI/CLI.hpp>
#include <iostream>

int main(int argc, char** argv) {
  CLI::App app{"iron: operators and graphs over them, and the tools built on them"};
  app.require_subcommand(1);
  CLI11_PARSE(app, argc, argv);
  return 0;
}
