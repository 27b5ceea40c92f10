// A timeline of what the devices run: on the CPU one span per command and pool thread, on
// Vulkan one span per step of each run from the device's timestamps (lane 63; a traced run's
// decode steps are not chained, so each is timed). Written in the Chrome trace format (opens in
// Perfetto or chrome://tracing). Off unless started.
#pragma once

#include <cstddef>
#include <string>

namespace iron::trace {

/// Starts recording, holding at most `capacity` spans per thread (no allocation while on).
void start(size_t capacity = 1 << 16);
/// Stops recording and writes what was recorded to `path` as Chrome trace JSON; returns the span count.
size_t stop_and_write(const std::string& path);
bool on();

}  // namespace iron::trace
