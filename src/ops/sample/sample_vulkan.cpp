// Sample on the Vulkan device (sample.comp): greedy, or at a temperature with top_k up to
// kVulkanMaxTopK and top_p, over logits of f32, f16 or bf16, from the params or a per-call settings operand;
// the draw is ops::sample_uniform's, computed in the shader. A batch of rows takes a workgroup per row.
#include <algorithm>

#include "devices/vulkan/kernel.hpp"
#include "ops/op.hpp"
#include "ops/sample/sample.hpp"

namespace iron::ops {

void record_sample(const Operator& op, const vulkan::KernelArgs& a, vulkan::CommandList& list) {
  const vulkan::Operand &x = a.in.at(0), &y = a.out.at(0);
  if (y.dtype != i32) vulkan::unsupported(op, "a token of " + std::string(name(y.dtype)));
  const Fields& params = op.params();
  const int64_t n = params.integer("N"), top_k = params.integer("top_k");
  if (params.number("temperature") > 0 && !vulkan_draws(top_k, n))
    vulkan::unsupported(op, "top_k " + std::to_string(top_k) + " of " + std::to_string(n) + " logits (at most " +
                                std::to_string(kVulkanMaxTopK) + ")");
  const int64_t rows = params.integer("rows");
  const bool per_row = a.in.size() > 3;
  if ((rows > 1 || a.in.size() > 2) && !per_row)
    vulkan::unsupported(op, "a batch of rows without its settings, steps and positions");
  if (per_row && (a.in[2].dtype != i32 || a.in[3].dtype != i32))
    vulkan::unsupported(op, "steps and positions other than i32");
  const bool has_settings = a.in.size() > 1;
  const vulkan::Operand& s = has_settings ? a.in.at(1) : x;
  if (has_settings && s.dtype != i32) vulkan::unsupported(op, "settings of " + std::string(name(s.dtype)));
  const auto seed = uint64_t(params.integer("seed"));
  struct Push {
    vulkan::Start x, y, s;
    int32_t n, has_settings, counter, position;
    float temperature, top_p;
    int32_t top_k;
    uint32_t seed_lo, seed_hi;
    int32_t per_row;
    vulkan::Start steps, positions;
  } push{vulkan::start(x),
         vulkan::start(y),
         vulkan::start(s),
         vulkan::shader_int(n, "N"),
         has_settings ? 1 : 0,
         a.scalars.size() > 0 ? vulkan::shader_word(a.scalars[0]) : 0,
         a.scalars.size() > 1 ? vulkan::shader_word(a.scalars[1]) : 0,
         float(params.number("temperature")),
         float(params.number("top_p")),
         vulkan::shader_int(top_k, "top_k"),
         uint32_t(seed),
         uint32_t(seed >> 32),
         per_row ? 1 : 0,
         per_row ? vulkan::start(a.in[2]) : vulkan::Start{0, 0},
         per_row ? vulkan::start(a.in[3]) : vulkan::Start{0, 0}};
  const vulkan::Operand& steps = per_row ? a.in[2] : x;
  const vulkan::Operand& positions = per_row ? a.in[3] : x;
  list.bind(a.device->pipeline({"sample", {vulkan::float_kind(op, x)}, 6, sizeof push}));
  list.bind_buffers({x.binding(), y.binding(), s.binding(), steps.binding(), positions.binding(), vulkan::words_binding(a)});
  list.push_constants(push);
  list.dispatch(uint32_t(std::clamp<int64_t>(rows, 1, 65535)));
}

}  // namespace iron::ops
