// Instance creation, physical-device descriptions and the choice of device.
#include "devices/vulkan/instance.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <sstream>

#include "devices/vulkan/errors.hpp"
#include "iron/error.hpp"
#include "iron/log.hpp"

namespace iron::vulkan {

namespace {

constexpr const char* kValidationLayer = "VK_LAYER_KHRONOS_validation";

bool validation_requested() {
  const char* env = std::getenv("IRON_VULKAN_VALIDATION");
  return env && std::strcmp(env, "") != 0 && std::strcmp(env, "0") != 0;
}

bool has_layer(const GlobalFunctions& g, const char* name) {
  uint32_t count = 0;
  check(g.vkEnumerateInstanceLayerProperties(&count, nullptr),
        "vkEnumerateInstanceLayerProperties");
  std::vector<VkLayerProperties> layers(count);
  // VK_INCOMPLETE only if a layer was installed between the two calls: the list is then short.
  VkResult r = g.vkEnumerateInstanceLayerProperties(&count, layers.data());
  if (r != VK_INCOMPLETE) check(r, "vkEnumerateInstanceLayerProperties");
  layers.resize(count);
  return std::any_of(layers.begin(), layers.end(),
                     [&](const auto& l) { return !std::strcmp(l.layerName, name); });
}

bool has_instance_extension(const GlobalFunctions& g, const char* layer, const char* name) {
  uint32_t count = 0;
  check(g.vkEnumerateInstanceExtensionProperties(layer, &count, nullptr),
        "vkEnumerateInstanceExtensionProperties");
  std::vector<VkExtensionProperties> extensions(count);
  VkResult r = g.vkEnumerateInstanceExtensionProperties(layer, &count, extensions.data());
  if (r != VK_INCOMPLETE) check(r, "vkEnumerateInstanceExtensionProperties");
  extensions.resize(count);
  return std::any_of(extensions.begin(), extensions.end(),
                     [&](const auto& e) { return !std::strcmp(e.extensionName, name); });
}

// Validation reports go to the IRON log: errors as errors, warnings as warnings. Informational
// messages are not asked for: the loader's and layers' chatter about which driver they load.
VKAPI_ATTR VkBool32 VKAPI_CALL on_validation_message(
    VkDebugUtilsMessageSeverityFlagBitsEXT severity, VkDebugUtilsMessageTypeFlagsEXT,
    const VkDebugUtilsMessengerCallbackDataEXT* data, void*) {
  LogLevel level = LogLevel::info;
  if (severity & VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT)
    level = LogLevel::error;
  else if (severity & VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT)
    level = LogLevel::warning;
  log(level, std::string("vulkan validation: ") +
                 (data && data->pMessage ? data->pMessage : "(no message)"));
  return VK_FALSE;  // the call goes on; the runtime checks its result as usual
}

// The first queue family that runs compute. Every Vulkan implementation with compute puts it on
// its universal family, usually family 0; a dedicated compute-only family would gain nothing
// for one stream of dependent dispatches.
uint32_t compute_family(const InstanceFunctions& f, VkPhysicalDevice device, bool& timestamps) {
  uint32_t count = 0;
  f.vkGetPhysicalDeviceQueueFamilyProperties(device, &count, nullptr);
  std::vector<VkQueueFamilyProperties> families(count);
  f.vkGetPhysicalDeviceQueueFamilyProperties(device, &count, families.data());
  for (uint32_t i = 0; i < count; ++i) {
    if (families[i].queueCount > 0 && (families[i].queueFlags & VK_QUEUE_COMPUTE_BIT)) {
      timestamps = families[i].timestampValidBits > 0;
      return i;
    }
  }
  timestamps = false;
  return UINT32_MAX;
}

// `instance_version`: the apiVersion the instance was created with. A device's 1.3 structures
// may be chained only when both it and the instance are 1.3 or later.
DeviceInfo describe(const InstanceFunctions& f, VkPhysicalDevice device, uint32_t index,
                    uint32_t instance_version) {
  DeviceInfo info;
  info.index = index;
  VkPhysicalDeviceProperties basic{};
  f.vkGetPhysicalDeviceProperties(device, &basic);
  info.name = basic.deviceName;
  info.type = basic.deviceType;
  info.api_version = basic.apiVersion;
  info.driver_version = basic.driverVersion;
  info.vendor_id = basic.vendorID;
  info.device_id = basic.deviceID;
  if (basic.apiVersion < kMinApiVersion) {
    // The 1.1/1.2 property structures may not be chained on an older device: describe it from
    // the 1.0 properties and leave it unusable.
    info.unusable =
        "Vulkan " + version_text(basic.apiVersion) + "; IRON needs " + version_text(kMinApiVersion);
  }

  const VkPhysicalDeviceLimits& limits = basic.limits;
  info.max_storage_buffer_range = limits.maxStorageBufferRange;
  info.min_storage_buffer_offset_alignment =
      std::max<VkDeviceSize>(1, limits.minStorageBufferOffsetAlignment);
  info.non_coherent_atom_size = std::max<VkDeviceSize>(1, limits.nonCoherentAtomSize);
  for (int i = 0; i < 3; ++i) {
    info.max_workgroup_size[i] = limits.maxComputeWorkGroupSize[i];
    info.max_workgroup_count[i] = limits.maxComputeWorkGroupCount[i];
  }
  info.max_workgroup_invocations = limits.maxComputeWorkGroupInvocations;
  info.max_shared_memory_bytes = limits.maxComputeSharedMemorySize;
  info.max_push_constant_bytes = limits.maxPushConstantsSize;
  info.timestamp_period_ns = limits.timestampPeriod;

  if (info.unusable.empty()) {
    VkPhysicalDeviceVulkan11Properties p11{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_PROPERTIES};
    VkPhysicalDeviceVulkan12Properties p12{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_PROPERTIES};
    p11.pNext = &p12;
    VkPhysicalDeviceProperties2 properties{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2};
    properties.pNext = &p11;
    VkPhysicalDeviceVulkan11Features f11{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES};
    VkPhysicalDeviceVulkan12Features f12{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES};
    f11.pNext = &f12;
    VkPhysicalDeviceFeatures2 features{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
    features.pNext = &f11;
#if defined(VK_VERSION_1_3)
    VkPhysicalDeviceVulkan13Properties p13{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_3_PROPERTIES};
    VkPhysicalDeviceVulkan13Features f13{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_3_FEATURES};
    const bool v13 = std::min(basic.apiVersion, instance_version) >= VK_API_VERSION_1_3;
    if (v13) {
      p12.pNext = &p13;
      f12.pNext = &f13;
    }
#endif
    f.vkGetPhysicalDeviceProperties2(device, &properties);
    f.vkGetPhysicalDeviceFeatures2(device, &features);

    info.driver_name = p12.driverName;
    info.driver_info = p12.driverInfo;
    info.subgroup_size = info.min_subgroup_size = info.max_subgroup_size = p11.subgroupSize;
    info.subgroup_arithmetic =
        (p11.subgroupSupportedStages & VK_SHADER_STAGE_COMPUTE_BIT) &&
        (p11.subgroupSupportedOperations & VK_SUBGROUP_FEATURE_ARITHMETIC_BIT);
    info.subgroup_ballot = (p11.subgroupSupportedStages & VK_SHADER_STAGE_COMPUTE_BIT) &&
                           (p11.subgroupSupportedOperations & VK_SUBGROUP_FEATURE_BALLOT_BIT);
    info.max_allocation_bytes = p11.maxMemoryAllocationSize;
    info.max_buffer_bytes = p11.maxMemoryAllocationSize;
    info.features.storage_buffer_16bit = f11.storageBuffer16BitAccess;
    info.features.storage_buffer_8bit = f12.storageBuffer8BitAccess;
    info.features.shader_int8 = f12.shaderInt8;
    info.features.shader_float16 = f12.shaderFloat16;
    info.features.shader_int16 = features.features.shaderInt16;
    info.features.shader_int64 = features.features.shaderInt64;
#if defined(VK_VERSION_1_3)
    if (v13) {
      info.min_subgroup_size = p13.minSubgroupSize;
      info.max_subgroup_size = p13.maxSubgroupSize;
      info.max_buffer_bytes = p13.maxBufferSize;
      info.features.subgroup_size_control =
          f13.subgroupSizeControl && f13.computeFullSubgroups &&
          (p13.requiredSubgroupSizeStages & VK_SHADER_STAGE_COMPUTE_BIT);
    }
#endif
  }

  bool queue_timestamps = false;
  info.compute_queue_family = compute_family(f, device, queue_timestamps);
  info.timestamps = queue_timestamps && limits.timestampComputeAndGraphics;
  if (info.unusable.empty() && info.compute_queue_family == UINT32_MAX)
    info.unusable = "no compute queue";

  VkPhysicalDeviceMemoryProperties memory{};
  f.vkGetPhysicalDeviceMemoryProperties(device, &memory);
  for (uint32_t h = 0; h < memory.memoryHeapCount; ++h)
    if (memory.memoryHeaps[h].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT)
      info.device_local_bytes += memory.memoryHeaps[h].size;
  bool device_local_mappable = false;
  for (uint32_t t = 0; t < memory.memoryTypeCount; ++t) {
    const VkMemoryPropertyFlags flags = memory.memoryTypes[t].propertyFlags;
    if ((flags & VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT) &&
        (flags & VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT))
      device_local_mappable = true;
  }
  // A discrete GPU's host-visible device-local type (resizable BAR) is memory across the bus:
  // fine to write once, slow to read back. Only a device that shares the host's memory skips
  // staging.
  info.unified_memory = device_local_mappable && info.type != VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU;
  return info;
}

// Lower ranks are preferred: discrete, integrated, then the rest in a fixed order.
int type_rank(VkPhysicalDeviceType type) {
  switch (type) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: return 0;
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: return 1;
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: return 2;
    case VK_PHYSICAL_DEVICE_TYPE_CPU: return 3;
    default: return 4;
  }
}

std::string device_list(const std::vector<DeviceInfo>& devices) {
  std::string list;
  for (const DeviceInfo& d : devices) {
    list += (list.empty() ? "" : "; ") + std::to_string(d.index) + ": " + d.short_name();
    if (!d.unusable.empty()) list += " (unusable: " + d.unusable + ")";
  }
  return list;
}

}  // namespace

std::string version_text(uint32_t version) {
  return std::to_string(VK_API_VERSION_MAJOR(version)) + "." +
         std::to_string(VK_API_VERSION_MINOR(version)) + "." +
         std::to_string(VK_API_VERSION_PATCH(version));
}

std::string DeviceFeatures::str() const {
  std::string s;
  auto add = [&](bool present, const char* name) {
    s += (s.empty() ? "" : ", ") + std::string(present ? "" : "no ") + name;
  };
  add(storage_buffer_16bit, "16-bit storage");
  add(storage_buffer_8bit, "8-bit storage");
  add(shader_int8, "shaderInt8");
  add(shader_int16, "shaderInt16");
  add(shader_float16, "shaderFloat16");
  add(shader_int64, "shaderInt64");
  add(subgroup_size_control, "subgroup size control");
  return s;
}

std::string DeviceInfo::type_name() const {
  switch (type) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: return "discrete GPU";
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: return "integrated GPU";
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: return "virtual GPU";
    case VK_PHYSICAL_DEVICE_TYPE_CPU: return "CPU";
    default: return "other";
  }
}

