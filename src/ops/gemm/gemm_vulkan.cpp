// GEMM, ProjectionGEMM and GEMV on the Vulkan device (matmul.comp): activations, outputs and
// residuals of f32, f16 or bf16, weights of every format the CPU reads, the planner's folded
// norm, bias, residual and epilogue; a step of several weights is a dispatch per weight, and a SwiGLU
// merged in one more (the elementwise shader) after a barrier.
#include <map>

#include "devices/vulkan/kernel.hpp"
#include "ops/elementwise/elementwise.hpp"
#include "ops/elementwise/elementwise_vulkan.hpp"
#include "ops/op.hpp"

namespace iron::ops {

namespace {
uint32_t weight_kind(const Operator& op, DType t) {
  const int32_t kind = vulkan::load_kind(t);
  if (kind < 0 || t == i32) vulkan::unsupported(op, "a weight of " + std::string(name(t)));
  return uint32_t(kind);
}

// How the matmul's lanes share the work (matmul.glsl says both forms): over columns on a Vulkan
// device that is software on a CPU (lavapipe, where a read 8 elements apart per lane is a gather,
// one per multiply-add: SmolLM2 Q4_1's pp32 1.2 -> 1.9 tokens/s and tg 0.6 -> 0.8 on the Zen 3's
// two cores, `iron bench --device vulkan -p 32 -n 4 -r 1` with this variable at 0 and at 1; 3.2-3.3
// and 1.3-1.5 once the lanes shared a's elements by subgroupBroadcast rather than each reading the
// same element, itself a gather there: a decode step's matmuls 1169-1233 -> 663-672 ms by
// `iron bench --trace`), over k on a GPU, whose reads then coalesce (not measured: no GPU lent).
// The same form for every row count: a row's sums do not depend on how many rows a call holds,
// so a batch decodes as each of its sequences alone, bit for bit. IRON_VULKAN_LANES_OVER_COLUMNS=1
// or 0 takes the other form (the tests hold both to the references on one device).
bool lanes_over_columns(const vulkan::DeviceInfo& info) {
  const bool software = info.type == VK_PHYSICAL_DEVICE_TYPE_CPU;
  return vulkan::environment_choice("IRON_VULKAN_LANES_OVER_COLUMNS").value_or(software);
}

uint32_t epilogue_kind(const Operator& op) {
  if (!op.params().contains("epilogue")) return 0;
  static const std::map<std::string, uint32_t, std::less<>> kinds{
      {"none", 0}, {"relu", 1}, {"silu", 2}, {"gelu", 3}, {"gelu_tanh", 4}};
  return kinds.at(op.params().text("epilogue"));
}
}  // namespace

void record_matmul(const Operator& op, const vulkan::KernelArgs& a, vulkan::CommandList& list) {
  const Fields& p = op.params();
  const int64_t k = p.integer("K"), parts = p.integer("parts");
  const bool residual = p.flag("residual"), norm = p.flag("norm"), weighted = p.flag("norm_weighted");
  const bool bias = p.flag("bias");
  const bool col_maj = p.contains("b_col_maj") ? p.flag("b_col_maj") : true;
  const Gate gate = gate_from(p.text("then"), op.name());
  const vulkan::Operand& x = a.in.at(0);
  const uint32_t x_kind = vulkan::float_kind(op, x);
  const vulkan::Operand* g = norm && weighted ? &a.in.back() : nullptr;

  // A workgroup is one subgroup, which sums its lanes' products with subgroupAdd (and, its lanes
  // over columns, shares a's elements with subgroupBroadcast); a device without subgroup
  // arithmetic and ballot (or IRON_VULKAN_SUBGROUPS=0, which tests that path) takes 64 lanes
  // summed through shared memory instead.
  const bool subgroups = a.device->info().subgroup_arithmetic && a.device->info().subgroup_ballot &&
                         a.device->info().subgroup_size > 0 && !vulkan::disabled_by_environment("IRON_VULKAN_SUBGROUPS");
  const char* shader = subgroups ? "matmul" : "matmul_shared";
  const uint32_t lanes = subgroups ? a.device->info().subgroup_size : 64;
  // Rows of a a workgroup takes (each weight read serves them all): one for a single row.
  const int64_t max_rows = x.shape.size() < 2 ? 1 : x.shape[0];
  const uint32_t tile = max_rows == 1 ? 1 : 8;
  const bool over_columns = lanes_over_columns(a.device->info());
  for (int64_t part = 0; part < parts; ++part) {
    const vulkan::Operand& w = a.in.at(size_t(1 + part));
    const vulkan::Operand& y = a.out.at(size_t(part));
    const vulkan::Operand& r = residual ? a.in.at(2) : y;  // bound, unread without a residual
    const vulkan::Operand& gn = g ? *g : x;
    // Inputs: a, the weights, the residual, a bias per weight, the norm's weight.
    const vulkan::Operand& b = bias ? a.in.at(size_t(1 + parts + (residual ? 1 : 0) + part)) : x;  // unread without
    const int64_t n = parts == 1 ? p.integer("N") : w.shape.at(0);
    const uint32_t kind = weight_kind(op, w.dtype);
    if (!col_maj && kind >= 3) vulkan::unsupported(op, "a quantised weight stored (K, N)");
    struct Push {
      vulkan::Start a, w, y, r, g, b;
      int32_t k, n, rows;
      float epsilon;
    } push{vulkan::start(x), vulkan::start(w), vulkan::start(y), vulkan::start(r), vulkan::start(gn), vulkan::start(b),
           vulkan::shader_int(k, "K"), vulkan::shader_int(n, "N"), vulkan::rows_word(x),
           float(norm ? p.number("norm_epsilon") : 0.0)};
    const uint32_t norm_kind = norm ? (weighted ? 2 : 1) : 0;
    list.bind(a.device->pipeline(
        {shader,
         {kind, epilogue_kind(op), residual ? 1u : 0u, norm_kind, col_maj ? 1u : 0u, lanes, tile, x_kind,
          vulkan::float_kind(op, y), vulkan::float_kind(op, r), vulkan::float_kind(op, gn), bias ? 1u : 0u,
          vulkan::float_kind(op, b), over_columns ? 1u : 0u},
         7, sizeof push}));
    list.bind_buffers(
        {x.binding(), w.binding(), y.binding(), r.binding(), gn.binding(), b.binding(), vulkan::words_binding(a)});
    list.push_constants(push);
    const int64_t groups = over_columns ? (n + lanes - 1) / lanes : n;  // the loop strides past 65535
    list.dispatch(uint32_t(std::clamp<int64_t>(groups, 1, 65535)),
                  uint32_t(std::min<int64_t>((max_rows + tile - 1) / tile, 65535)));
  }
  if (gate != Gate::none) {
    // y = silu(gate) * up (or gelu_tanh(gate) * up) over the two parts' outputs, once both are written.
    list.barrier();
    record_elementwise(op, gate == Gate::silu_mul ? VulkanElementwise::silu_mul : VulkanElementwise::gelu_tanh_mul,
                       a.out.at(0), a.out.at(1), a.out.at(2), a, list);
  }
}

}  // namespace iron::ops
