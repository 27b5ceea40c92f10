// The one exception type IRON throws, with a kind so callers (and tests) can tell misuse apart.
#pragma once

#include <stdexcept>
#include <string>

namespace iron {

enum class ErrorKind {
  value,  // a value is wrong: a bad shape, a bad file, an ambiguous profile
  type,   // a thing is used in the wrong place: a missing input, an unknown name
  index,  // a per-call value indexes or bounds a view outside it
  io,     // a file cannot be opened or read
};

class Error : public std::runtime_error {
 public:
  Error(ErrorKind kind, const std::string& message) : std::runtime_error(message), kind_(kind) {}
  ErrorKind kind() const { return kind_; }

 private:
  ErrorKind kind_;
};

[[noreturn]] inline void fail(ErrorKind kind, const std::string& message) {
  throw Error(kind, message);
}
[[noreturn]] inline void value_error(const std::string& m) { fail(ErrorKind::value, m); }
[[noreturn]] inline void type_error(const std::string& m) { fail(ErrorKind::type, m); }
[[noreturn]] inline void index_error(const std::string& m) { fail(ErrorKind::index, m); }
[[noreturn]] inline void io_error(const std::string& m) { fail(ErrorKind::io, m); }

}  // namespace iron
