// The elementwise shader (elementwise.comp) as other operators' recorders dispatch it: a matmul
// with a SwiGLU or a GeGLU merged in finishes with it.
#pragma once

#include "devices/vulkan/kernel.hpp"

namespace iron::ops {

/// The shader's operations, its specialization constant 0.
enum class VulkanElementwise : uint32_t { add, sub, mul, div, silu_mul, gelu_tanh_mul };

/// Records y = a op b over y's valid rows (b: a's shape, or one row broadcast); f32, f16 or bf16
/// operands (errors name `op`).
void record_elementwise(const Operator& op, VulkanElementwise operation, const vulkan::Operand& a,
                        const vulkan::Operand& b, const vulkan::Operand& y, const vulkan::KernelArgs& args,
                        vulkan::CommandList& list);

}  // namespace iron::ops
