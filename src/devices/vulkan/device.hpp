// A Vulkan logical device with one compute queue, and the memory it hands out.
//
// Objects made from a Device (buffers, pipelines, command lists) must be destroyed before it,
// as in Vulkan itself. One thread uses a Device at a time, except that queue submissions and the
// pipeline cache are locked, so command lists may be submitted from several threads.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>

#include "devices/vulkan/api.hpp"
#include "devices/vulkan/instance.hpp"

namespace iron::vulkan {

class Device;
struct Pipeline;
struct PipelineKey;
class PipelineCache;

/// What a buffer is for, which decides its memory type.
enum class MemoryKind {
  device,    // weights, states, the arena: device-local (mapped as well on a unified-memory device)
  staging,   // host-to-device copies: host-visible, written by the host once, read by a copy
  per_call,  // words and small inputs the host writes before each submit: host-visible, read by
             // shaders
  readback,  // device-to-host: host-visible, cached where the device offers it (the host reads it)
};
inline constexpr int kMemoryKinds = 4;
/// "device", "staging", "per-call", "readback".
const char* memory_kind_name(MemoryKind kind);

/// How long a wait for a GPU lasts before it is an error, unless the caller or
/// IRON_VULKAN_TIMEOUT_S says otherwise: short enough that a hung GPU is reported rather than
/// waited on forever, far longer than any one call of a model takes on one.
inline constexpr std::chrono::milliseconds kDefaultWait{60'000};
/// The same for a device that runs on the host's processor (lavapipe): it cannot hang as a GPU
/// does, it only runs slowly, and on a loaded 2-core machine a whole model's prefill took past
/// 60 s (so tests failed there on a busy day). Only a shader that never ends needs a limit.
inline constexpr std::chrono::milliseconds kDefaultWaitOnTheHost{600'000};

/// A VkBuffer with its own memory, mapped for its whole life when the memory is host-visible.
/// Move-only; destroyed (and its bytes uncounted) with the object.
class Buffer {
 public:
  Buffer() = default;
  ~Buffer();
  Buffer(Buffer&& other) noexcept;
  Buffer& operator=(Buffer&& other) noexcept;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  explicit operator bool() const { return buffer_ != VK_NULL_HANDLE; }
  VkBuffer handle() const { return buffer_; }
  size_t size() const { return size_; }
  MemoryKind kind() const { return kind_; }
  /// The host address of byte 0, or null when the memory is not host-visible.
  std::byte* mapped() const { return mapped_; }
  /// Host writes to [offset, offset + bytes) become visible to the device: a no-op on coherent
  /// memory, vkFlushMappedMemoryRanges (whole atoms) otherwise. Call before the submit that reads.
  void flush(size_t offset, size_t bytes) const;
  /// Device writes become visible to host reads of the range (after the wait that saw them done).
  void invalidate(size_t offset, size_t bytes) const;

 private:
  friend class Device;
  void release();
  // flush and invalidate: `call` (either, the two have one type) over the range's whole atoms,
  // on memory that is mapped and not coherent.
  void sync(PFN_vkFlushMappedMemoryRanges DeviceFunctions::*call, const char* what, size_t offset,
            size_t bytes) const;

  Device* device_ = nullptr;
  VkBuffer buffer_ = VK_NULL_HANDLE;
  VkDeviceMemory memory_ = VK_NULL_HANDLE;
  size_t size_ = 0;
  VkDeviceSize allocation_size_ = 0;
  MemoryKind kind_ = MemoryKind::device;
  std::byte* mapped_ = nullptr;
  bool coherent_ = true;
};

struct DeviceOptions {
  /// Copy through staging buffers even where device memory could be mapped (unified memory):
  /// a discrete GPU's path, testable on lavapipe. IRON_VULKAN_STAGING=1 sets it for create().
  bool force_staging = false;
};

class Device {
 public:
  /// The device IRON_VULKAN_DEVICE names, else the best one (see choose_device), on the
  /// process's instance (Instance::shared). Throws iron::Error when there is no loader, no device, or a bad override.
  static std::unique_ptr<Device> create();
  /// Device `index` of `instance`'s list (which must be usable).
  static std::unique_ptr<Device> create(std::shared_ptr<Instance> instance, uint32_t index,
                                        const DeviceOptions& options = {});
  ~Device();
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;

  const DeviceInfo& info() const { return info_; }
  /// The optional features enabled on this device: what info().features offered, all of it.
  /// Shaders that need one check here and take a slower variant when it is missing.
  const DeviceFeatures& enabled() const { return enabled_; }
  const Instance& instance() const { return *instance_; }
  const DeviceFunctions& functions() const { return functions_; }
  VkDevice handle() const { return device_; }
  VkPipelineCache pipeline_cache() const { return pipeline_cache_; }

  /// A buffer of `bytes` for `kind`; `purpose` names it in errors ("weights", "arena"). Throws
  /// iron::Error when the bytes exceed the heap ("out of device memory", with the bytes asked for
  /// and the heap size), the device's largest allocation or buffer, or the driver refuses.
  Buffer create_buffer(size_t bytes, MemoryKind kind, std::string_view purpose = "");
  /// Bytes held by live buffers of `kind` (what was asked for, not the drivers' rounding).
  uint64_t allocated_bytes(MemoryKind kind) const {
    return allocated_[size_t(kind)].load(std::memory_order_relaxed);
  }
  /// Buffers that map device-local memory directly (unified memory): uploads and downloads are
  /// copies on the host, with no staging buffer or queue submission.
  bool maps_device_memory() const { return maps_device_memory_; }

  /// Copies `data` into `dst` at `offset`: in place when it is mapped, else through staging
  /// buffers (at most 64 MiB each) and copies on the queue, waited for before returning.
  void upload(const Buffer& dst, size_t offset, std::span<const std::byte> data);
  /// Copies `data.size()` bytes of `src` from `offset` into `data`, the same ways.
  void download(const Buffer& src, size_t offset, std::span<std::byte> data);

  /// The compute pipeline for `key`, created on first use and the same object after (see
  /// pipeline.hpp). Thread-safe.
  const Pipeline& pipeline(const PipelineKey& key);

  /// Submits `commands` to the queue, signalling `fence` when done (queue access is locked).
  /// The fence counts as in flight until a wait() or is_done() sees it signalled.
  void submit(VkCommandBuffer commands, VkFence fence);
  /// Waits for `fence`: returns when it is signalled, throws iron::Error after `timeout` ("timed
  /// out after N ms waiting for <what>") or on a lost device. Never waits without end. After a
  /// timeout the submission is still in flight: whatever it reads stays alive (see settle()).
  void wait(VkFence fence, std::chrono::nanoseconds timeout, const char* what);
  /// Whether `fence`'s submission is done (no wait): true also when it was never submitted.
  bool is_done(VkFence fence);
  /// How long wait() calls that name no timeout wait: kDefaultWait on a GPU,
  /// kDefaultWaitOnTheHost on a device of type CPU, IRON_VULKAN_TIMEOUT_S seconds where set.
  std::chrono::nanoseconds wait_limit() const {
    return std::chrono::nanoseconds(wait_limit_ns_.load(std::memory_order_relaxed));
  }
  void set_wait_limit(std::chrono::nanoseconds limit) {
    wait_limit_ns_.store(limit.count(), std::memory_order_relaxed);
  }
  /// Blocks until nothing submitted is still running, however long that takes (a lost device
  /// ends it too), before something a submission may read is freed: a wait that timed out leaves
  /// its work running, and freeing its buffers or commands under it crashed the process
  /// (lavapipe read freed memory). Returns at once when nothing is in flight. `why` goes in the
  /// log line that says it waits.
  void settle(const char* why);
  /// Forgets `fence` (its owner destroys it): after settle() or a wait that saw it signalled.
  void forget(VkFence fence);

 private:
  Device() = default;
  uint32_t memory_type(uint32_t allowed_types, MemoryKind kind) const;
  // One-shot copies for upload/download on a device that does not map its memory.
  void copy_on_queue(const Buffer& src, size_t src_offset, const Buffer& dst, size_t dst_offset,
                     size_t bytes);
  friend class Buffer;
  void free_buffer(Buffer& buffer);

  std::shared_ptr<Instance> instance_;
  DeviceInfo info_;
  DeviceFeatures enabled_;
  VkPhysicalDeviceMemoryProperties memory_{};
  VkDevice device_ = VK_NULL_HANDLE;
  DeviceFunctions functions_;
  VkQueue queue_ = VK_NULL_HANDLE;
  std::mutex queue_mutex_;
  VkPipelineCache pipeline_cache_ = VK_NULL_HANDLE;
  std::unique_ptr<PipelineCache> pipelines_;
  bool maps_device_memory_ = false;
  std::array<std::atomic<uint64_t>, kMemoryKinds> allocated_{};
  std::atomic<int64_t> live_buffers_{0};
  std::atomic<int64_t> wait_limit_ns_{0};
  // Fences submitted and not yet seen signalled (few: a list's, a chain's, the transfer's).
  std::mutex in_flight_mutex_;
  std::vector<VkFence> in_flight_;
  // For copy_on_queue: one command buffer and fence, reused under their own lock.
  std::mutex transfer_mutex_;
  VkCommandPool transfer_pool_ = VK_NULL_HANDLE;
  VkCommandBuffer transfer_commands_ = VK_NULL_HANDLE;
  VkFence transfer_fence_ = VK_NULL_HANDLE;
};

/// The device compiled graphs run on (device "vulkan"), made on first use.
Device& shared_device();

}  // namespace iron::vulkan
