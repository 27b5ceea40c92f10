// Scalar on the Vulkan device (scalar.comp).
#include "devices/vulkan/kernel.hpp"
#include "ops/op.hpp"

namespace iron::ops {

void record_scalar(const Operator& op, const vulkan::KernelArgs& a, vulkan::CommandList& list) {
  const vulkan::Operand& y = a.out.at(0);
  if (y.dtype != i32) vulkan::unsupported(op, "an output of " + std::string(name(y.dtype)));
  if (a.scalars.size() > 8) vulkan::unsupported(op, "more than 8 terms");
  struct Push {
    vulkan::Start y;
    int32_t count, terms[8];
  } push{vulkan::start(y), int32_t(a.scalars.size()), {}};
  for (size_t i = 0; i < a.scalars.size(); ++i) push.terms[i] = vulkan::shader_word(a.scalars[i]);
  list.bind(a.device->pipeline({"scalar", {}, 2, sizeof push}));
  list.bind_buffers({y.binding(), vulkan::words_binding(a)});
  list.push_constants(push);
  list.dispatch(1);
}

}  // namespace iron::ops
