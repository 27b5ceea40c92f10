// A read-only view of a whole file's bytes: memory-mapped from disk, or held in memory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace iron::io {

/// The bytes of one file, immutable for the mapping's lifetime. Tensors that borrow checkpoint
/// data hold a shared_ptr to it, so the mapping lives as long as the last such view.
class MappedFile {
 public:
  /// Maps `path` read-only (MAP_PRIVATE); throws an io error naming the path and the reason.
  /// An empty file gives an empty view (there is nothing to map).
  static std::shared_ptr<const MappedFile> open(const std::string& path);
  /// In-memory bytes that read like a file called `name` (tests, data received otherwise).
  static std::shared_ptr<const MappedFile> from_bytes(std::string name, std::vector<uint8_t> bytes);

  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  /// Never null, even for an empty file.
  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  std::span<const uint8_t> bytes() const { return {data_, size_}; }
  /// The path it was opened from (or the name it was given), for error messages.
  const std::string& path() const { return path_; }

  /// Says that [data, data + bytes) will not be read again soon (a kernel copied it into another
  /// layout): where it lies inside a live file mapping, its whole pages leave the process's
  /// resident memory, to be read back from the page cache if touched again. Other memory is
  /// left alone.
  static void release_pages(const void* data, size_t bytes);

 private:
  MappedFile() = default;

  std::string path_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  void* mapping_ = nullptr;  // what munmap releases; null when nothing was mapped
  std::vector<uint8_t> owned_;
};

}  // namespace iron::io
