// Emit on the Vulkan device (emit.comp): a dispatch per carried value.
#include "devices/vulkan/kernel.hpp"
#include "ops/op.hpp"

namespace iron::ops {

void record_emit(const Operator& op, const vulkan::KernelArgs& a, vulkan::CommandList& list) {
  const vulkan::Operand& out = a.out.at(0);
  if (out.dtype != i32) vulkan::unsupported(op, "an output of " + std::string(name(out.dtype)));
  const std::string& sources = op.params().text("sources");
  size_t h = 0, s = 0;
  for (size_t i = 0; i < sources.size(); ++i) {
    const bool handle = sources[i] == 'h';
    const vulkan::Operand& src = handle ? a.in.at(h++) : out;
    const int32_t kind = vulkan::load_kind(src.dtype);
    if (handle && kind < 0) vulkan::unsupported(op, "a carried handle of " + std::string(name(src.dtype)));
    struct Push {
      vulkan::Start src, dst;
      int32_t item, value;
    } push{vulkan::start(src), vulkan::start(out), int32_t(i), handle ? 0 : vulkan::shader_word(a.scalars.at(s++))};
    list.bind(a.device->pipeline({"emit", {handle ? 1u : 0u, uint32_t(handle ? kind : 6)}, 3, sizeof push}));
    list.bind_buffers({src.binding(), out.binding(), vulkan::words_binding(a)});
    list.push_constants(push);
    list.dispatch(1);
  }
}

}  // namespace iron::ops
