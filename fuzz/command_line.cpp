// Bytes as a command line -> the `iron` option parser, run without executing any command: the
// input is split at NUL bytes into words after "iron". Every numeric option must be refused
// (status 1 and one line "iron: error: ...") or accepted, never overflow, wrap or throw anything
// but the parser's own errors, which run_command_line turns into that line, in valid UTF-8.
#include <sstream>
#include <string>
#include <vector>

#include "commands.hpp"
#include "fuzz_util.hpp"
#include "targets.hpp"

namespace iron::fuzz {

void command_line(const uint8_t* data, size_t size) {
  std::vector<std::string> args{"iron"};
  std::string_view rest(reinterpret_cast<const char*>(data), size);
  while (!rest.empty() && args.size() < 64) {
    const size_t nul = rest.find('\0');
    args.emplace_back(rest.substr(0, nul));
    rest = nul == std::string_view::npos ? std::string_view() : rest.substr(nul + 1);
  }
  std::ostringstream out, err;
  const int status = tools::run_command_line(args, /*execute=*/false, out, err);
  IRON_FUZZ_CHECK(status == 0 || status == 1);
  const std::string message = err.str();
  if (status == 1 && message.rfind("iron: error: ", 0) == 0) {
    // One line: the only newline ends it; valid UTF-8 whatever bytes the words held.
    IRON_FUZZ_CHECK(message.find('\n') == message.size() - 1);
    IRON_FUZZ_CHECK(valid_utf8(message));
  }
}

}  // namespace iron::fuzz
