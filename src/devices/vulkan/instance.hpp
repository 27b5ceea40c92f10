// The Vulkan instance and what it finds: one description per physical device, and the choice of
// which to use (IRON_VULKAN_DEVICE=N, else a discrete GPU, else an integrated one, else any).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "devices/vulkan/api.hpp"

namespace iron::vulkan {

/// The oldest Vulkan a device must offer: shaders are compiled for Vulkan 1.2 (SPIR-V 1.5), and
/// the 1.2 feature structures tell 8- and 16-bit storage and arithmetic apart.
inline constexpr uint32_t kMinApiVersion = VK_API_VERSION_1_2;

/// Optional capabilities shaders may use. A device lists what it offers; a Device records which
/// it enabled, so a shader can pick a slower variant when one is missing.
struct DeviceFeatures {
  bool storage_buffer_16bit = false;  // 16-bit loads and stores in storage buffers
  bool storage_buffer_8bit = false;   // 8-bit loads and stores (quantised weights as bytes)
  bool shader_int8 = false;           // int8 arithmetic
  bool shader_int16 = false;
  bool shader_float16 = false;  // f16 arithmetic
  bool shader_int64 = false;
  bool subgroup_size_control = false;  // a pipeline may ask for a subgroup size (Vulkan 1.3)

  /// "16-bit storage, 8-bit storage, int8, ..." with "no " before each missing one.
  std::string str() const;
};

/// One physical device as the instance reports it.
struct DeviceInfo {
  uint32_t index = 0;  // in the instance's enumeration: what IRON_VULKAN_DEVICE names
  std::string name;
  VkPhysicalDeviceType type = VK_PHYSICAL_DEVICE_TYPE_OTHER;
  std::string driver_name, driver_info;  // "llvmpipe", "Mesa 22.3.6 (LLVM 15.0.6)"
  uint32_t api_version = 0, driver_version = 0, vendor_id = 0, device_id = 0;

  uint64_t device_local_bytes = 0;  // the device-local heaps together
  /// Device-local memory is host-visible and the device is not a discrete GPU (lavapipe, an
  /// integrated GPU): buffers are mapped and written in place, no staging copies.
  bool unified_memory = false;

  DeviceFeatures features;
  uint32_t subgroup_size = 0, min_subgroup_size = 0, max_subgroup_size = 0;
  bool subgroup_arithmetic = false;  // subgroupAdd and friends in compute shaders
  bool subgroup_ballot = false;      // subgroupBroadcast and friends in compute shaders
  bool timestamps = false;           // the compute queue can write timestamps
  float timestamp_period_ns = 0;     // nanoseconds per timestamp tick

  uint64_t max_storage_buffer_range = 0;  // the most bytes one storage-buffer binding may span
  uint64_t min_storage_buffer_offset_alignment = 1;
  uint64_t non_coherent_atom_size = 1;  // flush/invalidate granularity of non-coherent memory
  uint64_t max_allocation_bytes = 0;    // one vkAllocateMemory
  uint64_t max_buffer_bytes = 0;        // one VkBuffer (Vulkan 1.3; else max_allocation_bytes)
  uint32_t max_workgroup_size[3] = {0, 0, 0};
  uint32_t max_workgroup_count[3] = {0, 0, 0};
  uint32_t max_workgroup_invocations = 0;
  uint32_t max_shared_memory_bytes = 0;
  uint32_t max_push_constant_bytes = 0;

  uint32_t compute_queue_family = UINT32_MAX;  // UINT32_MAX: none
  /// Why this device cannot be used ("Vulkan 1.1; IRON needs 1.2"); empty when it can.
  std::string unusable;

  /// "discrete GPU", "integrated GPU", "virtual GPU", "CPU", "other".
  std::string type_name() const;
  /// "llvmpipe (LLVM 15.0.6, 256 bits), CPU"
  std::string short_name() const;
  /// Several lines, each indented by `indent`: type and driver, memory, features, limits.
  std::string str(const std::string& indent = "  ") const;
};

/// "1.3.230" from a VK_MAKE_API_VERSION value.
std::string version_text(uint32_t version);

/// A Vulkan instance with its physical devices described. Devices hold it (shared_ptr), so it
/// lives as long as any of them.
class Instance {
 public:
  /// Opens the loader and creates an instance for Vulkan 1.2 or later. IRON_VULKAN_VALIDATION=1
  /// enables VK_LAYER_KHRONOS_validation when it is installed (a warning when not), its reports
  /// going to the IRON log. Throws iron::Error (io) without a loader or when the loader finds
  /// no driver; an instance with no device is not an error until one is chosen.
  static std::shared_ptr<Instance> create();
  /// The process's instance: created on first use and never destroyed. Devices use it. Kept
  /// because destroying the last instance makes the loader unload the driver, and a driver
  /// loaded again for the next device costs its start-up again (lavapipe: LLVM's, tens of ms);
  /// unloaded, its static allocations also look leaked to LeakSanitizer. A failure (no
  /// loader, no driver) is kept and thrown again to every caller.
  static std::shared_ptr<Instance> shared();
  ~Instance();
  Instance(const Instance&) = delete;
  Instance& operator=(const Instance&) = delete;

  const std::vector<DeviceInfo>& devices() const { return devices_; }
  VkPhysicalDevice physical_device(uint32_t index) const { return physical_devices_.at(index); }
  VkInstance handle() const { return instance_; }
  const InstanceFunctions& functions() const { return functions_; }
  uint32_t loader_version() const { return loader_version_; }
  bool validation() const { return validation_; }

 private:
  Instance() = default;

  VkInstance instance_ = VK_NULL_HANDLE;
  InstanceFunctions functions_;
  VkDebugUtilsMessengerEXT messenger_ = VK_NULL_HANDLE;
  uint32_t loader_version_ = 0;
  bool validation_ = false;
  std::vector<VkPhysicalDevice> physical_devices_;
  std::vector<DeviceInfo> devices_;
};

/// The device to use among `devices`: the index `override_text` names when given (the value of
/// IRON_VULKAN_DEVICE), else the first usable discrete GPU, else integrated GPU, else any usable
/// device. Throws iron::Error: no device at all ("the loader found no physical device"), none
/// usable, or an override that is not a number, out of range or unusable (naming the value and
/// listing the devices).
uint32_t choose_device(const std::vector<DeviceInfo>& devices, const char* override_text);

}  // namespace iron::vulkan
