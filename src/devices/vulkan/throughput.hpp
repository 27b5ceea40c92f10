// What bounds a program's time on a Vulkan device, measured on the device's own clock: how fast
// one copy moves bytes between two device buffers, and what one dispatch costs when there is no
// work in it. `iron bench --device vulkan` holds a decode step's time against
//   bytes it reads / copy bandwidth + its dispatches x an empty dispatch's time.
#pragma once

#include <optional>

#include "graph/device.hpp"
#include "devices/vulkan/device.hpp"

namespace iron::vulkan {

using Throughput = detail::Device::Throughput;

/// Best of a few timed runs of each; nullopt when the device writes no timestamps on its compute
/// queue. The copy moves up to 256 MiB (less where the device's largest buffer is smaller).
std::optional<Throughput> measure_throughput(Device& device);

}  // namespace iron::vulkan
