// What `iron info --devices` says about Vulkan. Compiled in every build: without Vulkan support
// it says so, so the command line needs no build switch of its own.
#pragma once

#include <string>

namespace iron::vulkan {

/// Whether this build has the Vulkan device (CMake IRON_VULKAN found the headers and glslc).
bool built();

/// Each Vulkan device described, several lines each, the one a run would choose marked; or one
/// line "vulkan: none (...)" saying why there is none: support not built, no loader, no device.
/// Never throws for a missing loader or device: that is the answer, not a failure.
std::string describe_devices();

}  // namespace iron::vulkan
