// RoPE on the Vulkan device (rope.comp): f32, f16 or bf16 operands.
#include "devices/vulkan/kernel.hpp"
#include "ops/op.hpp"

namespace iron::ops {

void record_rope(const Operator& op, const vulkan::KernelArgs& a, vulkan::CommandList& list) {
  const Fields& p = op.params();
  const int64_t d = p.integer("head_dim"), heads = p.integer("heads");
  const vulkan::Operand &x = a.in.at(0), &t = a.in.at(1), &y = a.out.at(0);
  struct Push {
    vulkan::Start x, t, y;
    int32_t rows, heads, head_dim;
  } push{vulkan::start(x), vulkan::start(t), vulkan::start(y), x.rank() == 1 ? 1 : vulkan::shader_word(x.valid[0]),
         vulkan::shader_int(heads, "heads"), vulkan::shader_int(d, "head_dim")};
  const uint32_t halves = p.text("mode") == "halves" ? 1 : 0, cos_sin = p.text("table") == "cos_sin" ? 1 : 0;
  list.bind(a.device->pipeline({"rope",
                                {halves, cos_sin, vulkan::float_kind(op, a.in.at(0)), vulkan::float_kind(op, a.in.at(1)),
                                 vulkan::float_kind(op, a.out.at(0))},
                                4, sizeof push}));
  list.bind_buffers({x.binding(), t.binding(), y.binding(), vulkan::words_binding(a)});
  list.push_constants(push);
  const int64_t rows = x.rank() == 1 ? 1 : x.shape[0];
  list.dispatch(vulkan::groups(rows * heads * d / 2, 64));
}

}  // namespace iron::ops
