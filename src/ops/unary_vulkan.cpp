// SiLU and GELU on the Vulkan device (unary.comp): f32, f16 or bf16 operands.
#include "devices/vulkan/kernel.hpp"
#include "ops/op.hpp"

namespace iron::ops {

void record_unary(const Operator& op, const vulkan::KernelArgs& a, vulkan::CommandList& list) {
  const vulkan::Operand &x = a.in.at(0), &y = a.out.at(0);
  uint32_t function = 0;
  if (op.name() == "GELU") function = op.params().text("approximate") == "tanh" ? 2 : 1;
  struct Push {
    vulkan::Start x, y;
    int32_t rows, row_elements;
  } push{vulkan::start(x), vulkan::start(y), vulkan::rows_word(x),
         vulkan::shader_int(x.shape.empty() ? 1 : row_elements(x.shape), "a row")};
  list.bind(a.device->pipeline({"unary", {function, vulkan::float_kind(op, x), vulkan::float_kind(op, y)}, 3, sizeof push}));
  list.bind_buffers({x.binding(), y.binding(), vulkan::words_binding(a)});
  list.push_constants(push);
  list.dispatch(vulkan::groups(std::max<int64_t>(1, element_count(x.shape)), 256));
}

}  // namespace iron::ops
