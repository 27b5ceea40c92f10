// `iron chat -m MODEL [--system TEXT] [-n N] [sampling options]`: a conversation that keeps its
// cache (models::Conversation). On a terminal: a prompt, line editing and history (libedit when
// built with it), a trailing backslash or a paste of several lines makes one message, Ctrl-C
// stops an answer (twice at the prompt: exit), and a hang-up (the terminal closed) ends the chat quietly. From a pipe or
// file: each line is one user turn and each answer one line of standard output. Lines starting with '/' are commands
// (/help lists them).
#include <poll.h>
#include <stdio_ext.h>
#include <termios.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "commands.hpp"
#include "iron/error.hpp"
#include "iron/io/safetensors.hpp"
#include "iron/models/conversation.hpp"

#ifdef IRON_HAS_LIBEDIT
#include <editline/readline.h>
#endif

namespace iron::tools {

namespace {

std::atomic<bool> answering{false}, interrupt{false}, hung_up{false};
std::atomic<int> interrupts_at_prompt{0};  // lock-free: safe in a signal handler

// Ctrl-C: stops the answer being generated; at the prompt, the first says how to leave and the
// second leaves.
extern "C" void on_interrupt(int) {
  if (answering.load()) {
    interrupt.store(true);
    return;
  }
  if (interrupts_at_prompt.fetch_add(1) + 1 >= 2) {
    (void)!::write(STDOUT_FILENO, "\n", 1);
    ::_exit(0);
  }
  const char hint[] = "\n(Ctrl-C again, /exit or Ctrl-D to leave)\n";
  (void)!::write(STDOUT_FILENO, hint, sizeof hint - 1);
}

// A hang-up (SIGHUP: the terminal closed): an answer stops as at Ctrl-C, and the chat ends at
// its next look instead of dying in the middle (or, with libedit, being killed by the signal
// libedit sends on).
extern "C" void on_hangup(int) {
  hung_up.store(true);
  interrupt.store(true);
}

// Whether standard input's terminal went away: a hung-up terminal fails every call with EIO.
// A chat that ignores SIGHUP (nohup) learns of a closed terminal only so.
bool terminal_gone() {
  termios settings{};
  return ::tcgetattr(STDIN_FILENO, &settings) != 0 && errno == EIO;
}

// One line of input: from libedit on a terminal (with history), else std::getline. nullopt at
// the end of input.
std::optional<std::string> read_line(bool terminal, const char* prompt) {
#ifdef IRON_HAS_LIBEDIT
  if (terminal) {
    char* line = ::readline(prompt);
    if (!line) return std::nullopt;
    std::string out(line);
    std::free(line);
    return out;
  }
#endif
  if (terminal) {
    std::fputs(prompt, stdout);
    std::fflush(stdout);
  }
  std::string line;
  if (!std::getline(std::cin, line)) return std::nullopt;
  return line;
}

// Whether more typed (or pasted) input is already waiting on standard input.
bool input_waiting() {
  pollfd in{STDIN_FILENO, POLLIN, 0};
  return ::poll(&in, 1, 0) > 0 && (in.revents & POLLIN);
}

const char kHelp[] =
    "/clear          a new conversation (the system message kept), the cache emptied\n"
    "/system TEXT    set the system message (empty: none)\n"
    "/save FILE      write the conversation as JSON (messages, with the answers' token ids)\n"
    "/load FILE      read a conversation /save wrote; the next turn continues it exactly\n"
    "/stats          tokens in the cache, tokens the last turn prefilled, the last answer's speed\n"
    "/help           this list\n"
    "/exit           leave (so does Ctrl-D)\n";

}  // namespace

void add_chat_command(CLI::App& app, bool execute) {
  struct Options {
    ModelOptions common;
    GenerationOptions generation;
    std::string system;
  };
  auto o = std::make_shared<Options>();
  o->generation.tokens = -1;
  o->generation.context = 4096;
  CLI::App* cmd = app.add_subcommand(
      "chat",
      "Talk with a model: each turn is rendered with its chat template and only what the cache does not hold "
      "yet is prefilled. On a terminal, Ctrl-C stops an answer; from a pipe, each line is a turn and each "
      "answer one line. Commands: /clear /system /save /load /stats /help /exit");
  add_model_options(*cmd, o->common);
  add_generation_options(*cmd, o->generation);
  cmd->add_option("--system", o->system, "A system message to start the conversation with");
  cmd->callback([o, execute] {
    if (!execute) return;
    models::RunnerOptions options = runner_options(o->common);
    apply(o->generation, options);
    auto runner = models::LlamaRunner::open(o->common.model, options);
    if (!text::recognise_chat_template(runner->tokenizer().chat_template()))
      std::fprintf(stderr, "note: the model's chat template is not one rendered here (ChatML, Gemma); using ChatML\n");
    models::Engine engine(*runner);
    models::Conversation conversation(engine, o->system);
    const bool terminal = ::isatty(STDIN_FILENO) && ::isatty(STDOUT_FILENO);
    struct sigaction action {};
    action.sa_handler = on_interrupt;
    sigemptyset(&action.sa_mask);
    if (terminal) ::sigaction(SIGINT, &action, nullptr);
    // SIGHUP caught on a terminal, unless it was ignored (nohup): then a read or write failing
    // with EIO says the terminal went.
    struct sigaction hangup {};
    ::sigaction(SIGHUP, nullptr, &hangup);
    if (terminal && hangup.sa_handler != SIG_IGN) {
      hangup.sa_handler = on_hangup;
      hangup.sa_flags = 0;
      sigemptyset(&hangup.sa_mask);
      ::sigaction(SIGHUP, &hangup, nullptr);
    }
    // The chat ends when the terminal goes, whether told by SIGHUP or by a failing read or write.
    auto gone = [terminal] { return terminal && (hung_up.load() || terminal_gone()); };
    if (terminal) std::printf("iron chat: %s (/help for commands, Ctrl-D to leave)\n", runner->config().describe().c_str());
    models::TurnStats last;
    bool any_turn = false;
    for (;;) {
      std::optional<std::string> line = read_line(terminal, "> ");
      if (gone()) break;
      // A Ctrl-C at the prompt ends the line being read (libedit returns none): the prompt again.
      if (!line && terminal && interrupts_at_prompt.load() > 0) continue;
      if (!line) break;
      interrupts_at_prompt = 0;
      // A trailing backslash continues the message on the next line; so do lines pasted together
      // (already waiting when this one ends: typing is never that fast).
      while (terminal && ((!line->empty() && line->back() == '\\') || input_waiting())) {
        if (!line->empty() && line->back() == '\\')
          line->back() = '\n';
        else
          *line += '\n';
        std::optional<std::string> more = read_line(terminal, ". ");
        if (!more) break;
        *line += *more;
      }
      if (line->empty()) continue;
#ifdef IRON_HAS_LIBEDIT
      if (terminal) ::add_history(line->c_str());
#endif
      if ((*line)[0] == '/') {
        const size_t space = line->find(' ');
        const std::string command = line->substr(0, space);
        const std::string argument = space == std::string::npos ? "" : line->substr(space + 1);
        try {
          if (command == "/exit" || command == "/quit") break;
          if (command == "/help") {
            std::fputs(kHelp, stdout);
          } else if (command == "/clear") {
            conversation.clear();
            std::printf("(a new conversation)\n");
          } else if (command == "/system") {
            conversation.set_system(argument);
            std::printf("(system message %s)\n", argument.empty() ? "removed" : "set");
          } else if (command == "/save") {
            if (argument.empty()) value_error("/save needs a file name");
            std::ofstream out(argument);
            out << conversation.to_json().dump(1) << "\n";
            if (!out.flush()) value_error(escaped_path(argument) + ": cannot write the conversation");
            std::printf("(saved %zu messages to %s)\n", conversation.messages().size(), argument.c_str());
          } else if (command == "/load") {
            if (argument.empty()) value_error("/load needs a file name");
            conversation.load_json(io::read_json_file(argument));
            std::printf("(loaded %zu messages from %s)\n", conversation.messages().size(), argument.c_str());
          } else if (command == "/stats") {
            std::printf("cache: %lld tokens", (long long)conversation.cached_tokens());
            if (any_turn) {
              const int64_t decoded = std::max<int64_t>(last.generated - 1, 0);
              std::printf("; last turn prefilled %lld tokens; last answer %lld tokens, %.1f tokens/s (%s)",
                          (long long)last.prefilled, (long long)last.generated,
                          decoded / std::max(last.answer_seconds, 1e-9), last.stop.c_str());
            }
            std::printf("\n");
          } else {
            std::printf("unknown command %s (/help lists them)\n", command.c_str());
          }
        } catch (const Error& e) {
          std::printf("error: %s\n", e.what());
        }
        std::fflush(stdout);
        continue;
      }
      interrupt = false;
      answering = true;
      try {
        last = conversation.reply(*line, o->generation.tokens,
                                  [](const std::string& piece) {
                                    std::fwrite(piece.data(), 1, piece.size(), stdout);
                                    // Output that cannot be written (a closed terminal) stops
                                    // the answer: no one is there to read the rest.
                                    if (std::fflush(stdout) != 0) interrupt.store(true);
                                  },
                                  &interrupt);
        any_turn = true;
      } catch (const Error& e) {
        answering = false;
        if (gone()) break;
        std::printf("\n");
        std::fprintf(stderr, "error: %s\n", e.what());
        continue;
      }
      answering = false;
      if (gone()) break;
      std::printf("\n");
      if (last.dropped_messages > 0)
        std::fprintf(stderr, "note: the context was full: the %lld oldest messages were dropped and the cache rebuilt\n",
                     (long long)last.dropped_messages);
      if (last.stop == "interrupted" && terminal) std::printf("(interrupted)\n");
      std::fflush(stdout);
    }
    if (gone()) {
      // Nothing more can reach the terminal: what is still buffered is dropped rather than
      // reported as a write error, and the chat ends as at Ctrl-D, status 0.
      __fpurge(stdout);
      std::clearerr(stdout);
      return;
    }
    if (terminal) std::printf("\n");
  });
}

}  // namespace iron::tools
