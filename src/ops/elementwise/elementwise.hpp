#pragma once
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "devices/cpu/kernel.hpp"
#include "ops/op.hpp"
namespace iron::ops {
/// Add, Sub, Mul, Div, SwiGLU and GeGLU (each a subclass of Elementwise for profiles).
std::vector<OpEntry> elementwise_entries();
/// silu(a) * b in double, rounded once: the SwiGLU step's reference and portable loop.
inline float silu_mul(float a, float b) { return float(double(a) / (1.0 + std::exp(-double(a))) * double(b)); }
/// silu(a) * b over n f32 values as the SwiGLU step computes them on a processor with `f`, so a
/// matmul the planner merged a SwiGLU into (gemm_parts.cpp) gives the same bits.
void silu_mul_f32(const float* a, const float* b, float* y, int64_t n, const cpu::Features& f);
/// gelu_tanh(a) rounded to f32, times b in f32: the GeGLU step's reference and portable loop (a
/// GELU step then a Mul step's bits).
float gelu_tanh_mul(float a, float b);
/// The gated feed-forwards' middles a matmul of two weights may finish with (ProjectionGEMM's
/// "then"): none, silu(gate) * up or gelu_tanh(gate) * up.
enum class Gate { none, silu_mul, gelu_tanh_mul };
/// "none", "silu_mul" or "gelu_tanh_mul" (a value error names `what` otherwise).
Gate gate_from(const std::string& name, const std::string& what);
/// y = gate(a) * b over n f32 values as the SwiGLU or GeGLU step computes them with `f`.
void gated_f32(Gate g, const float* a, const float* b, float* y, int64_t n, const cpu::Features& f);
/// One value of it, as the steps' references compute it.
float gated(Gate g, float a, float b);
/// gelu_tanh(a) * b over n f32 values as the GeGLU step computes them on a processor with `f`:
/// the GELU step's values (gelu_rows), each rounded to f32, times b in f32, so that the step (and
/// a matmul the planner merged it into) gives the bits a GELU step then a Mul step gave.
void gelu_tanh_mul_f32(const float* a, const float* b, float* y, int64_t n, const cpu::Features& f);
}  // namespace iron::ops
