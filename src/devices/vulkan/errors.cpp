// The runtime's error messages.
#include "devices/vulkan/errors.hpp"

#include <cstdio>

namespace iron::vulkan {

std::string result_name(VkResult result) {
  switch (result) {
#define IRON_VK_RESULT(name) \
  case name:                 \
    return #name;
    IRON_VK_RESULT(VK_SUCCESS)
    IRON_VK_RESULT(VK_NOT_READY)
    IRON_VK_RESULT(VK_TIMEOUT)
    IRON_VK_RESULT(VK_EVENT_SET)
    IRON_VK_RESULT(VK_EVENT_RESET)
    IRON_VK_RESULT(VK_INCOMPLETE)
    IRON_VK_RESULT(VK_ERROR_OUT_OF_HOST_MEMORY)
    IRON_VK_RESULT(VK_ERROR_OUT_OF_DEVICE_MEMORY)
    IRON_VK_RESULT(VK_ERROR_INITIALIZATION_FAILED)
    IRON_VK_RESULT(VK_ERROR_DEVICE_LOST)
    IRON_VK_RESULT(VK_ERROR_MEMORY_MAP_FAILED)
    IRON_VK_RESULT(VK_ERROR_LAYER_NOT_PRESENT)
    IRON_VK_RESULT(VK_ERROR_EXTENSION_NOT_PRESENT)
    IRON_VK_RESULT(VK_ERROR_FEATURE_NOT_PRESENT)
    IRON_VK_RESULT(VK_ERROR_INCOMPATIBLE_DRIVER)
    IRON_VK_RESULT(VK_ERROR_TOO_MANY_OBJECTS)
    IRON_VK_RESULT(VK_ERROR_FORMAT_NOT_SUPPORTED)
    IRON_VK_RESULT(VK_ERROR_FRAGMENTED_POOL)
    IRON_VK_RESULT(VK_ERROR_UNKNOWN)
    IRON_VK_RESULT(VK_ERROR_OUT_OF_POOL_MEMORY)
    IRON_VK_RESULT(VK_ERROR_INVALID_EXTERNAL_HANDLE)
    IRON_VK_RESULT(VK_ERROR_FRAGMENTATION)
    IRON_VK_RESULT(VK_ERROR_INVALID_OPAQUE_CAPTURE_ADDRESS)
#undef IRON_VK_RESULT
    default:
      return "VkResult " + std::to_string(int(result));
  }
}

void fail(const char* call, VkResult result, const std::string& detail) {
  std::string message = std::string(call) + " failed: " + result_name(result);
  if (result == VK_ERROR_DEVICE_LOST)
    message = "Vulkan device lost (the driver reset it or it hung): " + message;
  if (!detail.empty()) message += " (" + detail + ")";
  throw VulkanError(result, message);
}

void fail(const std::string& message) { throw VulkanError(VK_SUCCESS, message); }

std::string bytes_text(uint64_t bytes) {
  static const char* const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  if (bytes < 1024) return std::to_string(bytes) + " B";
  double value = double(bytes);
  int unit = 0;
  while (value >= 1024 && unit < 5) {
    value /= 1024;
    ++unit;
  }
  char text[32];
  // Whole numbers print without a fraction ("2 GiB", "128 MiB"); others keep one digit.
  if (value == double(uint64_t(value)))
    std::snprintf(text, sizeof text, "%.0f %s", value, units[unit]);
  else
    std::snprintf(text, sizeof text, "%.1f %s", value, units[unit]);
  return text;
}

}  // namespace iron::vulkan
