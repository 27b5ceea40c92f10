// The logical device, its queue, and buffers with their memory.
#include "devices/vulkan/device.hpp"

#include <algorithm>
#include <bit>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "devices/vulkan/errors.hpp"
#include "devices/vulkan/pipeline.hpp"
#include "iron/error.hpp"
#include "iron/log.hpp"

namespace iron::vulkan {

namespace {

// Vulkan forbids empty buffers; an empty tensor still gets a valid handle of this many bytes.
constexpr size_t kMinBufferBytes = 4;
// Uploads and downloads through staging move at most this much per copy, so a multi-gigabyte
// weight file does not need a second multi-gigabyte buffer.
constexpr size_t kStagingChunkBytes = size_t(64) << 20;

// "60000 ms", or "1 us" for a wait shorter than a millisecond.
std::string duration_text(std::chrono::nanoseconds t) {
  if (t >= std::chrono::milliseconds(1))
    return std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(t).count()) + " ms";
  return std::to_string(std::chrono::duration_cast<std::chrono::microseconds>(t).count()) + " us";
}

std::string request_text(size_t bytes, MemoryKind kind, std::string_view purpose) {
  std::string text = std::string("a ") + memory_kind_name(kind) + " buffer of " +
                     bytes_text(bytes) + " (" + std::to_string(bytes) + " bytes)";
  if (!purpose.empty()) text += " for " + escaped(purpose, 60);
  return text;
}

// Memory-type choice: flags a kind needs, flags it prefers, and flags it would rather not have.
struct MemoryWish {
  VkMemoryPropertyFlags required, preferred, avoided;
};

MemoryWish wish_for(MemoryKind kind, bool unified) {
  constexpr VkMemoryPropertyFlags local = VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT;
  constexpr VkMemoryPropertyFlags visible = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT;
  constexpr VkMemoryPropertyFlags coherent = VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
  constexpr VkMemoryPropertyFlags cached = VK_MEMORY_PROPERTY_HOST_CACHED_BIT;
  switch (kind) {
    case MemoryKind::device:
      // On unified memory the device-local type is the host's memory: map it and skip staging.
      // On a discrete GPU, the plain VRAM type rather than the small host-visible BAR window.
      return unified ? MemoryWish{local | visible, coherent, 0} : MemoryWish{local, 0, visible};
    case MemoryKind::staging:
      // Written once in order by the host: write-combined memory is best, cached is wasted.
      return {visible, coherent, cached};
    case MemoryKind::per_call:
      // A few words read by every dispatch of a submit: device-local and host-visible where
      // there is such memory (BAR, unified), else host memory the device reads over the bus.
      return {visible, coherent | local, 0};
    case MemoryKind::readback:
      // The host reads it back: cached, or every read is an uncached bus access.
      return {visible, cached | coherent, 0};
  }
  return {visible, 0, 0};
}

}  // namespace

const char* memory_kind_name(MemoryKind kind) {
  switch (kind) {
    case MemoryKind::device: return "device";
    case MemoryKind::staging: return "staging";
    case MemoryKind::per_call: return "per-call";
    case MemoryKind::readback: return "readback";
  }
  return "unknown";
}

// ---- Buffer ----

Buffer::~Buffer() { release(); }

Buffer::Buffer(Buffer&& other) noexcept { *this = std::move(other); }

Buffer& Buffer::operator=(Buffer&& other) noexcept {
  if (this != &other) {
    release();
    device_ = std::exchange(other.device_, nullptr);
    buffer_ = std::exchange(other.buffer_, VK_NULL_HANDLE);
    memory_ = std::exchange(other.memory_, VK_NULL_HANDLE);
    size_ = std::exchange(other.size_, 0);
    allocation_size_ = std::exchange(other.allocation_size_, 0);
    kind_ = other.kind_;
    mapped_ = std::exchange(other.mapped_, nullptr);
    coherent_ = other.coherent_;
  }
  return *this;
}

