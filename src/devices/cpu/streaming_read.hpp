// The streaming read that bounds a decode (cpu_device::measure_read_bandwidth), one thread's part.
#pragma once

#include <cstdint>

#include "devices/cpu/kernel.hpp"

namespace iron::cpu {

/// Reads `lines` 64-byte lines from `data` as fast as this core reads memory on `f`'s widest
/// loads (streaming_read_hwy.cpp) and returns the sum of their 64-bit words (modulo 2^64), so
/// that no load is left out. An odd last line is not read.
uint64_t streaming_read(const char* data, int64_t lines, const Features& f);

}  // namespace iron::cpu
