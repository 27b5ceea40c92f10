// silu(a) * b over f32 rows in vector lanes (the SwiGLU step, and a feed-forward's gate and up
// projections finished in one step: gemm_parts.cpp), written once with Highway
// (devices/cpu/highway.hpp) for every target it has here: a / (1 + e^-a) * b with a vector e^x.
#include <cstddef>
#include <cstdint>

#define HWY_TARGET_INCLUDE "ops/elementwise/swiglu_hwy.cpp"
#include "devices/cpu/hwy_each_target.h"

#include "devices/cpu/hwy_lanes-inl.h"

#if IRON_HWY_PICKED_PASS
IRON_HWY_BEGIN(iron::ops::swiglu_hwy)

using D = hn::ScalableTag<float>;
using V = hn::Vec<D>;

V silu_mul(D d, V a, V b) {
  const V e = cpu::lanes::HWY_NAMESPACE::Exp(d, hn::Neg(a));
  return hn::Mul(hn::Div(a, hn::Add(hn::Set(d, 1.0f), e)), b);
}

void silu_mul_rows(const float* a, const float* b, float* y, int64_t n) {
  const D d;
  const int64_t lanes = int64_t(hn::Lanes(d));
  int64_t i = 0;
  for (; i + lanes <= n; i += lanes) hn::StoreU(silu_mul(d, hn::LoadU(d, a + i), hn::LoadU(d, b + i)), d, y + i);
  if (i < n) {  // the tail through the same lanes, padded with zeros
    HWY_ALIGN float ta[HWY_MAX_BYTES / sizeof(float)] = {}, tb[HWY_MAX_BYTES / sizeof(float)] = {};
    for (int64_t j = i; j < n; ++j) ta[j - i] = a[j], tb[j - i] = b[j];
    hn::Store(silu_mul(d, hn::Load(d, ta), hn::Load(d, tb)), d, ta);
    for (int64_t j = i; j < n; ++j) y[j] = ta[j - i];
  }
}

IRON_HWY_END
#endif  // IRON_HWY_PICKED_PASS

#if HWY_ONCE
#include "devices/cpu/highway.hpp"

namespace iron::ops {

bool silu_mul_vector(const float* a, const float* b, float* y, int64_t n, const cpu::Features& f) {
  return cpu::run_picked(IRON_HWY_PICK(f, swiglu_hwy, silu_mul_rows), a, b, y, n);
}

}  // namespace iron::ops
#endif
