// `iron info --devices`: the Vulkan half.
#include "devices/vulkan/report.hpp"

#if IRON_HAS_VULKAN
#include <cstdlib>
#include <memory>
#include <sstream>

#include "devices/vulkan/errors.hpp"
#include "devices/vulkan/instance.hpp"
#include "iron/error.hpp"
#endif

namespace iron::vulkan {

#if IRON_HAS_VULKAN

bool built() { return true; }

std::string describe_devices() {
  std::shared_ptr<Instance> instance;
  try {
    instance = Instance::shared();
  } catch (const Error& e) {
    return std::string("vulkan: none (") + e.what() + ")\n";
  }
  const std::vector<DeviceInfo>& devices = instance->devices();
  std::ostringstream o;
  o << "vulkan: loader " << version_text(instance->loader_version()) << ", " << devices.size()
    << (devices.size() == 1 ? " device" : " devices")
    << (instance->validation() ? ", validation on" : "") << "\n";
  int64_t chosen = -1;
  std::string why_none;
  try {
    chosen = choose_device(devices, std::getenv("IRON_VULKAN_DEVICE"));
  } catch (const Error& e) {
    why_none = e.what();
  }
  for (const DeviceInfo& d : devices) {
    o << "vulkan device " << d.index << (int64_t(d.index) == chosen ? " (chosen)" : "") << ": "
      << d.short_name() << "\n"
      << d.str("  ");
  }
  if (chosen < 0) o << "vulkan: none chosen (" << why_none << ")\n";
  return o.str();
}

#else

bool built() { return false; }

std::string describe_devices() {
  return "vulkan: none (Vulkan support not built: configure with -DIRON_VULKAN=ON, which needs the "
         "Vulkan "
         "headers and glslc)\n";
}

#endif

}  // namespace iron::vulkan
