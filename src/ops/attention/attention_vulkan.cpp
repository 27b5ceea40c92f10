// Attention on the Vulkan device (attention.comp): queries and results of f32, f16 or bf16, caches
// of those or q8_0, head_dim up to 128, a sliding window or none, one sequence or a batched
// decode's slots, or an encoder's segments (bidirectional, with the per-call lengths operand).
#include <cmath>

#include "devices/vulkan/kernel.hpp"
#include "ops/op.hpp"

namespace iron::ops {

void record_attention(const Operator& op, const vulkan::KernelArgs& a, vulkan::CommandList& list) {
  const Fields& p = op.params();
  const int64_t segment = p.integer("segment");
  if (segment > 0 && (a.in.size() < 4 || a.in[3].dtype != i32))
    vulkan::unsupported(op, "segments without an i32 lengths operand");
  const int64_t slot_rows = p.integer("slot_rows");
  if (slot_rows > 0 && (a.in.size() < 5 || a.in[3].dtype != i32 || a.in[4].dtype != i32))
    vulkan::unsupported(op, "slots without i32 positions and slots operands");
  const int64_t heads = p.integer("heads"), kv_heads = p.integer("kv_heads"), d = p.integer("head_dim");
  if (d > 128) vulkan::unsupported(op, "a head_dim above 128");
  const double scale = p.number("scale") == 0 ? 1.0 / std::sqrt(double(d)) : p.number("scale");
  const vulkan::Operand &q = a.in.at(0), &k = a.in.at(1), &v = a.in.at(2), &y = a.out.at(0);
  auto cache_kind = [&](const vulkan::Operand& c) {
    if (c.dtype != f32 && c.dtype != f16 && c.dtype != bf16 && c.dtype != DType::q8_0)
      vulkan::unsupported(op, "a cache of " + std::string(name(c.dtype)));
    return uint32_t(vulkan::load_kind(c.dtype));
  };
  const uint32_t key_kind = cache_kind(k), value_kind = cache_kind(v);
  struct Push {
    vulkan::Start q, k, v, y;
    int32_t rows, start, k_rows, v_rows, heads, kv_heads, ctx;
    float scale;
    int32_t window;
    vulkan::Start positions, slots;
  } push{vulkan::start(q), vulkan::start(k), vulkan::start(v), vulkan::start(y), vulkan::shader_word(q.valid[0]),
         vulkan::shader_word(a.scalars.at(0)), vulkan::shader_word(k.valid[0]), vulkan::shader_word(v.valid[0]),
         vulkan::shader_int(heads, "heads"), vulkan::shader_int(kv_heads, "kv_heads"),
         vulkan::shader_int(p.integer("ctx"), "ctx"), float(scale), vulkan::shader_int(p.integer("window"), "window"),
         slot_rows > 0 || segment > 0 ? vulkan::start(a.in[3]) : vulkan::Start{0, 0},
         slot_rows > 0 ? vulkan::start(a.in[4]) : vulkan::Start{0, 0}};
  // The fourth operand: a batched decode's positions, or the segments' lengths.
  const vulkan::Operand& positions = slot_rows > 0 || segment > 0 ? a.in[3] : q;
  const vulkan::Operand& slots = slot_rows > 0 ? a.in[4] : q;
  list.bind(a.device->pipeline({"attention",
                                {uint32_t(d), key_kind, value_kind, vulkan::float_kind(op, q), vulkan::float_kind(op, y),
                                 uint32_t(vulkan::shader_int(slot_rows, "slot_rows")),
                                 uint32_t(vulkan::shader_int(segment, "segment"))},
                                7,
                                sizeof push}));
  list.bind_buffers({q.binding(), k.binding(), v.binding(), y.binding(), positions.binding(), slots.binding(),
                     vulkan::words_binding(a)});
  list.push_constants(push);
  list.dispatch(uint32_t(heads), uint32_t(std::clamp<int64_t>(q.shape[0], 1, 65535)));
}

}  // namespace iron::ops
