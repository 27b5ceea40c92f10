// The `iron` program: tools/command_line.cpp parses and runs the command.
#include <iostream>
#include <string>
#include <vector>

#include "commands.hpp"

int main(int argc, char** argv) {
  return iron::tools::run_command_line(std::vector<std::string>(argv, argv + argc), true, std::cout, std::cerr);
}
