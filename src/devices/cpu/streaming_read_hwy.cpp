// The streaming read that bounds a decode (`iron bench`'s "streaming read", cpu_device::
// measure_read_bandwidth): one thread's part of a buffer read as fast as a core can read memory,
// written once with Highway (devices/cpu/highway.hpp) so that it takes the widest loads the
// processor has, as the kernels do. What a core reads a second depends on how many cache lines
// it has in flight, and so on how it reads: on two threads of an Emerald Rapids VM (1 GiB,
// the best of 6 passes, alternating, each a throwaway loop) one sequential stream of 16-byte
// loads read 17 GB/s, eight streams of 16-byte loads 22-26, of 32-byte loads 24-31, of 64-byte
// loads 29.5-31, two streams of 64-byte loads with a software prefetch 4 KiB ahead 32. A bound
// the kernels beat is no bound (the old one-stream, 16-byte read put a Qwen2.5-Coder-1.5B
// decode at 125% of it), so this reads as the best of those did: the widest loads, two
// interleaved streams each prefetched 4 KiB ahead.
#include <cstddef>
#include <cstdint>

#define HWY_TARGET_INCLUDE "devices/cpu/streaming_read_hwy.cpp"
#include "devices/cpu/hwy_each_target.h"

#if IRON_HWY_PICKED_PASS
IRON_HWY_BEGIN(iron::cpu::streaming_read_hwy)

// Sums the 64-byte lines [0, lines) of two streams (`first`, and `lines` lines past it) into
// *sum, so that no load can be left out. Vectors of at most 64 bytes, so that a load stays in its
// line (SVE's may be longer).
void read(const char* first, int64_t lines, uint64_t* sum) {
  const hn::CappedTag<uint64_t, 8> d;
  const int64_t step = int64_t(hn::Lanes(d)) * 8;  // bytes a load reads
  const char* second = first + lines * 64;
  auto a = hn::Zero(d), b = hn::Zero(d);
  for (int64_t at = 0; at < lines * 64; at += 64) {
    __builtin_prefetch(first + at + 4096);
    __builtin_prefetch(second + at + 4096);
    for (int64_t part = 0; part < 64; part += step) {
      a = hn::Add(a, hn::LoadU(d, reinterpret_cast<const uint64_t*>(first + at + part)));
      b = hn::Add(b, hn::LoadU(d, reinterpret_cast<const uint64_t*>(second + at + part)));
    }
  }
  *sum = hn::GetLane(hn::SumOfLanes(d, hn::Add(a, b)));
}

IRON_HWY_END
#endif  // IRON_HWY_PICKED_PASS

#if HWY_ONCE
#include <cstring>

#include "devices/cpu/highway.hpp"
#include "devices/cpu/streaming_read.hpp"

namespace iron::cpu {

uint64_t streaming_read(const char* data, int64_t lines, const Features& f) {
  uint64_t sum = 0;
  const int64_t half = lines / 2;
  if (run_picked(IRON_HWY_PICK(f, streaming_read_hwy, read), data, half, &sum)) return sum;
  // Elsewhere 8-byte loads (no vector copy runs: the portable build, or an old processor).
  for (int64_t i = 0; i < 2 * half * 8; ++i) {
    uint64_t v;
    std::memcpy(&v, data + 8 * i, 8);
    sum += v;
  }
  return sum;
}

}  // namespace iron::cpu
#endif
