// The streaming read behind `iron bench`'s decode bound: every path reads every word, and the
// figure is a bandwidth.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "devices/cpu/streaming_read.hpp"
#include "iron/cpu.hpp"

namespace iron {
namespace {

TEST(StreamingRead, SumsEveryWordOnEveryPathThisHostRuns) {
  // 1000 lines: two streams of 500, each word distinct, so a line read twice or not at all (or a
  // stream started at the wrong line) changes the sum.
  const int64_t lines = 1000;
  std::vector<uint64_t> words(size_t(lines * 8));
  uint64_t expected = 0;
  for (size_t i = 0; i < words.size(); ++i) words[i] = (uint64_t(i) + 1) * 0x9e3779b97f4a7c15ull, expected += words[i];
  const char* data = reinterpret_cast<const char*>(words.data());
  const cpu::Features& host = cpu::Features::host();
  for (const char* path : {"", "avx2", "neon", "portable"}) {
    const cpu::Features f = *path ? host.limited_to(path) : host;
    EXPECT_EQ(cpu::streaming_read(data, lines, f), expected) << "features: " << f.str();
    // An odd count leaves its last line out.
    uint64_t but_last = expected;
    for (size_t i = size_t(lines - 2) * 8; i < size_t(lines) * 8; ++i) but_last -= words[i];
    EXPECT_EQ(cpu::streaming_read(data, lines - 1, f), but_last) << "features: " << f.str();
  }
}

TEST(StreamingRead, MeasuresAFiniteBandwidth) {
  const double gbs = cpu_device::measure_read_bandwidth(1, size_t(16) << 20);
  EXPECT_TRUE(std::isfinite(gbs));
  // Positive, with no floor: SVE emulated by QEMU beside a busy core read 0.09 GB/s (the ARM64 stage).
  EXPECT_GT(gbs, 0.0);
}

}  // namespace
}  // namespace iron
