// The one exception type IRON throws, with a kind so callers (and tests) can tell misuse apart.
#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

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

/// An allocation that failed, an Error of kind value: what it was for and how many bytes
/// ("out of memory: cannot allocate 6,340,608 bytes for the state layers.3.k_cache"). Every
/// allocation point raises it (out_of_memory()), so that a caller that knows which option asks
/// for less (the model runner: -c/--ctx-size, -b/--batch-size, the cache types) can add it.
class OutOfMemory : public Error {
 public:
  OutOfMemory(int64_t bytes, const std::string& purpose, const std::string& hint = "");
  int64_t bytes() const { return bytes_; }
  const std::string& purpose() const { return purpose_; }
  /// The same failure, its message ending with `hint`, how to ask for less.
  OutOfMemory with_hint(const std::string& hint) const { return OutOfMemory(bytes_, purpose_, hint); }

 private:
  int64_t bytes_;
  std::string purpose_;
};

[[noreturn]] void out_of_memory(int64_t bytes, const std::string& purpose);

/// Text from a file or a command line made fit for a one-line message: control characters,
/// bytes that are not valid UTF-8 and backslashes are escaped (\n, \x1b, \\). With a `quote`
/// character the text is put between two of them, and that character inside is escaped too
/// (\"). Text longer than `max_chars` characters is cut and says how long it was:
/// `abc... (70,000 bytes)`, or `"abc"... (70,000 bytes)` quoted. Every message quoting such text
/// uses it.
std::string escaped(std::string_view text, size_t max_chars = 200, char quote = 0);
/// A file's path for a message, escaped as escaped() does. A path longer than `max_chars`
/// characters keeps its start and, longer, its end (where the file's own name is) around
/// "...", and says how long it was: `/home/me/aaaa...aaaa/model.gguf (5,024 bytes)`.
std::string escaped_path(std::string_view path, size_t max_chars = 200);
/// A list of faults of one kind for a message: the first `first` items joined by ", ", then
/// "... and 4,090 more" (the whole list goes to the log at debug level, IRON_LOG=debug, under
/// `what`). The items are taken as they are: escape them first.
std::string cut_list(const std::vector<std::string>& items, const std::string& what, size_t first = 20);

}  // namespace iron
