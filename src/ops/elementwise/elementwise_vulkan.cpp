// Add, Sub, Mul, Div and SwiGLU on the Vulkan device (elementwise.comp): f32 operands.
#include <map>

#include "devices/vulkan/kernel.hpp"
#include "ops/op.hpp"

namespace iron::ops {

void record_elementwise(const Operator& op, const vulkan::KernelArgs& a, vulkan::CommandList& list) {
  static const std::map<std::string, uint32_t, std::less<>> kOperations{
      {"Add", 0}, {"Sub", 1}, {"Mul", 2}, {"Div", 3}, {"SwiGLU", 4}};
  vulkan::require_f32(op, a);
  const vulkan::Operand &x = a.in.at(0), &b = a.in.at(1), &y = a.out.at(0);
  const int64_t elements = element_count(y.shape);
  struct Push {
    vulkan::Start a, b, y;
    int32_t rows, row_elements, width;
  } push{vulkan::start(x), vulkan::start(b), vulkan::start(y), vulkan::rows_word(y),
         vulkan::shader_int(y.shape.empty() ? 1 : row_elements(y.shape), "a row"),
         element_count(b.shape) == element_count(x.shape) ? 0 : vulkan::shader_int(element_count(b.shape), "a row")};
  list.bind(a.device->pipeline({"elementwise", {kOperations.at(op.name())}, 4, sizeof push}));
  list.bind_buffers({x.binding(), b.binding(), y.binding(), vulkan::words_binding(a)});
  list.push_constants(push);
  list.dispatch(vulkan::groups(elements, 256));
}

}  // namespace iron::ops
