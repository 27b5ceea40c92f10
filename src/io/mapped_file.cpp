#include "iron/io/mapped_file.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "iron/error.hpp"

namespace iron::io {

namespace {

// data() of an empty file points here so callers never see a null pointer.
constexpr uint8_t kEmpty[1] = {0};

[[noreturn]] void system_error(const std::string& path, const char* action, int error) {
  io_error(path + ": cannot " + action + ": " + std::strerror(error));
}

// Closes the descriptor on every path out of open(); the mapping outlives it.
struct FileDescriptor {
  int fd;
  ~FileDescriptor() {
    if (fd >= 0) ::close(fd);
  }
};

}  // namespace

std::shared_ptr<const MappedFile> MappedFile::open(const std::string& path) {
  FileDescriptor file{::open(path.c_str(), O_RDONLY | O_CLOEXEC)};
  if (file.fd < 0) system_error(path, "open", errno);
  struct stat status {};
  if (::fstat(file.fd, &status) != 0) system_error(path, "stat", errno);
  if (!S_ISREG(status.st_mode)) io_error(path + ": cannot map: not a regular file");

  std::shared_ptr<MappedFile> mapped(new MappedFile());
  mapped->path_ = path;
  mapped->size_ = size_t(status.st_size);
  mapped->data_ = kEmpty;
  if (mapped->size_ == 0) return mapped;  // mmap of 0 bytes is an error (EINVAL)

  void* base = ::mmap(nullptr, mapped->size_, PROT_READ, MAP_PRIVATE, file.fd, 0);
  if (base == MAP_FAILED) system_error(path, "mmap", errno);
  mapped->mapping_ = base;
  mapped->data_ = static_cast<const uint8_t*>(base);
  return mapped;
}

std::shared_ptr<const MappedFile> MappedFile::from_bytes(std::string name,
                                                         std::vector<uint8_t> bytes) {
  std::shared_ptr<MappedFile> mapped(new MappedFile());
  mapped->path_ = std::move(name);
  mapped->owned_ = std::move(bytes);
  mapped->size_ = mapped->owned_.size();
  mapped->data_ = mapped->owned_.empty() ? kEmpty : mapped->owned_.data();
  return mapped;
}

MappedFile::~MappedFile() {
  if (mapping_ != nullptr) ::munmap(mapping_, size_);
}

}  // namespace iron::io