void Buffer::release() {
  if (device_) device_->free_buffer(*this);
  device_ = nullptr;
}

namespace {
// The range [offset, offset + bytes) widened to whole non-coherent atoms, as
// vkFlushMappedMemoryRanges requires; VK_WHOLE_SIZE when it reaches the allocation's end.
VkMappedMemoryRange atom_range(VkDeviceMemory memory, size_t offset, size_t bytes,
                               VkDeviceSize atom, VkDeviceSize allocation_size) {
  VkMappedMemoryRange range{VK_STRUCTURE_TYPE_MAPPED_MEMORY_RANGE};
  range.memory = memory;
  range.offset = offset / atom * atom;
  const VkDeviceSize end = (VkDeviceSize(offset) + bytes + atom - 1) / atom * atom;
  range.size = end >= allocation_size ? VK_WHOLE_SIZE : end - range.offset;
  return range;
}
}  // namespace

void Buffer::flush(size_t offset, size_t bytes) const {
  sync(&DeviceFunctions::vkFlushMappedMemoryRanges, "vkFlushMappedMemoryRanges", offset, bytes);
}

void Buffer::invalidate(size_t offset, size_t bytes) const {
  sync(&DeviceFunctions::vkInvalidateMappedMemoryRanges, "vkInvalidateMappedMemoryRanges", offset, bytes);
}

void Buffer::sync(PFN_vkFlushMappedMemoryRanges DeviceFunctions::*call, const char* what, size_t offset,
                  size_t bytes) const {
  if (coherent_ || !mapped_ || bytes == 0) return;
  const VkMappedMemoryRange range =
      atom_range(memory_, offset, bytes, device_->info().non_coherent_atom_size, allocation_size_);
  check((device_->functions().*call)(device_->handle(), 1, &range), what);
}

// ---- Device ----

namespace {
// kDefaultWait, kDefaultWaitOnTheHost for a device on the host's processor, or
// IRON_VULKAN_TIMEOUT_S seconds (a positive number; anything else is refused by name).
std::chrono::nanoseconds default_wait_limit(const DeviceInfo& info) {
  if (const char* text = std::getenv("IRON_VULKAN_TIMEOUT_S"); text && *text) {
    char* end = nullptr;
    const double seconds = std::strtod(text, &end);
    if (end == text || *end != '\0' || !(seconds > 0) || seconds > 1e9)
      value_error(std::string("IRON_VULKAN_TIMEOUT_S must be a positive number of seconds, not \"") +
                  std::string(text).substr(0, 40) + "\"");
    return std::chrono::nanoseconds(int64_t(seconds * 1e9));
  }
  if (info.type == VK_PHYSICAL_DEVICE_TYPE_CPU) return kDefaultWaitOnTheHost;
  return kDefaultWait;
}
}  // namespace

std::unique_ptr<Device> Device::create() {
  std::shared_ptr<Instance> instance = Instance::shared();
  const uint32_t index = choose_device(instance->devices(), std::getenv("IRON_VULKAN_DEVICE"));
  DeviceOptions options;
  const char* staging = std::getenv("IRON_VULKAN_STAGING");
  options.force_staging =
      staging && std::strcmp(staging, "") != 0 && std::strcmp(staging, "0") != 0;
  return create(std::move(instance), index, options);
}

