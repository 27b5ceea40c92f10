// Sample on the Vulkan device (sample.comp): greedy, over f32 logits.
#include "devices/vulkan/kernel.hpp"
#include "ops/op.hpp"

namespace iron::ops {

void record_sample(const Operator& op, const vulkan::KernelArgs& a, vulkan::CommandList& list) {
  const vulkan::Operand &x = a.in.at(0), &y = a.out.at(0);
  if (x.dtype != f32) vulkan::unsupported(op, "logits of " + std::string(name(x.dtype)));
  if (y.dtype != i32) vulkan::unsupported(op, "a token of " + std::string(name(y.dtype)));
  if (op.params().number("temperature") > 0) vulkan::unsupported(op, "sampling at a temperature (greedy only)");
  struct Push {
    vulkan::Start x, y;
    int32_t n;
  } push{vulkan::start(x), vulkan::start(y), vulkan::shader_int(op.params().integer("N"), "N")};
  list.bind(a.device->pipeline({"sample", {}, 3, sizeof push}));
  list.bind_buffers({x.binding(), y.binding(), vulkan::words_binding(a)});
  list.push_constants(push);
  list.dispatch(1);
}

}  // namespace iron::ops
