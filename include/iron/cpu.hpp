// Facts about the CPU device, for tools and benchmarks.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace iron::cpu_device {

/// The instruction sets the kernels may use here ("avx2 fma avx512f avx512bw avx512bf16").
std::string features();
/// `device`'s kernels ("cpu" or "vulkan"): for the CPU, the kernel each kind of step the models
/// run takes here and why faster ones were passed over (`iron info --kernels`).
std::string describe_kernels(std::string_view device = "cpu");
/// Streaming-read bandwidth of this machine's memory in GB/s (10^9 bytes), reading `bytes` (0:
/// read_bandwidth_bytes()) with `threads` threads of the device's pool, several sequential
/// streams each; the best of a few passes.
double measure_read_bandwidth(int threads, size_t bytes = 0);
/// The bytes measure_read_bandwidth reads by default: four times the last-level cache (at least
/// 256 MiB, at most 1 GiB or a quarter of the memory still available), so that they come from
/// memory.
size_t read_bandwidth_bytes();
/// Peak resident memory of this process so far, in bytes.
size_t peak_resident_bytes();
/// The CPUs this process may run on (its affinity mask): the default thread count.
int available_cpus();
/// How many threads a run that asks for `wanted` takes now: fewer while other processes hold
/// cores (the pool's governor, src/devices/cpu/thread_pool.hpp). Results do not depend on it.
int threads_now(int wanted);

/// Busy-loop processes of its own, started on construction and stopped on destruction: what a
/// busy machine looks like to a benchmark (`iron bench --contend K`).
class BusyProcesses {
 public:
  explicit BusyProcesses(int count);
  ~BusyProcesses();
  BusyProcesses(const BusyProcesses&) = delete;
  BusyProcesses& operator=(const BusyProcesses&) = delete;

 private:
  std::vector<int> pids_;
};

}  // namespace iron::cpu_device
