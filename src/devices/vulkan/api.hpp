// The Vulkan API as IRON calls it: the loader library is opened with dlopen at run time and every
// function is reached through a table of pointers, never linked. A binary built with Vulkan
// support then starts on a machine without libvulkan.so.1 and says so when a Vulkan device is
// asked for, instead of failing to load.
//
// Three tables, one per level of the API: global functions come from vkGetInstanceProcAddr with
// no instance, instance functions with the instance, device functions from vkGetDeviceProcAddr
// (which skips the loader's per-call dispatch for the hot command-buffer calls).
#pragma once

#ifndef VK_NO_PROTOTYPES
#define VK_NO_PROTOTYPES  // only the types: every call goes through the tables below
#endif
#include <vulkan/vulkan.h>

namespace iron::vulkan {

// The shared library the Vulkan loader is installed as on Linux (libvulkan1 on Debian).
inline constexpr const char* kLoaderLibrary = "libvulkan.so.1";

#define IRON_VK_GLOBAL_FUNCTIONS(X)     \
  X(vkCreateInstance)                   \
  X(vkEnumerateInstanceVersion)         \
  X(vkEnumerateInstanceLayerProperties) \
  X(vkEnumerateInstanceExtensionProperties)

#define IRON_VK_INSTANCE_FUNCTIONS(X)         \
  X(vkDestroyInstance)                        \
  X(vkEnumeratePhysicalDevices)               \
  X(vkGetPhysicalDeviceProperties)            \
  X(vkGetPhysicalDeviceProperties2)           \
  X(vkGetPhysicalDeviceFeatures2)             \
  X(vkGetPhysicalDeviceMemoryProperties)      \
  X(vkGetPhysicalDeviceQueueFamilyProperties) \
  X(vkEnumerateDeviceExtensionProperties)     \
  X(vkCreateDevice)                           \
  X(vkGetDeviceProcAddr)

// Present only when the instance enabled VK_EXT_debug_utils (with validation); null otherwise.
#define IRON_VK_DEBUG_FUNCTIONS(X)  \
  X(vkCreateDebugUtilsMessengerEXT) \
  X(vkDestroyDebugUtilsMessengerEXT)

#define IRON_VK_DEVICE_FUNCTIONS(X) \
  X(vkDestroyDevice)                \
  X(vkGetDeviceQueue)               \
  X(vkDeviceWaitIdle)               \
  X(vkQueueWaitIdle)                \
  X(vkCreateBuffer)                 \
  X(vkDestroyBuffer)                \
  X(vkGetBufferMemoryRequirements)  \
  X(vkAllocateMemory)               \
  X(vkFreeMemory)                   \
  X(vkBindBufferMemory)             \
  X(vkMapMemory)                    \
  X(vkUnmapMemory)                  \
  X(vkFlushMappedMemoryRanges)      \
  X(vkInvalidateMappedMemoryRanges) \
  X(vkCreateShaderModule)           \
  X(vkDestroyShaderModule)          \
  X(vkCreateDescriptorSetLayout)    \
  X(vkDestroyDescriptorSetLayout)   \
  X(vkCreatePipelineLayout)         \
  X(vkDestroyPipelineLayout)        \
  X(vkCreatePipelineCache)          \
  X(vkDestroyPipelineCache)         \
  X(vkCreateComputePipelines)       \
  X(vkDestroyPipeline)              \
  X(vkCreateDescriptorPool)         \
  X(vkDestroyDescriptorPool)        \
  X(vkResetDescriptorPool)          \
  X(vkAllocateDescriptorSets)       \
  X(vkUpdateDescriptorSets)         \
  X(vkCreateCommandPool)            \
  X(vkDestroyCommandPool)           \
  X(vkAllocateCommandBuffers)       \
  X(vkFreeCommandBuffers)           \
  X(vkResetCommandBuffer)           \
  X(vkBeginCommandBuffer)           \
  X(vkEndCommandBuffer)             \
  X(vkCmdBindPipeline)              \
  X(vkCmdBindDescriptorSets)        \
  X(vkCmdPushConstants)             \
  X(vkCmdDispatch)                  \
  X(vkCmdPipelineBarrier)           \
  X(vkCmdCopyBuffer)                \
  X(vkCmdWriteTimestamp)            \
  X(vkCmdResetQueryPool)            \
  X(vkCreateQueryPool)              \
  X(vkDestroyQueryPool)             \
  X(vkGetQueryPoolResults)          \
  X(vkCreateFence)                  \
  X(vkDestroyFence)                 \
  X(vkResetFences)                  \
  X(vkWaitForFences)                \
  X(vkGetFenceStatus)               \
  X(vkQueueSubmit)

#define IRON_VK_DECLARE_POINTER(name) PFN_##name name = nullptr;

/// The loader's entry point and the functions that need no instance.
struct GlobalFunctions {
  PFN_vkGetInstanceProcAddr vkGetInstanceProcAddr = nullptr;
  IRON_VK_GLOBAL_FUNCTIONS(IRON_VK_DECLARE_POINTER)
};

struct InstanceFunctions {
  IRON_VK_INSTANCE_FUNCTIONS(IRON_VK_DECLARE_POINTER)
  IRON_VK_DEBUG_FUNCTIONS(IRON_VK_DECLARE_POINTER)
};

struct DeviceFunctions {
  IRON_VK_DEVICE_FUNCTIONS(IRON_VK_DECLARE_POINTER)
};

/// The process's loader, opened on first use and kept open to the end (Vulkan drivers register
/// exit handlers; unloading them early is not safe). Throws iron::Error (io) naming
/// libvulkan.so.1 and the package to install when it cannot be opened.
const GlobalFunctions& loader();
/// Opens the loader from `library` (a name dlopen searches for, or a path) without keeping it
/// as the process's: for tests of the missing-loader message.
GlobalFunctions open_loader(const char* library);

/// The instance-level table of `instance` (global ones must be loaded).
InstanceFunctions load_instance_functions(const GlobalFunctions& global, VkInstance instance);
/// The device-level table of `device`.
DeviceFunctions load_device_functions(const InstanceFunctions& functions, VkDevice device);

}  // namespace iron::vulkan
