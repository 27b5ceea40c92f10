// The pipeline cache: shader modules by name, pipelines by key.
#include "devices/vulkan/pipeline.hpp"

#include <functional>

#include "devices/vulkan/device.hpp"
#include "devices/vulkan/errors.hpp"
#include "devices/vulkan/shaders.hpp"
#include "iron/error.hpp"

namespace iron::vulkan {

std::string PipelineKey::str() const {
  std::string text = escaped(shader, 60) + " [";
  for (size_t i = 0; i < specialization.size(); ++i) {
    if (i) text += ' ';
    text += std::to_string(specialization[i]);
  }
  text += "] " + std::to_string(bindings) + (bindings == 1 ? " binding, " : " bindings, ") +
          std::to_string(push_constant_bytes) + " B push constants";
  return text;
}

size_t PipelineKeyHash::operator()(const PipelineKey& key) const {
  size_t h = std::hash<std::string>()(key.shader);
  auto mix = [&h](uint64_t v) {
    h ^= std::hash<uint64_t>()(v) + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  };
  for (uint32_t v : key.specialization) mix(v);
  mix(key.specialization.size());
  mix(key.bindings);
  mix(key.push_constant_bytes);
  return h;
}

PipelineCache::~PipelineCache() {
  const DeviceFunctions& f = device_.functions();
  const VkDevice device = device_.handle();
  for (auto& [key, p] : pipelines_) {
    f.vkDestroyPipeline(device, p->pipeline, nullptr);
    f.vkDestroyPipelineLayout(device, p->layout, nullptr);
    f.vkDestroyDescriptorSetLayout(device, p->set_layout, nullptr);
  }
  for (auto& [name, module] : modules_) f.vkDestroyShaderModule(device, module, nullptr);
}

size_t PipelineCache::size() const {
  std::lock_guard lock(mutex_);
  return pipelines_.size();
}

VkShaderModule PipelineCache::module(const std::string& shader) {
  if (auto it = modules_.find(shader); it != modules_.end()) return it->second;
  const std::span<const uint32_t> code = find_shader(shader);
  if (code.empty()) {
    std::string names;
    for (const std::string& n : shader_names()) names += (names.empty() ? "" : ", ") + n;
    value_error("no Vulkan shader named '" + escaped(shader, 60) + "' (embedded: " + names + ")");
  }
  VkShaderModuleCreateInfo create{VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO};
  create.codeSize = code.size_bytes();
  create.pCode = code.data();
  VkShaderModule module = VK_NULL_HANDLE;
  const VkResult r =
      device_.functions().vkCreateShaderModule(device_.handle(), &create, nullptr, &module);
  if (r != VK_SUCCESS) fail("vkCreateShaderModule", r, "shader " + shader);
  modules_.emplace(shader, module);
  return module;
}

const Pipeline& PipelineCache::get(const PipelineKey& key) {
  std::lock_guard lock(mutex_);
  if (auto it = pipelines_.find(key); it != pipelines_.end()) return *it->second;

  const DeviceInfo& info = device_.info();
  if (key.push_constant_bytes % 4 != 0 || key.push_constant_bytes > info.max_push_constant_bytes)
    value_error("pipeline " + key.str() +
                ": push constants must be a multiple of 4 bytes and at most " +
                std::to_string(info.max_push_constant_bytes) + " (maxPushConstantsSize of " +
                info.short_name() + ")");
  const VkShaderModule shader = module(key.shader);
  const DeviceFunctions& f = device_.functions();
  const VkDevice device = device_.handle();

  // Made piece by piece; whatever exists when a call fails is destroyed with `made`.
  auto made = std::make_unique<Pipeline>();
  made->key = key;
  struct Cleanup {
    const DeviceFunctions& f;
    VkDevice device;
    Pipeline* p;
    ~Cleanup() {
      if (!p) return;
      if (p->pipeline != VK_NULL_HANDLE) f.vkDestroyPipeline(device, p->pipeline, nullptr);
      if (p->layout != VK_NULL_HANDLE) f.vkDestroyPipelineLayout(device, p->layout, nullptr);
      if (p->set_layout != VK_NULL_HANDLE)
        f.vkDestroyDescriptorSetLayout(device, p->set_layout, nullptr);
    }
  } cleanup{f, device, made.get()};

  std::vector<VkDescriptorSetLayoutBinding> bindings(key.bindings);
  for (uint32_t i = 0; i < key.bindings; ++i) {
    bindings[i].binding = i;
    bindings[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
    bindings[i].descriptorCount = 1;
    bindings[i].stageFlags = VK_SHADER_STAGE_COMPUTE_BIT;
  }
  VkDescriptorSetLayoutCreateInfo set_layout{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO};
  set_layout.bindingCount = key.bindings;
  set_layout.pBindings = bindings.data();
  check(f.vkCreateDescriptorSetLayout(device, &set_layout, nullptr, &made->set_layout),
        "vkCreateDescriptorSetLayout");

  VkPushConstantRange push{VK_SHADER_STAGE_COMPUTE_BIT, 0, key.push_constant_bytes};
  VkPipelineLayoutCreateInfo layout{VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO};
  layout.setLayoutCount = 1;
  layout.pSetLayouts = &made->set_layout;
  layout.pushConstantRangeCount = key.push_constant_bytes ? 1 : 0;
  layout.pPushConstantRanges = &push;
  check(f.vkCreatePipelineLayout(device, &layout, nullptr, &made->layout),
        "vkCreatePipelineLayout");

  std::vector<VkSpecializationMapEntry> entries(key.specialization.size());
  for (uint32_t i = 0; i < entries.size(); ++i)
    entries[i] = {i, i * uint32_t(sizeof(uint32_t)), sizeof(uint32_t)};
  VkSpecializationInfo specialization{uint32_t(entries.size()), entries.data(),
                                      key.specialization.size() * sizeof(uint32_t),
                                      key.specialization.data()};
  VkComputePipelineCreateInfo create{VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO};
  create.stage.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO;
  create.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
  create.stage.module = shader;
  create.stage.pName = "main";
  create.stage.pSpecializationInfo = entries.empty() ? nullptr : &specialization;
  create.layout = made->layout;
  const VkResult r = f.vkCreateComputePipelines(device, device_.pipeline_cache(), 1, &create,
                                                nullptr, &made->pipeline);
  if (r != VK_SUCCESS) fail("vkCreateComputePipelines", r, "pipeline " + key.str());

  cleanup.p = nullptr;
  const Pipeline& result = *made;
  pipelines_.emplace(key, std::move(made));
  return result;
}

}  // namespace iron::vulkan
