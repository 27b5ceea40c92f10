#include "iron/io/mapped_file.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <vector>

#include "iron/error.hpp"
#include "iron/io/files.hpp"

namespace iron::io {

namespace {

// data() of an empty file points here so callers never see a null pointer.
constexpr uint8_t kEmpty[1] = {0};

[[noreturn]] void system_error(const std::string& path, const char* action, int error) {
  io_error(escaped_path(path) + ": cannot " + action + ": " + std::strerror(error));
}

// The live file mappings, so that release_pages touches nothing else.
struct LiveMappings {
  std::mutex mutex;
  std::vector<std::pair<uintptr_t, uintptr_t>> ranges;  // [begin, end)
};
LiveMappings& live_mappings() {
  static LiveMappings live;
  return live;
}

}  // namespace

std::shared_ptr<const MappedFile> MappedFile::open(const std::string& path) {
  // Checked before opening (a FIFO would block the open) and closed on every path out; the
  // mapping outlives the descriptor.
  RegularFile file(path);
  std::shared_ptr<MappedFile> mapped(new MappedFile());
  mapped->path_ = path;
  mapped->size_ = file.size();
  mapped->data_ = kEmpty;
  if (mapped->size_ == 0) return mapped;  // mmap of 0 bytes is an error (EINVAL)

  void* base = ::mmap(nullptr, mapped->size_, PROT_READ, MAP_PRIVATE, file.fd(), 0);
  if (base == MAP_FAILED && errno == ENOMEM) out_of_memory(int64_t(mapped->size_), "the mapping of " + escaped_path(path));
  if (base == MAP_FAILED) system_error(path, "mmap", errno);
  mapped->mapping_ = base;
  mapped->data_ = static_cast<const uint8_t*>(base);
  LiveMappings& live = live_mappings();
  std::lock_guard<std::mutex> lock(live.mutex);
  live.ranges.emplace_back(uintptr_t(base), uintptr_t(base) + mapped->size_);
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
  if (mapping_ == nullptr) return;
  {
    LiveMappings& live = live_mappings();
    std::lock_guard<std::mutex> lock(live.mutex);
    std::erase(live.ranges, std::pair{uintptr_t(mapping_), uintptr_t(mapping_) + size_});
  }
  ::munmap(mapping_, size_);
}

void MappedFile::release_pages(const void* data, size_t bytes) {
  const uintptr_t begin = uintptr_t(data), end = begin + bytes;
  LiveMappings& live = live_mappings();
  std::lock_guard<std::mutex> lock(live.mutex);
  for (const auto& [b, e] : live.ranges) {
    if (begin < b || end > e) continue;
    // Whole pages inside the range only: a page it shares with a neighbour stays.
    const uintptr_t page = uintptr_t(::sysconf(_SC_PAGESIZE));
    const uintptr_t first = (begin + page - 1) / page * page, last = end / page * page;
    // The mapping is read-only and private, so it holds no changes of its own to lose: dropping
    // its pages only unmaps them, and a later read maps them again from the page cache.
    if (first < last) ::madvise(reinterpret_cast<void*>(first), last - first, MADV_DONTNEED);
    return;
  }
}

}  // namespace iron::io