std::unique_ptr<Device> Device::create(std::shared_ptr<Instance> instance, uint32_t index,
                                       const DeviceOptions& options) {
  // Owned from the start: a failure half way destroys what was made (the destructor checks
  // each handle).
  std::unique_ptr<Device> device(new Device());
  Device& d = *device;
  d.instance_ = std::move(instance);
  const InstanceFunctions& f = d.instance_->functions();
  if (index >= d.instance_->devices().size())
    value_error("no Vulkan device " + std::to_string(index) + " (the instance has " +
                std::to_string(d.instance_->devices().size()) + ")");
  d.info_ = d.instance_->devices()[index];
  if (!d.info_.unusable.empty())
    fail("Vulkan device " + d.info_.short_name() + " cannot be used: " + d.info_.unusable);
  const VkPhysicalDevice physical = d.instance_->physical_device(index);

  // Every optional feature the device offers is enabled; none is required. enabled_ records
  // them so shaders can choose.
  d.enabled_ = d.info_.features;
  VkPhysicalDeviceFeatures2 features{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
  VkPhysicalDeviceVulkan11Features f11{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES};
  VkPhysicalDeviceVulkan12Features f12{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES};
  features.pNext = &f11;
  f11.pNext = &f12;
  features.features.shaderInt16 = d.enabled_.shader_int16;
  features.features.shaderInt64 = d.enabled_.shader_int64;
  f11.storageBuffer16BitAccess = d.enabled_.storage_buffer_16bit;
  f12.storageBuffer8BitAccess = d.enabled_.storage_buffer_8bit;
  f12.shaderInt8 = d.enabled_.shader_int8;
  f12.shaderFloat16 = d.enabled_.shader_float16;
#if defined(VK_VERSION_1_3)
  VkPhysicalDeviceVulkan13Features f13{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_3_FEATURES};
  if (d.enabled_.subgroup_size_control) {  // only ever set on a Vulkan 1.3 device
    f13.subgroupSizeControl = VK_TRUE;
    f13.computeFullSubgroups = VK_TRUE;
    f12.pNext = &f13;
  }
#endif

  const float priority = 1.0f;
  VkDeviceQueueCreateInfo queue{VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO};
  queue.queueFamilyIndex = d.info_.compute_queue_family;
  queue.queueCount = 1;
  queue.pQueuePriorities = &priority;
  VkDeviceCreateInfo create{VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO};
  create.pNext = &features;
  create.queueCreateInfoCount = 1;
  create.pQueueCreateInfos = &queue;
  VkResult r = f.vkCreateDevice(physical, &create, nullptr, &d.device_);
  if (r != VK_SUCCESS) fail("vkCreateDevice", r, d.info_.short_name());
  d.functions_ = load_device_functions(f, d.device_);
  const DeviceFunctions& df = d.functions_;
  df.vkGetDeviceQueue(d.device_, d.info_.compute_queue_family, 0, &d.queue_);

  VkPipelineCacheCreateInfo cache{VK_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO};
  check(df.vkCreatePipelineCache(d.device_, &cache, nullptr, &d.pipeline_cache_),
        "vkCreatePipelineCache");
  d.pipelines_ = std::make_unique<PipelineCache>(d);

  VkCommandPoolCreateInfo pool{VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
  pool.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
  pool.queueFamilyIndex = d.info_.compute_queue_family;
  check(df.vkCreateCommandPool(d.device_, &pool, nullptr, &d.transfer_pool_),
        "vkCreateCommandPool");
  VkCommandBufferAllocateInfo allocate{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
  allocate.commandPool = d.transfer_pool_;
  allocate.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
  allocate.commandBufferCount = 1;
  check(df.vkAllocateCommandBuffers(d.device_, &allocate, &d.transfer_commands_),
        "vkAllocateCommandBuffers");
  VkFenceCreateInfo fence{VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
  check(df.vkCreateFence(d.device_, &fence, nullptr, &d.transfer_fence_), "vkCreateFence");

  d.set_wait_limit(default_wait_limit(d.info_));

  f.vkGetPhysicalDeviceMemoryProperties(physical, &d.memory_);
  if (d.info_.unified_memory && !options.force_staging) {
    const uint32_t type = d.memory_type(UINT32_MAX, MemoryKind::device);
    d.maps_device_memory_ =
        d.memory_.memoryTypes[type].propertyFlags & VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT;
  }
  log(LogLevel::info, "vulkan: device " + std::to_string(index) + ": " + d.info_.short_name() +
                          (d.maps_device_memory_ ? "; device memory mapped, no staging" : ""));
  return device;
}

Device::~Device() {
  pipelines_.reset();
  if (device_ == VK_NULL_HANDLE) return;
  // Command lists settle before they are destroyed, so nothing is in flight here but a copy
  // whose wait timed out.
  settle("destroying the device");
  const DeviceFunctions& df = functions_;
  if (live_buffers_.load() != 0)
    log(LogLevel::error,
        "vulkan: the device is destroyed with " + std::to_string(live_buffers_.load()) +
            " buffers alive (they must go first; their memory is freed with the device)");
  if (transfer_fence_ != VK_NULL_HANDLE) df.vkDestroyFence(device_, transfer_fence_, nullptr);
  if (transfer_pool_ != VK_NULL_HANDLE) df.vkDestroyCommandPool(device_, transfer_pool_, nullptr);
  if (pipeline_cache_ != VK_NULL_HANDLE)
    df.vkDestroyPipelineCache(device_, pipeline_cache_, nullptr);
  if (df.vkDestroyDevice)
    df.vkDestroyDevice(device_, nullptr);
  else  // creation failed before the device table was loaded
    reinterpret_cast<PFN_vkDestroyDevice>(
        instance_->functions().vkGetDeviceProcAddr(device_, "vkDestroyDevice"))(device_, nullptr);
}

const Pipeline& Device::pipeline(const PipelineKey& key) { return pipelines_->get(key); }

uint32_t Device::memory_type(uint32_t allowed_types, MemoryKind kind) const {
  const MemoryWish wish = wish_for(kind, info_.unified_memory);
  int best = -1, best_score = 0;
  for (uint32_t t = 0; t < memory_.memoryTypeCount; ++t) {
    const VkMemoryPropertyFlags flags = memory_.memoryTypes[t].propertyFlags;
    if (!(allowed_types & (1u << t)) || (flags & wish.required) != wish.required) continue;
    // Each preferred flag counts more than all avoided ones; ties keep the first type (drivers
    // list their best types first).
    const int score =
        4 * std::popcount(flags & wish.preferred) - std::popcount(flags & wish.avoided);
    if (best < 0 || score > best_score) {
      best = int(t);
      best_score = score;
    }
  }
  if (best < 0)
    fail(std::string("Vulkan device ") + info_.short_name() + " has no memory type for " +
         memory_kind_name(kind) + " buffers");
  return uint32_t(best);
}

Buffer Device::create_buffer(size_t bytes, MemoryKind kind, std::string_view purpose) {
  const VkDeviceSize asked = std::max(bytes, kMinBufferBytes);
  auto out_of_memory = [&](VkDeviceSize size, uint32_t type) {
    const uint32_t heap = memory_.memoryTypes[type].heapIndex;
    throw VulkanError(VK_ERROR_OUT_OF_DEVICE_MEMORY,
                      "out of device memory: " + request_text(bytes, kind, purpose) + " needs " +
                          bytes_text(size) + " of memory heap " + std::to_string(heap) +
                          ", which holds " + bytes_text(memory_.memoryHeaps[heap].size) + " (" +
                          std::to_string(memory_.memoryHeaps[heap].size) + " bytes) on " +
                          info_.short_name());
  };
  // Refused before any call: a driver asked for more than its heap may try (lavapipe mallocs).
  const uint32_t likely_type = memory_type(UINT32_MAX, kind);
  if (asked > memory_.memoryHeaps[memory_.memoryTypes[likely_type].heapIndex].size)
    out_of_memory(asked, likely_type);
  if (asked > info_.max_buffer_bytes)
    fail(request_text(bytes, kind, purpose) + " exceeds the largest buffer " + info_.short_name() +
         " allows (" + bytes_text(info_.max_buffer_bytes) + ", maxBufferSize)");

  Buffer buffer;
  buffer.device_ = this;
  buffer.size_ = bytes;
  buffer.kind_ = kind;
  VkBufferCreateInfo create{VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
  create.size = asked;
  create.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
                 VK_BUFFER_USAGE_TRANSFER_DST_BIT;
  create.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
  VkResult r = functions_.vkCreateBuffer(device_, &create, nullptr, &buffer.buffer_);
  if (r != VK_SUCCESS) fail("vkCreateBuffer", r, request_text(bytes, kind, purpose));
  live_buffers_.fetch_add(1);

  VkMemoryRequirements requirements{};
  functions_.vkGetBufferMemoryRequirements(device_, buffer.buffer_, &requirements);
  const uint32_t type = memory_type(requirements.memoryTypeBits, kind);
  const uint32_t heap = memory_.memoryTypes[type].heapIndex;
  if (requirements.size > memory_.memoryHeaps[heap].size) out_of_memory(requirements.size, type);
  if (requirements.size > info_.max_allocation_bytes)
    fail(request_text(bytes, kind, purpose) + " exceeds the largest allocation " +
         info_.short_name() + " allows (" + bytes_text(info_.max_allocation_bytes) +
         ", maxMemoryAllocationSize)");
  VkMemoryAllocateInfo allocate{VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO};
  allocate.allocationSize = requirements.size;
  allocate.memoryTypeIndex = type;
  r = functions_.vkAllocateMemory(device_, &allocate, nullptr, &buffer.memory_);
  if (r == VK_ERROR_OUT_OF_DEVICE_MEMORY || r == VK_ERROR_OUT_OF_HOST_MEMORY)
    fail("vkAllocateMemory", r,
         "out of memory: " + request_text(bytes, kind, purpose) + "; memory heap " +
             std::to_string(heap) + " holds " + bytes_text(memory_.memoryHeaps[heap].size) +
             ", of which this device's buffers already hold " +
             bytes_text(allocated_bytes(MemoryKind::device) + allocated_bytes(MemoryKind::staging) +
                        allocated_bytes(MemoryKind::per_call) +
                        allocated_bytes(MemoryKind::readback)));
  if (r != VK_SUCCESS) fail("vkAllocateMemory", r, request_text(bytes, kind, purpose));
  buffer.allocation_size_ = requirements.size;
  allocated_[size_t(kind)].fetch_add(bytes, std::memory_order_relaxed);
  check(functions_.vkBindBufferMemory(device_, buffer.buffer_, buffer.memory_, 0),
        "vkBindBufferMemory");

  // Device buffers are mapped only where that replaces staging (unified memory); the other
  // kinds are host-visible by choice and always mapped.
  const VkMemoryPropertyFlags flags = memory_.memoryTypes[type].propertyFlags;
  if ((flags & VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT) &&
      (kind != MemoryKind::device || maps_device_memory_)) {
    void* address = nullptr;
    r = functions_.vkMapMemory(device_, buffer.memory_, 0, VK_WHOLE_SIZE, 0, &address);
    if (r != VK_SUCCESS) fail("vkMapMemory", r, request_text(bytes, kind, purpose));
    buffer.mapped_ = static_cast<std::byte*>(address);
    buffer.coherent_ = flags & VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
  }
  return buffer;
}

void Device::free_buffer(Buffer& buffer) {
  settle("freeing a buffer");
  if (buffer.mapped_) functions_.vkUnmapMemory(device_, buffer.memory_);
  if (buffer.buffer_ != VK_NULL_HANDLE) {
    functions_.vkDestroyBuffer(device_, buffer.buffer_, nullptr);
    live_buffers_.fetch_sub(1);
  }
  if (buffer.memory_ != VK_NULL_HANDLE) {
    functions_.vkFreeMemory(device_, buffer.memory_, nullptr);
    allocated_[size_t(buffer.kind_)].fetch_sub(buffer.size_, std::memory_order_relaxed);
  }
  buffer.mapped_ = nullptr;
  buffer.buffer_ = VK_NULL_HANDLE;
  buffer.memory_ = VK_NULL_HANDLE;
}

namespace {
void check_range(const Buffer& buffer, size_t offset, size_t bytes, const char* what) {
  if (offset > buffer.size() || bytes > buffer.size() - offset)
    value_error(std::string(what) + " of " + std::to_string(bytes) + " bytes at offset " +
                std::to_string(offset) + " runs past the end of a " +
                memory_kind_name(buffer.kind()) + " buffer of " + std::to_string(buffer.size()) +
                " bytes");
}
}  // namespace

void Device::upload(const Buffer& dst, size_t offset, std::span<const std::byte> data) {
  check_range(dst, offset, data.size(), "an upload");
  if (data.empty()) return;
  if (dst.mapped()) {
    std::memcpy(dst.mapped() + offset, data.data(), data.size());
    dst.flush(offset, data.size());
    return;
  }
  Buffer staging = create_buffer(std::min(data.size(), kStagingChunkBytes), MemoryKind::staging,
                                 "upload staging");
  for (size_t done = 0; done < data.size(); done += staging.size()) {
    const size_t chunk = std::min(staging.size(), data.size() - done);
    std::memcpy(staging.mapped(), data.data() + done, chunk);
    staging.flush(0, chunk);
    copy_on_queue(staging, 0, dst, offset + done, chunk);
  }
}

void Device::download(const Buffer& src, size_t offset, std::span<std::byte> data) {
  check_range(src, offset, data.size(), "a download");
  if (data.empty()) return;
  if (src.mapped()) {
    src.invalidate(offset, data.size());
    std::memcpy(data.data(), src.mapped() + offset, data.size());
    return;
  }
  Buffer readback =
      create_buffer(std::min(data.size(), kStagingChunkBytes), MemoryKind::readback, "download");
  for (size_t done = 0; done < data.size(); done += readback.size()) {
    const size_t chunk = std::min(readback.size(), data.size() - done);
    copy_on_queue(src, offset + done, readback, 0, chunk);
    readback.invalidate(0, chunk);
    std::memcpy(data.data() + done, readback.mapped(), chunk);
  }
}

void Device::copy_on_queue(const Buffer& src, size_t src_offset, const Buffer& dst,
                           size_t dst_offset, size_t bytes) {
  std::lock_guard lock(transfer_mutex_);
  // A copy whose wait timed out may still run: its command buffer is not reset under it.
  if (!is_done(transfer_fence_)) settle("a buffer copy");
  const DeviceFunctions& df = functions_;
  check(df.vkResetCommandBuffer(transfer_commands_, 0), "vkResetCommandBuffer");
  VkCommandBufferBeginInfo begin{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
  begin.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
  check(df.vkBeginCommandBuffer(transfer_commands_, &begin), "vkBeginCommandBuffer");
  // Earlier submissions' shader writes of the source (a download after a run) are waited for
  // by the copy; the host's writes of a staging buffer are visible through the submit itself.
  VkMemoryBarrier before{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
  before.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
  before.dstAccessMask = VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
  df.vkCmdPipelineBarrier(transfer_commands_,
                          VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
                          VK_PIPELINE_STAGE_TRANSFER_BIT, 0, 1, &before, 0, nullptr, 0, nullptr);
  VkBufferCopy region{src_offset, dst_offset, bytes};
  df.vkCmdCopyBuffer(transfer_commands_, src.handle(), dst.handle(), 1, &region);
  // The copy's writes reach later submissions' shaders (an upload) and the host (a download).
  VkMemoryBarrier after{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
  after.srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT;
  after.dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT |
                        VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT |
                        VK_ACCESS_HOST_READ_BIT;
  df.vkCmdPipelineBarrier(transfer_commands_, VK_PIPELINE_STAGE_TRANSFER_BIT,
                          VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT |
                              VK_PIPELINE_STAGE_HOST_BIT,
                          0, 1, &after, 0, nullptr, 0, nullptr);
  check(df.vkEndCommandBuffer(transfer_commands_), "vkEndCommandBuffer");
  check(df.vkResetFences(device_, 1, &transfer_fence_), "vkResetFences");
  submit(transfer_commands_, transfer_fence_);
  wait(transfer_fence_, wait_limit(), "a buffer copy");
}

void Device::submit(VkCommandBuffer commands, VkFence fence) {
  VkSubmitInfo submit{VK_STRUCTURE_TYPE_SUBMIT_INFO};
  submit.commandBufferCount = 1;
  submit.pCommandBuffers = &commands;
  {
    std::lock_guard lock(queue_mutex_);  // vkQueueSubmit needs the queue externally synchronised
    check(functions_.vkQueueSubmit(queue_, 1, &submit, fence), "vkQueueSubmit");
  }
  std::lock_guard lock(in_flight_mutex_);
  if (std::find(in_flight_.begin(), in_flight_.end(), fence) == in_flight_.end())
    in_flight_.push_back(fence);
}

void Device::forget(VkFence fence) {
  std::lock_guard lock(in_flight_mutex_);
  std::erase(in_flight_, fence);
}

void Device::wait(VkFence fence, std::chrono::nanoseconds timeout, const char* what) {
  const VkResult r = functions_.vkWaitForFences(device_, 1, &fence, VK_TRUE,
                                                uint64_t(std::max<int64_t>(0, timeout.count())));
  if (r == VK_TIMEOUT)
    throw VulkanError(VK_TIMEOUT,
                      "timed out after " + duration_text(timeout) + " waiting for " + what +
                          " on Vulkan device " + info_.short_name() +
                          " (the device hung, or the work takes longer than the timeout: "
                          "IRON_VULKAN_TIMEOUT_S sets it)");
  if (r == VK_ERROR_DEVICE_LOST) {
    // Nothing runs on a lost device any more: everything may be freed.
    std::lock_guard lock(in_flight_mutex_);
    in_flight_.clear();
  }
  check(r, "vkWaitForFences");
  forget(fence);
}

bool Device::is_done(VkFence fence) {
  {
    std::lock_guard lock(in_flight_mutex_);
    if (std::find(in_flight_.begin(), in_flight_.end(), fence) == in_flight_.end()) return true;
  }
  const VkResult r = functions_.vkGetFenceStatus(device_, fence);
  if (r == VK_NOT_READY) return false;
  if (r == VK_ERROR_DEVICE_LOST) {
    std::lock_guard lock(in_flight_mutex_);
    in_flight_.clear();
  }
  check(r, "vkGetFenceStatus");
  forget(fence);
  return true;
}

void Device::settle(const char* why) {
  {
    std::lock_guard lock(in_flight_mutex_);
    if (in_flight_.empty()) return;
  }
  // One queue: waiting for it to go idle waits for every fence in the list, without touching
  // fences that their owners may be destroying meanwhile. No timeout: freeing memory a shader
  // still reads is worse than any wait, and a hung GPU ends in a lost device (which returns).
  const auto started = std::chrono::steady_clock::now();
  VkResult r;
  {
    std::lock_guard lock(queue_mutex_);
    r = functions_.vkQueueWaitIdle(queue_);
  }
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  if (waited > 1.0 || r != VK_SUCCESS)
    log(LogLevel::warning, std::string("vulkan: ") + why + " waited " + std::to_string(int(waited)) +
                               " s for submissions still running on " + info_.short_name() +
                               (r == VK_SUCCESS ? "" : std::string(" (") + result_name(r) + ")"));
  std::lock_guard lock(in_flight_mutex_);
  in_flight_.clear();
}

}  // namespace iron::vulkan
