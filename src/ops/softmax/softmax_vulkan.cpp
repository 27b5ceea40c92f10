// Softmax on the Vulkan device (softmax.comp): f32, f16 or bf16 operands.
#include "devices/vulkan/kernel.hpp"
#include "ops/op.hpp"

namespace iron::ops {

void record_softmax(const Operator& op, const vulkan::KernelArgs& a, vulkan::CommandList& list) {
  const int64_t n = op.params().integer("N");
  const vulkan::Operand &x = a.in.at(0), &y = a.out.at(0);
  const int64_t row = x.rank() < 2 ? element_count(x.shape) : row_elements(x.shape);
  struct Push {
    vulkan::Start x, y;
    int32_t rows, rows_per_row, n, valid;
    float scale;
  } push{vulkan::start(x), vulkan::start(y), x.rank() < 2 ? 1 : vulkan::shader_word(x.valid[0]),
         vulkan::shader_int(row / n, "rows"), vulkan::shader_int(n, "N"), vulkan::shader_word(x.valid.back()),
         float(op.params().number("scale"))};
  list.bind(a.device->pipeline({"softmax", {vulkan::float_kind(op, a.in.at(0)), vulkan::float_kind(op, a.out.at(0))}, 3, sizeof push}));
  list.bind_buffers({x.binding(), y.binding(), vulkan::words_binding(a)});
  list.push_constants(push);
  list.dispatch(uint32_t(std::clamp<int64_t>((x.rank() < 2 ? 1 : x.shape[0]) * (row / n), 1, 65535)));
}

}  // namespace iron::ops
