// The recording side of iron/trace.hpp, for the CPU program and the Vulkan device's steps.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

namespace iron::cpu {

extern std::atomic<bool> trace_enabled;
inline int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}
/// The lane a Vulkan device's steps are recorded on (the CPU's pool threads take 0, 1, ...).
constexpr int kTraceDeviceLane = 63;
/// Records one span of `name` (a string that outlives the trace) on pool thread `thread`.
void trace_span(const char* name, int thread, int64_t begin_ns, int64_t end_ns);

}  // namespace iron::cpu
