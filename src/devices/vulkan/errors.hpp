// Errors of the Vulkan runtime. Every VkResult is checked; a failure becomes an iron::Error whose
// message names the call and the result ("vkCreateBuffer failed: VK_ERROR_OUT_OF_DEVICE_MEMORY").
//
// The kind is ErrorKind::io: a device that cannot be reached or fails is, to a caller, the same
// sort of fault as a file that cannot be read (the public header has no device kind, and a
// missing driver is not a wrong value or type). VulkanError keeps the VkResult for callers and
// tests that must tell a lost device or a timeout from the rest.
#pragma once

#include <cstdint>
#include <string>

#include "devices/vulkan/api.hpp"
#include "iron/error.hpp"

namespace iron::vulkan {

class VulkanError : public Error {
 public:
  VulkanError(VkResult result, const std::string& message)
      : Error(ErrorKind::io, message), result_(result) {}
  /// The result that caused it; VK_SUCCESS for faults found before any call (no device, a
  /// binding past maxStorageBufferRange).
  VkResult result() const { return result_; }

 private:
  VkResult result_;
};

/// "VK_ERROR_DEVICE_LOST", or "VkResult -13" for a code this build's headers do not name.
std::string result_name(VkResult result);

/// Throws VulkanError: "`call` failed: <result>", with "device lost: ..." first for
/// VK_ERROR_DEVICE_LOST, and `detail` (what was asked for) after when given.
[[noreturn]] void fail(const char* call, VkResult result, const std::string& detail = "");
/// Throws VulkanError (result VK_SUCCESS) with `message`: a fault the runtime found itself.
[[noreturn]] void fail(const std::string& message);

/// Checks the result of `call`: anything but VK_SUCCESS throws. (VK_INCOMPLETE and other
/// positive codes are not expected where this is used; a caller that expects one tests for it.)
inline void check(VkResult result, const char* call) {
  if (result != VK_SUCCESS) fail(call, result);
}

/// "1.5 GiB", "64 KiB", "12 B": sizes in messages and descriptions.
std::string bytes_text(uint64_t bytes);

}  // namespace iron::vulkan
