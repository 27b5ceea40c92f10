// The `iron` command line: one subcommand per file in tools/, dispatched here. Every failure,
// a bad argument or an unreadable model, prints one line to `err` and gives status 1.
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <new>
#include <ostream>

#include "commands.hpp"
#include "iron/error.hpp"

namespace iron::tools {

namespace {

// An error for a first word that is neither a command nor help (CLI11 would only say that a
// subcommand is required).
std::string unknown_first_word(const CLI::App& app, const std::vector<std::string>& args) {
  if (args.size() < 2) return "";
  const std::string& word = args[1];
  if (word == "-h" || word == "--help" || word == "--help-all") return "";
  std::string names;
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; })) {
    if (sub->get_name() == word) return "";
    names += (names.empty() ? "" : ", ") + sub->get_name();
  }
  const bool option = !word.empty() && word[0] == '-';
  return std::string(option ? "unknown option '" : "unknown command '") + escaped(word, 60) + "'" +
         (option ? " (a command comes first: " : " (commands: ") + names + ")";
}

}  // namespace

int run_command_line(const std::vector<std::string>& args, bool execute, std::ostream& out, std::ostream& err) {
  CLI::App app{"iron: operators and graphs over them, and the tools built on them"};
  app.require_subcommand(1);
  app.footer(
      "Run 'iron COMMAND --help' for a command's options. Exit status: 0 on success, 1 on "
      "any error.");
  add_info_command(app, execute);
  add_generate_command(app, execute);
  add_chat_command(app, execute);
  add_bench_command(app, execute);
  add_tune_command(app, execute);
  add_serve_command(app, execute);
  add_embed_command(app, execute);
  auto fail = [&](const std::string& message) {
    // One line, whatever the message holds.
    std::string line = message;
    for (char& c : line)
      if (c == '\n' || c == '\r') c = ' ';
    err << "iron: error: " << line << "\n";
    return 1;
  };
  if (std::string word = unknown_first_word(app, args); !word.empty()) return fail(word);
  try {
    std::vector<std::string> reversed(args.rbegin(), args.rend() - (args.empty() ? 0 : 1));
    // llama.cpp's spellings of the cache types (CLI11's short options are one letter).
    for (std::string& word : reversed)
      if (word == "-ctk" || word == "-ctv") word = word == "-ctk" ? "--cache-type-k" : "--cache-type-v";
    app.parse(reversed);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e, out, err);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e, out, err);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e, out, err);
  } catch (const CLI::ParseError& e) {
    // CLI11 quotes the words it refuses as given: escaped (invalid UTF-8, control characters) and
    // cut, as every other message is.
    return fail(escaped(e.what(), 300));
  } catch (const Error& e) {
    return fail(e.what());
  } catch (const std::bad_alloc&) {
    return fail("out of memory (ask for less: a smaller context -c, batch -b or prompt)");
  } catch (const std::exception& e) {
    // Not an iron::Error (a std::filesystem error quotes whole paths, twice): escaped and cut here.
    return fail(escaped(e.what(), 300));
  }
  if (!execute) return 0;
  // What was printed must have been written: a full disk or a closed pipe is an error too.
  if (std::fflush(stdout) != 0 || std::ferror(stdout))
    return fail(std::string("cannot write the standard output: ") + std::strerror(errno));
  return 0;
}

}  // namespace iron::tools
