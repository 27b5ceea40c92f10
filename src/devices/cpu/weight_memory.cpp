#include "devices/cpu/weight_memory.hpp"

#include <sys/mman.h>

#include <cstdint>
#include <algorithm>
#include <mutex>
#include <string>

#include "iron/error.hpp"

namespace iron::cpu {

namespace {

constexpr size_t kHuge = size_t(2) << 20;
constexpr size_t kChunk = 16 * kHuge;        // what small requests are carved from
constexpr size_t kOwnChunk = kChunk / 4;     // requests this large get a mapping of their own

// An anonymous mapping of `bytes` (a multiple of 2 MiB) starting on a 2 MiB boundary, which the
// kernel may back with transparent huge pages; unmapped when the last holder lets go.
std::shared_ptr<char> huge_mapping(size_t bytes) {
  void* raw = ::mmap(nullptr, bytes + kHuge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) out_of_memory(int64_t(bytes), "a weight's prepared form");
  // Trim to the 2 MiB boundary: the slack before and after goes back.
  const uintptr_t begin = uintptr_t(raw), aligned = (begin + kHuge - 1) / kHuge * kHuge;
  if (aligned > begin) ::munmap(raw, aligned - begin);
  ::munmap(reinterpret_cast<void*>(aligned + bytes), begin + kHuge - aligned);  // never empty
  char* base = reinterpret_cast<char*>(aligned);
  // Advice only: where huge pages are off or scarce, the mapping works in small pages.
  ::madvise(base, bytes, MADV_HUGEPAGE);
  return std::shared_ptr<char>(base, [bytes](char* p) { ::munmap(p, bytes); });
}

}  // namespace

std::shared_ptr<char> weight_memory(size_t bytes) {
  bytes = (std::max<size_t>(bytes, 1) + 63) / 64 * 64;
  if (bytes >= kOwnChunk) return huge_mapping((bytes + kHuge - 1) / kHuge * kHuge);
  static std::mutex mutex;
  static std::shared_ptr<char> chunk;
  static size_t used = kChunk;
  std::lock_guard<std::mutex> lock(mutex);
  if (used + bytes > kChunk) chunk = huge_mapping(kChunk), used = 0;
  char* p = chunk.get() + used;
  used += bytes;
  return std::shared_ptr<char>(chunk, p);  // shares the chunk's lifetime
}

}  // namespace iron::cpu
