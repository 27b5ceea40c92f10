#include "graph/device.hpp"

#include "iron/error.hpp"

namespace iron::detail {

Device& device_named(std::string_view name) {
  if (name == "cpu") return cpu_device();
  if (name == "vulkan") {
#if IRON_HAS_VULKAN
    return vulkan_device();
#else
    value_error("this IRON was built without the Vulkan device (configure with -DIRON_VULKAN=ON, which needs the "
                "Vulkan headers and glslc)");
#endif
  }
  value_error("no device '" + escaped(std::string(name)) + "': the devices are cpu and vulkan");
}

}  // namespace iron::detail
