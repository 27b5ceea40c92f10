// Reading and writing whole files by path, safely: what a path names is checked before it is
// opened (a FIFO, a device or a socket is refused rather than opened: opening a FIFO blocks, and
// /dev/zero never ends), files are opened without blocking, a read is capped, and every write and
// close is checked.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace iron::io {

/// The most a profile file may hold (a profile is a few kilobytes).
inline constexpr size_t kProfileLimit = size_t(16) << 20;
/// The most a JSON file may hold (real tokenizer.json files reach ~35 MB).
inline constexpr size_t kJsonLimit = size_t(256) << 20;

/// An open, read-only descriptor of a regular file, closed when it goes.
class RegularFile {
 public:
  /// Refuses (an io error naming `path` and what it is) anything but a regular file, checked
  /// before opening and again on the open descriptor; opens with O_NONBLOCK.
  explicit RegularFile(const std::string& path);
  ~RegularFile();
  RegularFile(const RegularFile&) = delete;
  RegularFile& operator=(const RegularFile&) = delete;
  int fd() const { return fd_; }
  size_t size() const { return size_; }

 private:
  int fd_ = -1;
  size_t size_ = 0;
};

/// An io error unless `path` names a regular file (`what` says what the file was for).
void require_regular_file(const std::string& path, const std::string& what);
/// A regular file's bytes, at most `max_bytes` of them (a value error above that).
std::string read_file(const std::string& path, size_t max_bytes, const std::string& what);
/// Writes `bytes` to `path` (created or truncated), checking every write and the close: an io
/// error names the path and the reason (a full disk, /dev/full).
void write_file(const std::string& path, std::string_view bytes, const std::string& what);

}  // namespace iron::io
