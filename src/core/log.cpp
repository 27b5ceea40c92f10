#include "iron/log.hpp"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

namespace iron {

namespace {
LogLevel initial_level() {
  const char* env = std::getenv("IRON_LOG");
  if (!env) return LogLevel::warning;
  if (!std::strcmp(env, "debug")) return LogLevel::debug;
  if (!std::strcmp(env, "info")) return LogLevel::info;
  if (!std::strcmp(env, "error")) return LogLevel::error;
  if (!std::strcmp(env, "off")) return LogLevel::off;
  return LogLevel::warning;
}

struct LogState {
  std::mutex lock;
  LogLevel level = initial_level();
  std::function<void(LogLevel, std::string_view)> sink;
};
LogState& state() {
  static LogState s;
  return s;
}
}  // namespace

void set_log_level(LogLevel level) { state().level = level; }
LogLevel log_level() { return state().level; }

void set_log_sink(std::function<void(LogLevel, std::string_view)> sink) {
  std::lock_guard<std::mutex> g(state().lock);
  state().sink = std::move(sink);
}

void log(LogLevel level, const std::string& message) {
  LogState& s = state();
  if (level < s.level) return;
  std::lock_guard<std::mutex> g(s.lock);
  if (s.sink) {
    s.sink(level, message);
    return;
  }
  static const char* names[] = {"debug", "info", "warning", "error", "off"};
  std::fprintf(stderr, "iron %s: %s\n", names[int(level)], message.c_str());
}

}  // namespace iron
