// Add, Sub, Mul, Div, SwiGLU and GeGLU on the Vulkan device (elementwise.comp): f32, f16 or bf16 operands.
#include "ops/elementwise/elementwise_vulkan.hpp"

#include <map>

#include "ops/op.hpp"

namespace iron::ops {

void record_elementwise(const Operator& op, VulkanElementwise operation, const vulkan::Operand& x,
                        const vulkan::Operand& b, const vulkan::Operand& y, const vulkan::KernelArgs& a,
                        vulkan::CommandList& list) {
  struct Push {
    vulkan::Start a, b, y;
    int32_t rows, row_elements, width;
  } push{vulkan::start(x), vulkan::start(b), vulkan::start(y), vulkan::rows_word(y),
         vulkan::shader_int(y.shape.empty() ? 1 : row_elements(y.shape), "a row"),
         element_count(b.shape) == element_count(x.shape) ? 0 : vulkan::shader_int(element_count(b.shape), "a row")};
  list.bind(a.device->pipeline({"elementwise",
                                {uint32_t(operation), vulkan::float_kind(op, x), vulkan::float_kind(op, b),
                                 vulkan::float_kind(op, y)},
                                4, sizeof push}));
  list.bind_buffers({x.binding(), b.binding(), y.binding(), vulkan::words_binding(a)});
  list.push_constants(push);
  list.dispatch(vulkan::groups(element_count(y.shape), 256));
}

void record_elementwise(const Operator& op, const vulkan::KernelArgs& a, vulkan::CommandList& list) {
  static const std::map<std::string, VulkanElementwise, std::less<>> kOperations{
      {"Add", VulkanElementwise::add},
      {"Sub", VulkanElementwise::sub},
      {"Mul", VulkanElementwise::mul},
      {"Div", VulkanElementwise::div},
      {"SwiGLU", VulkanElementwise::silu_mul},
      {"GeGLU", VulkanElementwise::gelu_tanh_mul}};
  record_elementwise(op, kOperations.at(op.name()), a.in.at(0), a.in.at(1), a.out.at(0), a, list);
}

}  // namespace iron::ops