std::string DeviceInfo::short_name() const { return escaped(name, 100) + ", " + type_name(); }

std::string DeviceInfo::str(const std::string& indent) const {
  std::ostringstream o;
  o << indent << "type " << type_name() << "; Vulkan " << version_text(api_version) << "; driver "
    << (driver_name.empty() ? "unknown" : escaped(driver_name, 100));
  if (!driver_info.empty()) o << " (" << escaped(driver_info, 100) << ")";
  o << "\n";
  if (!unusable.empty()) o << indent << "unusable: " << unusable << "\n";
  o << indent << "memory: " << bytes_text(device_local_bytes) << " device-local"
    << (unified_memory ? ", shared with the host (mapped directly, no staging)" : "") << "\n";
  o << indent << "features: " << features.str() << "\n";
  o << indent << "subgroups: " << subgroup_size;
  if (min_subgroup_size != max_subgroup_size)
    o << " (" << min_subgroup_size << " to " << max_subgroup_size << ")";
  o << " lanes, " << (subgroup_arithmetic ? "" : "no ") << "arithmetic, " << (subgroup_ballot ? "" : "no ")
    << "ballot; timestamps: ";
  if (timestamps)
    o << "yes, " << timestamp_period_ns << " ns per tick";
  else
    o << "no";
  o << "\n";
  o << indent << "limits: maxStorageBufferRange " << bytes_text(max_storage_buffer_range)
    << ", workgroup " << max_workgroup_size[0] << "x" << max_workgroup_size[1] << "x"
    << max_workgroup_size[2] << " (" << max_workgroup_invocations << " invocations), shared memory "
    << bytes_text(max_shared_memory_bytes) << ", push constants " << max_push_constant_bytes
    << " B, one allocation " << bytes_text(max_allocation_bytes) << "\n";
  return o.str();
}

