// A command list: one Vulkan command buffer recorded once and submitted many times.
//
// This is how a compiled graph runs on Vulkan: lowering records every dispatch of an image once,
// with its buffers bound; each call writes its per-call words into a host-visible buffer and
// submits the same commands again. Only when buffers move (the arena grows) is it recorded
// again: begin() resets it.
//
//   CommandList list(device);
//   list.begin();
//   list.bind(device.pipeline({"fill", {64}, 1, 12}));
//   list.bind_buffers({{&y, 0, y.size()}});
//   list.push_constants(fill_words);
//   list.dispatch(groups);
//   list.barrier();                     // the next dispatch reads what this one wrote
//   ...
//   list.host_barrier();                // the host reads results after the wait
//   list.end();
//   for each call: write words; list.submit(); list.wait();
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <span>
#include <vector>

#include "devices/vulkan/api.hpp"
#include "devices/vulkan/device.hpp"
#include "devices/vulkan/pipeline.hpp"

namespace iron::vulkan {

/// One storage-buffer binding: `range` bytes of `buffer` from `offset`. The offset must be a
/// multiple of the device's minStorageBufferOffsetAlignment and the range at most its
/// maxStorageBufferRange.
struct Binding {
  const Buffer* buffer = nullptr;
  size_t offset = 0;
  size_t range = 0;
};

class CommandList {
 public:
  explicit CommandList(Device& device);
  /// Waits for a submission still in flight, however long it runs, before freeing anything.
  ~CommandList();
  CommandList(const CommandList&) = delete;
  CommandList& operator=(const CommandList&) = delete;

  /// Starts recording, dropping what was recorded before (and its descriptor sets and
  /// timestamps). Not while a submission is in flight: wait() first.
  void begin();
  /// Dispatches from here on use `pipeline` (from Device::pipeline, which outlives the list).
  void bind(const Pipeline& pipeline);
  /// Binds one buffer range to each of the bound pipeline's bindings, in order, through a
  /// descriptor set allocated now and kept until the next begin(). Throws iron::Error for a
  /// count that is not the pipeline's, a range past its buffer's end or past
  /// maxStorageBufferRange (naming it), or a misaligned offset.
  void bind_buffers(std::span<const Binding> bindings);
  void bind_buffers(std::initializer_list<Binding> bindings) {
    bind_buffers(std::span(bindings.begin(), bindings.size()));
  }
  /// The bound pipeline's push constants: exactly its push_constant_bytes. Recorded now: the
  /// same values go with every submit (per-call values belong in a buffer).
  void push_constants(const void* data, size_t bytes);
  template <typename T>
  void push_constants(const T& value) {
    push_constants(&value, sizeof value);
  }
  /// Keeps `buffer` (constants a recorder made for its dispatches, such as a gather's fixed
  /// rows) alive as long as this recording: until the next begin() or the list's end.
  const Buffer& keep(Buffer buffer);
  /// Runs x * y * z workgroups of the bound pipeline with the bound buffers.
  void dispatch(uint32_t x, uint32_t y = 1, uint32_t z = 1);
  /// Everything recorded before (dispatches, copies) finishes its writes before anything
  /// recorded after reads or writes: between dependent dispatches.
  void barrier();
  /// Writes recorded before become visible to the host once wait() returns: last, before
  /// results are read from mapped memory.
  void host_barrier();
  /// Copies `bytes` from `src` at `src_offset` to `dst` at `dst_offset` (a barrier() orders it
  /// against dispatches).
  void copy(const Buffer& src, size_t src_offset, const Buffer& dst, size_t dst_offset,
            size_t bytes);
  /// Writes a timestamp when the work recorded before it is done; returns its index for
  /// timestamps_ns(). Throws when the device has no timestamps (DeviceInfo::timestamps).
  uint32_t timestamp();
  /// Ends recording; the list may now be submitted any number of times.
  void end();

  /// Submits the recorded commands. Throws when recording is not ended or the previous
  /// submission was not waited for.
  void submit();
  /// Waits for the submission: throws iron::Error after `timeout` (the submission then stays
  /// in flight: wait again, or the destructor will) or when the device is lost. Without a
  /// timeout: the device's wait_limit().
  void wait();
  void wait(std::chrono::nanoseconds timeout);
  /// Whether the last submission is done (no wait); true when nothing was submitted.
  bool done() const;
  /// After a wait: each timestamp()'s time in nanoseconds, from the device's clock (only the
  /// differences mean anything).
  std::vector<double> timestamps_ns() const;

  size_t dispatches() const { return dispatches_; }

 private:
  enum class State { empty, recording, recorded, pending };
  void require(State state, const char* action) const;
  VkDescriptorSet allocate_set(VkDescriptorSetLayout layout);

  Device& device_;
  const DeviceFunctions& f_;
  VkCommandPool pool_ = VK_NULL_HANDLE;
  VkCommandBuffer commands_ = VK_NULL_HANDLE;
  VkFence fence_ = VK_NULL_HANDLE;
  // Descriptor sets come from a list of pools: when one is full another is made; begin()
  // resets them all.
  std::vector<VkDescriptorPool> descriptor_pools_;
  size_t current_pool_ = 0;
  VkQueryPool queries_ = VK_NULL_HANDLE;
  uint32_t timestamps_ = 0;
  State state_ = State::empty;
  const Pipeline* pipeline_ = nullptr;
  bool buffers_bound_ = false;
  bool ran_ = false;  // a submission of this recording was waited for: its timestamps exist
  size_t dispatches_ = 0;
  std::vector<std::unique_ptr<Buffer>> kept_;  // keep(): stable addresses, bound by the recording
};

}  // namespace iron::vulkan
