// Numeric options checked at parse time: one parser per kind, each error naming the option, the
// text and the range.
#include <charconv>
#include <cmath>
#include <cstdio>
#include <string>

#include "commands.hpp"
#include "iron/error.hpp"

namespace iron::tools {

namespace {

// The option's name for messages: its longest flag ("--n-predict" of "-n,--n-predict").
std::string option_name(const std::string& flags) {
  std::string best, item;
  for (size_t i = 0; i <= flags.size(); ++i) {
    if (i == flags.size() || flags[i] == ',') {
      if (item.size() > best.size()) best = item;
      item.clear();
    } else {
      item += flags[i];
    }
  }
  return best;
}

std::string shown(const std::string& text) { return "'" + escaped(text, 40) + "'"; }

template <class T>
bool parse_whole(const std::string& text, T& value) {
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, value);
  return !text.empty() && ec == std::errc() && ptr == end;
}

[[noreturn]] void refuse(const std::string& flags, const std::string& text, const std::string& what) {
  throw CLI::ValidationError(option_name(flags), shown(text) + " is not " + what);
}

int64_t integer_in(const std::string& flags, const std::string& text, int64_t lo, int64_t hi) {
  int64_t v = 0;
  const std::string range = "an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
  if (!parse_whole(text, v) || v < lo || v > hi) refuse(flags, text, range);
  return v;
}

template <class T>
CLI::Option* integer_option(CLI::App& cmd, const std::string& flags, T& value, int64_t lo, int64_t hi,
                            const std::string& help) {
  CLI::Option* o = cmd.add_option_function<std::string>(
      flags, [&value, flags, lo, hi](const std::string& text) { value = T(integer_in(flags, text, lo, hi)); }, help);
  return o->type_name("INT")->default_str(std::to_string(value));
}

}  // namespace

CLI::Option* add_integer(CLI::App& cmd, const std::string& flags, int64_t& value, int64_t lo, int64_t hi,
                         const std::string& help) {
  return integer_option(cmd, flags, value, lo, hi, help);
}

CLI::Option* add_integer(CLI::App& cmd, const std::string& flags, int& value, int64_t lo, int64_t hi,
                         const std::string& help) {
  return integer_option(cmd, flags, value, lo, hi, help);
}

CLI::Option* add_unsigned(CLI::App& cmd, const std::string& flags, uint64_t& value, const std::string& help) {
  CLI::Option* o = cmd.add_option_function<std::string>(
      flags,
      [&value, flags](const std::string& text) {
        if (!parse_whole(text, value)) refuse(flags, text, "an integer in [0, 18446744073709551615]");
      },
      help);
  return o->type_name("UINT")->default_str(std::to_string(value));
}

CLI::Option* add_number(CLI::App& cmd, const std::string& flags, double& value, double lo, double hi, bool lo_open,
                        const std::string& help) {
  CLI::Option* o = cmd.add_option_function<std::string>(
      flags,
      [&value, flags, lo, hi, lo_open](const std::string& text) {
        double v = 0;
        if (!parse_whole(text, v) || !std::isfinite(v) || !(lo_open ? v > lo : v >= lo) || !(v <= hi)) {
          char range[96];
          std::snprintf(range, sizeof range, "a number in %c%g, %g]", lo_open ? '(' : '[', lo, hi);
          refuse(flags, text, range);
        }
        value = v;
      },
      help);
  char shown_default[32];
  std::snprintf(shown_default, sizeof shown_default, "%g", value);
  return o->type_name("FLOAT")->default_str(shown_default);
}

}  // namespace iron::tools
