// Sample on the Vulkan device (sample.comp): greedy, over f32 logits. Per-call settings are read
// for their temperature only: a row at a temperature gets token -1 (not sampled here yet).
#include "devices/vulkan/kernel.hpp"
#include "ops/op.hpp"

namespace iron::ops {

void record_sample(const Operator& op, const vulkan::KernelArgs& a, vulkan::CommandList& list) {
  const vulkan::Operand &x = a.in.at(0), &y = a.out.at(0);
  if (x.dtype != f32) vulkan::unsupported(op, "logits of " + std::string(name(x.dtype)));
  if (y.dtype != i32) vulkan::unsupported(op, "a token of " + std::string(name(y.dtype)));
  if (op.params().number("temperature") > 0) vulkan::unsupported(op, "sampling at a temperature (greedy only)");
  const bool has_settings = a.in.size() > 1;
  const vulkan::Operand& s = has_settings ? a.in.at(1) : x;
  if (has_settings && s.dtype != i32) vulkan::unsupported(op, "settings of " + std::string(name(s.dtype)));
  struct Push {
    vulkan::Start x, y, s;
    int32_t n, has_settings;
  } push{vulkan::start(x), vulkan::start(y), vulkan::start(s), vulkan::shader_int(op.params().integer("N"), "N"),
         has_settings ? 1 : 0};
  list.bind(a.device->pipeline({"sample", {}, 4, sizeof push}));
  list.bind_buffers({x.binding(), y.binding(), s.binding(), vulkan::words_binding(a)});
  list.push_constants(push);
  list.dispatch(1);
}

}  // namespace iron::ops
