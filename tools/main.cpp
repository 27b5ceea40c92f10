// The `iron` command line: one subcommand per file in tools/, dispatched here. Every failure,
// a bad argument or an unreadable model, prints one line to stderr and exits with status 1.
#include <CLI/CLI.hpp>
#include <exception>
#include <iostream>

#include "commands.hpp"
#include "iron/error.hpp"

int main(int argc, char** argv) {
  CLI::App app{"iron: operators and graphs over them, and the tools built on them"};
  app.require_subcommand(1);
  app.footer(
      "Run 'iron COMMAND --help' for a command's options. Exit status: 0 on success, 1 on "
      "any error.");
  iron::tools::add_info_command(app);
  iron::tools::add_generate_command(app);
  iron::tools::add_bench_command(app);
  iron::tools::add_tune_command(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::cerr << "iron: error: " << e.what() << "\n";
    return 1;
  } catch (const iron::Error& e) {
    std::cerr << "iron: error: " << e.what() << "\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "iron: error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
