// Compute pipelines from the embedded shaders, created once per key and reused: lowering asks for
// the same operator with the same constants many times (every layer's matmul), and a pipeline
// costs a shader compile in the driver. The driver's own VkPipelineCache sits underneath, so a
// pipeline made again after the cache is dropped is cheaper too.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "devices/vulkan/api.hpp"

namespace iron::vulkan {

class Device;

/// What makes a pipeline: the shader, its specialization constants and its interface.
struct PipelineKey {
  std::string shader;                    // a name find_shader knows ("fill")
  std::vector<uint32_t> specialization;  // constant_id i takes specialization[i]
  uint32_t bindings = 0;                 // storage buffers at bindings 0 .. bindings-1 of set 0
  uint32_t push_constant_bytes = 0;      // a multiple of 4, at most the device's limit

  bool operator==(const PipelineKey&) const = default;
  /// "fill [64] 1 binding, 12 B push constants": for messages.
  std::string str() const;
};

struct PipelineKeyHash {
  size_t operator()(const PipelineKey& key) const;
};

/// A created pipeline and the layouts command lists bind it with. Owned by the cache.
struct Pipeline {
  PipelineKey key;
  VkPipeline pipeline = VK_NULL_HANDLE;
  VkPipelineLayout layout = VK_NULL_HANDLE;
  VkDescriptorSetLayout set_layout = VK_NULL_HANDLE;
};

class PipelineCache {
 public:
  explicit PipelineCache(Device& device) : device_(device) {}
  ~PipelineCache();
  PipelineCache(const PipelineCache&) = delete;
  PipelineCache& operator=(const PipelineCache&) = delete;

  /// The pipeline for `key`: the same object for equal keys, for the cache's life. Throws
  /// iron::Error for an unknown shader (listing the embedded ones), push constants past the
  /// device's limit, or a shader the driver refuses.
  const Pipeline& get(const PipelineKey& key);
  /// How many pipelines were created (for tests: a second get of a key creates none).
  size_t size() const;

 private:
  VkShaderModule module(const std::string& shader);

  Device& device_;
  mutable std::mutex mutex_;
  std::unordered_map<PipelineKey, std::unique_ptr<Pipeline>, PipelineKeyHash> pipelines_;
  std::unordered_map<std::string, VkShaderModule> modules_;  // by shader name, shared by its keys
};

}  // namespace iron::vulkan