std::shared_ptr<Instance> Instance::create() {
  const GlobalFunctions& g = loader();
  std::shared_ptr<Instance> instance(new Instance());
  instance->loader_version_ = VK_API_VERSION_1_0;
  if (g.vkEnumerateInstanceVersion)
    check(g.vkEnumerateInstanceVersion(&instance->loader_version_), "vkEnumerateInstanceVersion");
  if (instance->loader_version_ < kMinApiVersion)
    fail("the Vulkan loader " + std::string(kLoaderLibrary) + " is version " +
         version_text(instance->loader_version_) + "; IRON needs " + version_text(kMinApiVersion) +
         " (install a newer libvulkan1)");

  std::vector<const char*> layers, extensions;
  if (validation_requested()) {
    if (has_layer(g, kValidationLayer)) {
      layers.push_back(kValidationLayer);
      instance->validation_ = true;
      if (has_instance_extension(g, kValidationLayer, VK_EXT_DEBUG_UTILS_EXTENSION_NAME) ||
          has_instance_extension(g, nullptr, VK_EXT_DEBUG_UTILS_EXTENSION_NAME))
        extensions.push_back(VK_EXT_DEBUG_UTILS_EXTENSION_NAME);
    } else {
      log(LogLevel::warning,
          std::string("IRON_VULKAN_VALIDATION is set but ") + kValidationLayer +
              " is not installed (Debian: vulkan-validationlayers); running without it");
    }
  }

  VkApplicationInfo application{VK_STRUCTURE_TYPE_APPLICATION_INFO};
  application.pApplicationName = "iron";
  application.pEngineName = "iron";
  // The highest version the runtime uses: 1.3 structures are read where a device has them.
  application.apiVersion = std::min<uint32_t>(instance->loader_version_, VK_API_VERSION_1_3);
  VkInstanceCreateInfo create{VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO};
  create.pApplicationInfo = &application;
  create.enabledLayerCount = uint32_t(layers.size());
  create.ppEnabledLayerNames = layers.data();
  create.enabledExtensionCount = uint32_t(extensions.size());
  create.ppEnabledExtensionNames = extensions.data();
  VkResult r = g.vkCreateInstance(&create, nullptr, &instance->instance_);
  if (r == VK_ERROR_INCOMPATIBLE_DRIVER)
    fail("no Vulkan device: the loader found no driver (ICD) for Vulkan " +
         version_text(kMinApiVersion) +
         " (Debian: mesa-vulkan-drivers provides lavapipe, a Vulkan device on the CPU)");
  check(r, "vkCreateInstance");
  instance->functions_ = load_instance_functions(g, instance->instance_);
  const InstanceFunctions& f = instance->functions_;

  if (!extensions.empty() && f.vkCreateDebugUtilsMessengerEXT) {
    VkDebugUtilsMessengerCreateInfoEXT messenger{
        VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT};
    messenger.messageSeverity = VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT |
                                VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT;
    messenger.messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT |
                            VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT |
                            VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT;
    messenger.pfnUserCallback = &on_validation_message;
    check(f.vkCreateDebugUtilsMessengerEXT(instance->instance_, &messenger, nullptr,
                                           &instance->messenger_),
          "vkCreateDebugUtilsMessengerEXT");
  }

  uint32_t count = 0;
  check(f.vkEnumeratePhysicalDevices(instance->instance_, &count, nullptr),
        "vkEnumeratePhysicalDevices");
  instance->physical_devices_.resize(count);
  r = f.vkEnumeratePhysicalDevices(instance->instance_, &count, instance->physical_devices_.data());
  if (r != VK_INCOMPLETE) check(r, "vkEnumeratePhysicalDevices");
  instance->physical_devices_.resize(count);
  for (uint32_t i = 0; i < count; ++i)
    instance->devices_.push_back(
        describe(f, instance->physical_devices_[i], i, application.apiVersion));
  return instance;
}

