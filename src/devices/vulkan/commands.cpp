// Recording, submitting and waiting for a command list.
#include "devices/vulkan/commands.hpp"

#include <string>

#include "devices/vulkan/errors.hpp"
#include "iron/error.hpp"
#include "iron/log.hpp"

namespace iron::vulkan {

namespace {

// Sets and descriptors per descriptor pool. A decode step of a small model records a few hundred
// dispatches of up to 8 buffers; a larger image takes a second pool, and so on.
constexpr uint32_t kSetsPerPool = 256;
constexpr uint32_t kDescriptorsPerPool = kSetsPerPool * 8;
// Timestamps per recording: enough for one around each dispatch of a large image.
constexpr uint32_t kMaxTimestamps = 4096;

const char* state_name(int state) {
  static const char* const names[] = {"empty", "recording", "recorded", "in flight"};
  return names[state];
}

}  // namespace

CommandList::CommandList(Device& device) : device_(device), f_(device.functions()) {
  VkCommandPoolCreateInfo pool{VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
  pool.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
  pool.queueFamilyIndex = device.info().compute_queue_family;
  check(f_.vkCreateCommandPool(device.handle(), &pool, nullptr, &pool_), "vkCreateCommandPool");
  try {
    VkCommandBufferAllocateInfo allocate{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
    allocate.commandPool = pool_;
    allocate.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
    allocate.commandBufferCount = 1;
    check(f_.vkAllocateCommandBuffers(device.handle(), &allocate, &commands_),
          "vkAllocateCommandBuffers");
    VkFenceCreateInfo fence{VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
    check(f_.vkCreateFence(device.handle(), &fence, nullptr, &fence_), "vkCreateFence");
  } catch (...) {
    f_.vkDestroyCommandPool(device.handle(), pool_, nullptr);  // frees the command buffer too
    throw;
  }
}

CommandList::~CommandList() {
  // A submission whose wait timed out still reads these objects and the buffers it binds:
  // nothing is freed under it, however long it runs (Device::settle).
  if (state_ == State::pending) device_.settle("destroying a command list");
  device_.forget(fence_);
  const VkDevice device = device_.handle();
  if (queries_ != VK_NULL_HANDLE) f_.vkDestroyQueryPool(device, queries_, nullptr);
  for (VkDescriptorPool p : descriptor_pools_) f_.vkDestroyDescriptorPool(device, p, nullptr);
  f_.vkDestroyFence(device, fence_, nullptr);
  f_.vkDestroyCommandPool(device, pool_, nullptr);
}

void CommandList::require(State state, const char* action) const {
  if (state_ != state)
    value_error(std::string("vulkan command list: cannot ") + action + " while " +
                state_name(int(state_)) + " (it must be " + state_name(int(state)) + ")");
}

const Buffer& CommandList::keep(Buffer buffer) {
  kept_.push_back(std::make_unique<Buffer>(std::move(buffer)));
  return *kept_.back();
}

void CommandList::begin() {
  if (state_ == State::pending)
    value_error(
        "vulkan command list: cannot begin() while a submission is in flight: wait() first");
  const VkDevice device = device_.handle();
  check(f_.vkResetCommandBuffer(commands_, 0), "vkResetCommandBuffer");
  for (VkDescriptorPool p : descriptor_pools_)
    check(f_.vkResetDescriptorPool(device, p, 0), "vkResetDescriptorPool");
  current_pool_ = 0;
  timestamps_ = 0;
  pipeline_ = nullptr;
  buffers_bound_ = false;
  dispatches_ = 0;
  kept_.clear();
  ran_ = false;
  // No ONE_TIME_SUBMIT: the point is to submit it again and again. No SIMULTANEOUS_USE either:
  // a submit waits for the previous one.
  VkCommandBufferBeginInfo begin{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
  check(f_.vkBeginCommandBuffer(commands_, &begin), "vkBeginCommandBuffer");
  state_ = State::recording;
}

void CommandList::bind(const Pipeline& pipeline) {
  require(State::recording, "bind a pipeline");
  f_.vkCmdBindPipeline(commands_, VK_PIPELINE_BIND_POINT_COMPUTE, pipeline.pipeline);
  pipeline_ = &pipeline;
  // Each pipeline has its own set layout: its buffers are bound after it.
  buffers_bound_ = pipeline.key.bindings == 0;
}

VkDescriptorSet CommandList::allocate_set(VkDescriptorSetLayout layout) {
  const VkDevice device = device_.handle();
  for (;;) {
    const bool fresh = current_pool_ == descriptor_pools_.size();
    if (fresh) {
      const VkDescriptorPoolSize size{VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, kDescriptorsPerPool};
      VkDescriptorPoolCreateInfo create{VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO};
      create.maxSets = kSetsPerPool;
      create.poolSizeCount = 1;
      create.pPoolSizes = &size;
      VkDescriptorPool pool = VK_NULL_HANDLE;
      check(f_.vkCreateDescriptorPool(device, &create, nullptr, &pool), "vkCreateDescriptorPool");
      descriptor_pools_.push_back(pool);
    }
    VkDescriptorSetAllocateInfo allocate{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO};
    allocate.descriptorPool = descriptor_pools_[current_pool_];
    allocate.descriptorSetCount = 1;
    allocate.pSetLayouts = &layout;
    VkDescriptorSet set = VK_NULL_HANDLE;
    const VkResult r = f_.vkAllocateDescriptorSets(device, &allocate, &set);
    if (r == VK_SUCCESS) return set;
    // A full pool: the next one (made above when there is none).
    if (r != VK_ERROR_OUT_OF_POOL_MEMORY && r != VK_ERROR_FRAGMENTED_POOL)
      check(r, "vkAllocateDescriptorSets");
    if (fresh) fail("vkAllocateDescriptorSets", r, "a fresh descriptor pool is full");
    ++current_pool_;
  }
}

void CommandList::bind_buffers(std::span<const Binding> bindings) {
  require(State::recording, "bind buffers");
  if (!pipeline_) value_error("vulkan command list: bind_buffers() before a pipeline is bound");
  const PipelineKey& key = pipeline_->key;
  if (bindings.size() != key.bindings)
    value_error("vulkan pipeline " + key.str() + " takes " + std::to_string(key.bindings) +
                " buffers, not " + std::to_string(bindings.size()));
  const DeviceInfo& info = device_.info();
  std::vector<VkDescriptorBufferInfo> buffers(bindings.size());
  for (size_t i = 0; i < bindings.size(); ++i) {
    const Binding& b = bindings[i];
    const std::string where = "binding " + std::to_string(i) + " of pipeline " + key.str();
    if (!b.buffer || !*b.buffer) value_error(where + ": no buffer");
    if (b.range == 0) value_error(where + ": an empty range");
    if (b.range > info.max_storage_buffer_range)
      value_error(where + ": " + std::to_string(b.range) +
                  " bytes exceed the most one storage-buffer binding may span on " +
                  info.short_name() + " (maxStorageBufferRange " +
                  std::to_string(info.max_storage_buffer_range) + " bytes, " +
                  bytes_text(info.max_storage_buffer_range) + ")");
    if (b.offset > b.buffer->size() || b.range > b.buffer->size() - b.offset)
      value_error(where + ": " + std::to_string(b.range) + " bytes at offset " +
                  std::to_string(b.offset) + " run past the end of its buffer (" +
                  std::to_string(b.buffer->size()) + " bytes)");
    if (b.offset % info.min_storage_buffer_offset_alignment != 0)
      value_error(where + ": offset " + std::to_string(b.offset) + " is not a multiple of " +
                  std::to_string(info.min_storage_buffer_offset_alignment) +
                  " (minStorageBufferOffsetAlignment)");
    buffers[i] = {b.buffer->handle(), b.offset, b.range};
  }
  const VkDescriptorSet set = allocate_set(pipeline_->set_layout);
  std::vector<VkWriteDescriptorSet> writes(bindings.size());
  for (size_t i = 0; i < bindings.size(); ++i) {
    writes[i] = {VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET};
    writes[i].dstSet = set;
    writes[i].dstBinding = uint32_t(i);
    writes[i].descriptorCount = 1;
    writes[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
    writes[i].pBufferInfo = &buffers[i];
  }
  f_.vkUpdateDescriptorSets(device_.handle(), uint32_t(writes.size()), writes.data(), 0, nullptr);
  f_.vkCmdBindDescriptorSets(commands_, VK_PIPELINE_BIND_POINT_COMPUTE, pipeline_->layout, 0, 1,
                             &set, 0, nullptr);
  buffers_bound_ = true;
}

void CommandList::push_constants(const void* data, size_t bytes) {
  require(State::recording, "push constants");
  if (!pipeline_) value_error("vulkan command list: push_constants() before a pipeline is bound");
  if (bytes != pipeline_->key.push_constant_bytes)
    value_error("vulkan pipeline " + pipeline_->key.str() + " takes " +
                std::to_string(pipeline_->key.push_constant_bytes) +
                " bytes of push constants, not " + std::to_string(bytes));
  if (bytes == 0) return;
  f_.vkCmdPushConstants(commands_, pipeline_->layout, VK_SHADER_STAGE_COMPUTE_BIT, 0,
                        uint32_t(bytes), data);
}

void CommandList::dispatch(uint32_t x, uint32_t y, uint32_t z) {
  require(State::recording, "dispatch");
  if (!pipeline_) value_error("vulkan command list: dispatch() before a pipeline is bound");
  if (!buffers_bound_)
    value_error("vulkan command list: dispatch() of " + pipeline_->key.str() +
                " before its buffers are bound");
  const DeviceInfo& info = device_.info();
  const uint32_t counts[3] = {x, y, z};
  for (int i = 0; i < 3; ++i)
    if (counts[i] > info.max_workgroup_count[i])
      value_error("vulkan dispatch of " + pipeline_->key.str() + ": " + std::to_string(counts[i]) +
                  " workgroups along " + "xyz"[i] + " exceed maxComputeWorkGroupCount " +
                  std::to_string(info.max_workgroup_count[i]));
  f_.vkCmdDispatch(commands_, x, y, z);
  ++dispatches_;
}

void CommandList::barrier() {
  require(State::recording, "record a barrier");
  // One global memory barrier, not one per buffer: between dependent dispatches the whole
  // queue waits anyway, and it keeps lowering from tracking which buffers each step touches.
  VkMemoryBarrier barrier{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
  barrier.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
  barrier.dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT |
                          VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
  const VkPipelineStageFlags stages =
      VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT;
  f_.vkCmdPipelineBarrier(commands_, stages, stages, 0, 1, &barrier, 0, nullptr, 0, nullptr);
}

void CommandList::host_barrier() {
  require(State::recording, "record a host barrier");
  VkMemoryBarrier barrier{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
  barrier.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
  barrier.dstAccessMask = VK_ACCESS_HOST_READ_BIT;
  f_.vkCmdPipelineBarrier(commands_,
                          VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
                          VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &barrier, 0, nullptr, 0, nullptr);
}

void CommandList::copy(const Buffer& src, size_t src_offset, const Buffer& dst, size_t dst_offset,
                       size_t bytes) {
  require(State::recording, "record a copy");
  if (src_offset > src.size() || bytes > src.size() - src_offset || dst_offset > dst.size() ||
      bytes > dst.size() - dst_offset)
    value_error("vulkan copy of " + std::to_string(bytes) + " bytes from offset " +
                std::to_string(src_offset) + " of " + std::to_string(src.size()) + " to offset " +
                std::to_string(dst_offset) + " of " + std::to_string(dst.size()) +
                " runs past a buffer's end");
  if (bytes == 0) return;
  const VkBufferCopy region{src_offset, dst_offset, bytes};
  f_.vkCmdCopyBuffer(commands_, src.handle(), dst.handle(), 1, &region);
}

uint32_t CommandList::timestamp() {
  require(State::recording, "write a timestamp");
  const DeviceInfo& info = device_.info();
  if (!info.timestamps)
    value_error("Vulkan device " + info.short_name() +
                " cannot write timestamps on its compute queue");
  if (timestamps_ == kMaxTimestamps)
    value_error("vulkan command list: more than " + std::to_string(kMaxTimestamps) +
                " timestamps in one recording");
  if (queries_ == VK_NULL_HANDLE) {
    VkQueryPoolCreateInfo create{VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO};
    create.queryType = VK_QUERY_TYPE_TIMESTAMP;
    create.queryCount = kMaxTimestamps;
    check(f_.vkCreateQueryPool(device_.handle(), &create, nullptr, &queries_), "vkCreateQueryPool");
  }
  // Queries must be reset before each write; recorded here, the reset runs on every submit.
  if (timestamps_ == 0) f_.vkCmdResetQueryPool(commands_, queries_, 0, kMaxTimestamps);
  f_.vkCmdWriteTimestamp(commands_, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, queries_, timestamps_);
  return timestamps_++;
}

void CommandList::end() {
  require(State::recording, "end");
  check(f_.vkEndCommandBuffer(commands_), "vkEndCommandBuffer");
  state_ = State::recorded;
}

void CommandList::submit() {
  require(State::recorded, "submit");
  check(f_.vkResetFences(device_.handle(), 1, &fence_), "vkResetFences");
  device_.submit(commands_, fence_);
  state_ = State::pending;
}

void CommandList::wait() { wait(device_.wait_limit()); }

void CommandList::wait(std::chrono::nanoseconds timeout) {
  if (state_ != State::pending) return;
  try {
    device_.wait(fence_, timeout, "a command list");
  } catch (const VulkanError& e) {
    // A lost device will never signal the fence: nothing is in flight any more.
    if (e.result() == VK_ERROR_DEVICE_LOST) state_ = State::recorded;
    throw;
  }
  state_ = State::recorded;
  ran_ = true;
}

bool CommandList::done() const {
  if (state_ != State::pending) return true;
  return device_.is_done(fence_);
}

std::vector<double> CommandList::timestamps_ns() const {
  require(State::recorded, "read timestamps");
  if (timestamps_ == 0) return {};
  // Unwritten queries would make VK_QUERY_RESULT_WAIT_BIT wait forever.
  if (!ran_) value_error("vulkan command list: timestamps read before a submission was waited for");
  std::vector<uint64_t> ticks(timestamps_);
  check(f_.vkGetQueryPoolResults(device_.handle(), queries_, 0, timestamps_,
                                 ticks.size() * sizeof(uint64_t), ticks.data(), sizeof(uint64_t),
                                 VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT),
        "vkGetQueryPoolResults");
  std::vector<double> ns(timestamps_);
  for (uint32_t i = 0; i < timestamps_; ++i)
    ns[i] = double(ticks[i]) * device_.info().timestamp_period_ns;
  return ns;
}

}  // namespace iron::vulkan
