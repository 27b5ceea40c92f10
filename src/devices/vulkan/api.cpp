// Opening the Vulkan loader at run time and filling the function tables.
#include "devices/vulkan/api.hpp"

#include <dlfcn.h>

#include <mutex>
#include <string>

#include "devices/vulkan/errors.hpp"

namespace iron::vulkan {

namespace {

// A global function a loader of Vulkan 1.0 lacks (vkEnumerateInstanceVersion is 1.1): null then.
template <typename F>
void load_global(const GlobalFunctions& g, F& slot, const char* name) {
  slot = reinterpret_cast<F>(g.vkGetInstanceProcAddr(VK_NULL_HANDLE, name));
}

template <typename F>
void load_instance(const GlobalFunctions& g, VkInstance instance, F& slot, const char* name,
                   bool required) {
  slot = reinterpret_cast<F>(g.vkGetInstanceProcAddr(instance, name));
  if (!slot && required)
    fail(std::string("the Vulkan loader has no instance function ") + name +
         " (a loader older than Vulkan 1.1?)");
}

template <typename F>
void load_device(const InstanceFunctions& f, VkDevice device, F& slot, const char* name) {
  slot = reinterpret_cast<F>(f.vkGetDeviceProcAddr(device, name));
  if (!slot) fail(std::string("the Vulkan driver has no device function ") + name);
}

}  // namespace

GlobalFunctions open_loader(const char* library) {
  // RTLD_LOCAL: the loader's symbols stay out of the global namespace, so nothing else in the
  // process binds to them by accident.
  void* handle = ::dlopen(library, RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char* why = ::dlerror();
    fail(std::string("cannot load the Vulkan loader ") + library + " (" +
         (why ? why : "not found") +
         "): install it (Debian: libvulkan1, and mesa-vulkan-drivers for lavapipe, a Vulkan device "
         "on "
         "the CPU), or run without a Vulkan device");
  }
  GlobalFunctions g;
  g.vkGetInstanceProcAddr =
      reinterpret_cast<PFN_vkGetInstanceProcAddr>(::dlsym(handle, "vkGetInstanceProcAddr"));
  if (!g.vkGetInstanceProcAddr)
    fail(std::string(library) + " has no vkGetInstanceProcAddr: it is not a Vulkan loader");
#define IRON_VK_LOAD_GLOBAL(name) load_global(g, g.name, #name);
  IRON_VK_GLOBAL_FUNCTIONS(IRON_VK_LOAD_GLOBAL)
#undef IRON_VK_LOAD_GLOBAL
  if (!g.vkCreateInstance || !g.vkEnumerateInstanceLayerProperties ||
      !g.vkEnumerateInstanceExtensionProperties)
    fail(std::string(library) +
         " lacks the Vulkan 1.0 global functions: it is not a Vulkan loader");
  // The handle is never closed: see loader().
  return g;
}

const GlobalFunctions& loader() {
  // Opened once; a failure is kept and thrown again to every caller, so a process without a
  // loader does not retry dlopen on every query.
  static std::once_flag once;
  static GlobalFunctions functions;
  static std::string failure;
  std::call_once(once, [] {
    try {
      functions = open_loader(kLoaderLibrary);
    } catch (const Error& e) {
      failure = e.what();
    }
  });
  if (!failure.empty()) fail(failure);
  return functions;
}

InstanceFunctions load_instance_functions(const GlobalFunctions& global, VkInstance instance) {
  InstanceFunctions f;
#define IRON_VK_LOAD_INSTANCE(name) load_instance(global, instance, f.name, #name, true);
  IRON_VK_INSTANCE_FUNCTIONS(IRON_VK_LOAD_INSTANCE)
#undef IRON_VK_LOAD_INSTANCE
#define IRON_VK_LOAD_DEBUG(name) load_instance(global, instance, f.name, #name, false);
  IRON_VK_DEBUG_FUNCTIONS(IRON_VK_LOAD_DEBUG)
#undef IRON_VK_LOAD_DEBUG
  return f;
}

DeviceFunctions load_device_functions(const InstanceFunctions& functions, VkDevice device) {
  DeviceFunctions f;
#define IRON_VK_LOAD_DEVICE(name) load_device(functions, device, f.name, #name);
  IRON_VK_DEVICE_FUNCTIONS(IRON_VK_LOAD_DEVICE)
#undef IRON_VK_LOAD_DEVICE
  return f;
}

}  // namespace iron::vulkan
