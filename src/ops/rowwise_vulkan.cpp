// RMSNorm and LayerNorm on the Vulkan device (rowwise.comp): f32, f16 or bf16 operands.
#include "devices/vulkan/kernel.hpp"
#include "ops/op.hpp"

namespace iron::ops {

void record_rowwise(const Operator& op, const vulkan::KernelArgs& a, vulkan::CommandList& list) {
  const Fields& p = op.params();
  const int64_t n = p.integer("N");
  const bool weighted = p.flag("weighted");
  const vulkan::Operand &x = a.in.at(0), &y = a.out.at(0);
  const vulkan::Operand& g = weighted ? a.in.at(1) : x;
  const int64_t row = x.shape.size() < 2 ? element_count(x.shape) : row_elements(x.shape);
  struct Push {
    vulkan::Start x, g, y;
    int32_t rows, rows_per_row, n;
    float epsilon;
  } push{vulkan::start(x), vulkan::start(g), vulkan::start(y),
         x.shape.size() < 2 ? 1 : vulkan::shader_word(x.valid[0]),
         vulkan::shader_int(row / n, "rows"), vulkan::shader_int(n, "N"), float(p.number("epsilon"))};
  const int64_t max_rows = (x.shape.size() < 2 ? 1 : x.shape[0]) * (row / n);
  list.bind(a.device->pipeline({"rowwise",
                                {op.name() == "LayerNorm" ? 1u : 0u, weighted ? 1u : 0u, vulkan::float_kind(op, x),
                                 vulkan::float_kind(op, g), vulkan::float_kind(op, y)},
                                4, sizeof push}));
  list.bind_buffers({x.binding(), g.binding(), y.binding(), vulkan::words_binding(a)});
  list.push_constants(push);
  list.dispatch(uint32_t(std::clamp<int64_t>(max_rows, 1, 65535)));
}

}  // namespace iron::ops
