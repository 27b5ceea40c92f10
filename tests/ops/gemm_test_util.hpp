// What the matmul kernel tests share: a dense operand over a host buffer (they run kernels with
// cpu::run_kernel), and random weights of every dtype.
#pragma once

#include <cstring>
#include <random>
#include <vector>

#include "devices/cpu/kernel.hpp"
#include "devices/cpu/thread_pool.hpp"
#include "iron/handle.hpp"

namespace iron::gemm_testing {

/// A contiguous operand over `base`, its leading axis bounded by `rows`.
inline cpu::Operand operand(DType t, const Shape& shape, char* base, cpu::WordRef rows) {
  return cpu::dense_operand(t, shape, base, rows);
}

/// Random bytes of a weight (N, K) of `t`, magnitudes like a trained Linear's (|w| < 0.3 about,
/// so that medium's bf16 inputs meet its tolerance): float kinds from U(-0.25, 0.25); block kinds
/// random quants (and K-quant sub-block scales) under small random f16 scales and minimums.
inline std::vector<char> random_weight(DType t, int64_t n, int64_t k, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  const DTypeInfo& ti = info(t);
  std::vector<char> bytes(size_t(n * k / ti.block * ti.bytes));
  if (!ti.quantised) {
    std::vector<float> v(size_t(n * k));
    for (auto& x : v) x = u(rng) * 0.25f;
    from_f32(t, v.data(), bytes.data(), n * k);
    return bytes;
  }
  for (auto& b : bytes) b = char(rng() & 0xff);
  // Each kind's f16 fields: (byte offset, largest magnitude), its scale first; the scale's bound
  // times the largest quant (times the largest sub-block scale) is about 0.3.
  struct Half {
    int at;
    float magnitude;
  };
  std::vector<Half> halves;
  switch (t) {
    case DType::q8_0: halves = {{0, 0.002f}}; break;
    case DType::q4_0: halves = {{0, 0.02f}}; break;
    case DType::q4_1: halves = {{0, 0.02f}, {2, 0.1f}}; break;
    case DType::q5_0: halves = {{0, 0.015f}}; break;
    case DType::q5_1: halves = {{0, 0.006f}, {2, 0.1f}}; break;
    case DType::q4_k: halves = {{0, 2.5e-4f}, {2, 1.5e-3f}}; break;
    case DType::q5_k: halves = {{0, 1.2e-4f}, {2, 1.5e-3f}}; break;
    case DType::q6_k: halves = {{208, 6e-5f}}; break;
    default: break;
  }
  for (size_t b = 0; b < bytes.size(); b += size_t(ti.bytes))
    for (const Half& h : halves) {
      const uint16_t v = f32_to_f16(u(rng) * h.magnitude);
      std::memcpy(bytes.data() + b + size_t(h.at), &v, 2);
    }
  return bytes;
}

}  // namespace iron::gemm_testing
