// A timeline of what the CPU device runs: one span per command and thread, written in the
// Chrome trace format (opens in Perfetto or chrome://tracing). Off unless started.
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
