// What the Vulkan device's tests share: whether this machine can run it.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "iron/error.hpp"
#if IRON_HAS_VULKAN
#include "devices/vulkan/instance.hpp"
#endif

namespace iron::test {

/// Why this machine cannot run the Vulkan device (empty: it can).
inline std::string why_no_vulkan() {
#if IRON_HAS_VULKAN
  try {
    if (vulkan::Instance::shared()->devices().empty()) return "the Vulkan loader found no device";
    return "";
  } catch (const Error& e) {
    return e.what();
  }
#else
  return "this build has no Vulkan device";
#endif
}

/// Whether the device the Vulkan tests run on has 64-bit integers in shaders (a CarriedLoop's
/// steps chain on the device only then).
inline bool vulkan_shader_int64() {
#if IRON_HAS_VULKAN
  const auto& devices = vulkan::Instance::shared()->devices();
  if (devices.empty()) return false;
  return devices[vulkan::choose_device(devices, std::getenv("IRON_VULKAN_DEVICE"))].features.shader_int64;
#else
  return false;
#endif
}

}  // namespace iron::test

/// Skips the test, saying why, where this machine has no Vulkan device.
#define IRON_NEEDS_VULKAN()                                                               \
  do {                                                                                    \
    if (std::string why = iron::test::why_no_vulkan(); !why.empty()) GTEST_SKIP() << why; \
  } while (0)
