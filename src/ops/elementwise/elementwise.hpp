#pragma once
#include <cmath>
#include <cstdint>
#include <vector>

#include "devices/cpu/kernel.hpp"
#include "ops/op.hpp"
namespace iron::ops {
/// Add, Sub, Mul and Div (each a subclass of Elementwise for profiles).
std::vector<OpEntry> elementwise_entries();
/// silu(a) * b in double, rounded once: the SwiGLU step's reference and portable loop.
inline float silu_mul(float a, float b) { return float(double(a) / (1.0 + std::exp(-double(a))) * double(b)); }
/// silu(a) * b over n f32 values as the SwiGLU step computes them on a processor with `f`, so a
/// matmul the planner merged a SwiGLU into (gemm_parts.cpp) gives the same bits.
void silu_mul_f32(const float* a, const float* b, float* y, int64_t n, const cpu::Features& f);
}  // namespace iron::ops
