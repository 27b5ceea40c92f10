#include "iron/io/files.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "iron/error.hpp"

namespace iron::io {

namespace {

[[noreturn]] void system_error(const std::string& path, const std::string& action, int error) {
  io_error(escaped_path(path) + ": cannot " + action + ": " + std::strerror(error));
}

const char* kind_of(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

void check_regular(const std::string& path, const struct stat& status, const std::string& what) {
  if (!S_ISREG(status.st_mode))
    io_error(escaped_path(path) + ": " + (what.empty() ? "" : what + " ") + "is " + kind_of(status.st_mode) +
             ", not a regular file");
}

}  // namespace

RegularFile::RegularFile(const std::string& path) {
  require_regular_file(path, "");
  // O_NONBLOCK: should the path have become a FIFO since the check, open returns at once.
  fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd_ < 0) system_error(path, "open", errno);
  struct stat status {};
  if (::fstat(fd_, &status) != 0) {
    int error = errno;
    ::close(fd_);
    system_error(path, "stat", error);
  }
  if (!S_ISREG(status.st_mode)) {
    ::close(fd_);
    check_regular(path, status, "");
  }
  size_ = size_t(status.st_size);
}

RegularFile::~RegularFile() {
  if (fd_ >= 0) ::close(fd_);
}

void require_regular_file(const std::string& path, const std::string& what) {
  struct stat status {};
  if (::stat(path.c_str(), &status) != 0)
    system_error(path, what.empty() ? "open" : "open " + what, errno);
  check_regular(path, status, what);
}

std::string read_file(const std::string& path, size_t max_bytes, const std::string& what) {
  RegularFile file(path);
  auto over = [&] {
    value_error(escaped_path(path) + ": " + what + " is over the " + std::to_string(max_bytes) + "-byte limit");
  };
  if (file.size() > max_bytes) over();
  std::string bytes(file.size(), '\0');
  size_t done = 0;
  for (;;) {
    if (done == bytes.size()) {
      // A file that grew since fstat: read on, still within the cap.
      if (bytes.size() > max_bytes) over();
      bytes.resize(std::min(max_bytes + 1, bytes.size() + 4096));
    }
    ssize_t n = ::read(file.fd(), bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) system_error(path, "read " + what, errno);
    if (n == 0) break;
    done += size_t(n);
  }
  if (done > max_bytes) over();
  bytes.resize(done);
  return bytes;
}

void write_file(const std::string& path, std::string_view bytes, const std::string& what) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOCTTY, 0644);
  if (fd < 0) system_error(path, "write " + what, errno);
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      int error = n < 0 ? errno : EIO;
      ::close(fd);
      system_error(path, "write " + what, error);
    }
    done += size_t(n);
  }
  if (::close(fd) != 0) system_error(path, "write " + what, errno);
}

}  // namespace iron::io