std::shared_ptr<Instance> Instance::shared() {
  static std::once_flag once;
  // Never destroyed (a heap object): it must outlive every device, including ones in static
  // storage, and see shared() above for why the driver stays loaded.
  static auto* instance = new std::shared_ptr<Instance>();
  static std::string failure;
  std::call_once(once, [] {
    try {
      *instance = create();
    } catch (const Error& e) {
      failure = e.what();
    }
  });
  if (!failure.empty()) fail(failure);
  return *instance;
}

Instance::~Instance() {
  if (messenger_ != VK_NULL_HANDLE)
    functions_.vkDestroyDebugUtilsMessengerEXT(instance_, messenger_, nullptr);
  // The table may be partly empty when creation failed half way.
  if (instance_ != VK_NULL_HANDLE && functions_.vkDestroyInstance)
    functions_.vkDestroyInstance(instance_, nullptr);
}

uint32_t choose_device(const std::vector<DeviceInfo>& devices, const char* override_text) {
  if (devices.empty())
    fail(
        "no Vulkan device: the loader found no physical device (Debian: mesa-vulkan-drivers "
        "provides lavapipe, "
        "a Vulkan device on the CPU)");
  if (override_text) {
    // The whole text must be a decimal index: "1x", "-1", " 1" and "" are refused, not read as 1 or
    // 0.
    const std::string text = override_text;
    const bool digits =
        !text.empty() && text.size() <= 9 &&
        std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
    const uint64_t index = digits ? std::stoull(text) : UINT64_MAX;
    if (index >= devices.size())
      value_error("IRON_VULKAN_DEVICE='" + escaped(text, 40) +
                  "' is not the index of a Vulkan device (devices: " + device_list(devices) + ")");
    const DeviceInfo& chosen = devices[index];
    if (!chosen.unusable.empty())
      value_error("IRON_VULKAN_DEVICE=" + text + " names " + chosen.short_name() +
                  ", which cannot be used: " + chosen.unusable +
                  " (devices: " + device_list(devices) + ")");
    return uint32_t(index);
  }
  const DeviceInfo* best = nullptr;
  for (const DeviceInfo& d : devices)
    if (d.unusable.empty() && (!best || type_rank(d.type) < type_rank(best->type))) best = &d;
  if (!best) fail("no usable Vulkan device (devices: " + device_list(devices) + ")");
  return best->index;
}

}  // namespace iron::vulkan
