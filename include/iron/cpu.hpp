// Facts about the CPU device, for tools and benchmarks.
#pragma once

#include <cstddef>
#include <string>

namespace iron::cpu_device {

/// The instruction sets the kernels may use here ("avx2 fma avx512f avx512bw avx512bf16").
std::string features();
/// Streaming-read bandwidth of this machine in GB/s (10^9 bytes), reading `bytes` with `threads`
/// threads of the device's pool; the best of a few passes.
double measure_read_bandwidth(int threads, size_t bytes = size_t(256) << 20);
/// Peak resident memory of this process so far, in bytes.
size_t peak_resident_bytes();

}  // namespace iron::cpu_device
