// Per-target helpers for kernels written once with Highway (devices/cpu/highway.hpp): e^x, and
// loads of a cache's or a weight's float kinds into f32 lanes, and the norms' last step. Included by such a file after
// devices/cpu/hwy_each_target.h, inside its per-target compilation (Highway's -inl.h convention:
// the guard flips with HWY_TARGET_TOGGLE, so every target gets its own copy).
// NOLINT(build/include_guard)
#if defined(IRON_DEVICES_CPU_HWY_LANES_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef IRON_DEVICES_CPU_HWY_LANES_INL_H_
#undef IRON_DEVICES_CPU_HWY_LANES_INL_H_
#else
#define IRON_DEVICES_CPU_HWY_LANES_INL_H_
#endif

#include <cstdint>

#include "devices/cpu/hwy_each_target.h"
#include "iron/dtype.hpp"

#if IRON_HWY_PICKED_PASS
IRON_HWY_BEGIN(iron::cpu::lanes)

// e^x to about 2 ulp for x in [-87.3, 88.3] (held there): x = n ln2 + r with |r| <= ln2/2 (ln2
// split in two for exactness), a degree-6 polynomial for e^r, and 2^n made in the exponent bits
// (n in [-126, 127], a normal float). Highway's own Exp (contrib/math) took four times as long
// here: it covers the whole range and is not inlined.
template <class D, class V = hn::Vec<D>>
HWY_INLINE V Exp(D d, V x) {
  const hn::RebindToSigned<D> di;
  x = hn::Min(hn::Max(x, hn::Set(d, -87.3f)), hn::Set(d, 88.3f));
  const V n = hn::Round(hn::Mul(x, hn::Set(d, 1.44269504088896341f)));
  V r = hn::NegMulAdd(n, hn::Set(d, 0.693145751953125f), x);
  r = hn::NegMulAdd(n, hn::Set(d, 1.428606765330187e-06f), r);
  V p = hn::Set(d, 1.0f / 720);
  p = hn::MulAdd(p, r, hn::Set(d, 1.0f / 120));
  p = hn::MulAdd(p, r, hn::Set(d, 1.0f / 24));
  p = hn::MulAdd(p, r, hn::Set(d, 1.0f / 6));
  p = hn::MulAdd(p, r, hn::Set(d, 0.5f));
  p = hn::MulAdd(p, r, hn::Set(d, 1.0f));
  p = hn::MulAdd(p, r, hn::Set(d, 1.0f));
#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
  // AVX-512 scales by 2^n in one instruction (vscalefps), where the exponent bits take three:
  // SwiGLU over a SmolLM2 prefill's feed-forward rows was 2% slower without it.
  if constexpr (sizeof(hn::TFromD<D>) == 4 && hn::MaxLanes(d) == 16) return V{_mm512_scalef_ps(p.raw, n.raw)};
#endif
  // n + 127 in the low bits of a float near 2^23, shifted into the exponent (no checked
  // conversion to int, which cost a tenth of GELU's time).
  const V two_n = hn::BitCast(d, hn::ShiftLeft<23>(hn::BitCast(di, hn::Add(n, hn::Set(d, 8388608.0f + 127.0f)))));
  return hn::Mul(p, two_n);
}

/// The lanes of `d` from p, values of T (f32, bf16 or f16), as f32.
template <DType T, class D>
HWY_INLINE hn::Vec<D> LoadF32(D d, const char* p) {
  if constexpr (T == DType::f32) {
    return hn::LoadU(d, reinterpret_cast<const float*>(p));
  } else if constexpr (T == DType::bf16) {
    const hn::Rebind<hwy::bfloat16_t, D> db;
    return hn::PromoteTo(d, hn::LoadU(db, reinterpret_cast<const hwy::bfloat16_t*>(p)));
  } else {
    static_assert(T == DType::f16);
    const hn::Rebind<hwy::float16_t, D> dh;
    return hn::PromoteTo(d, hn::LoadU(dh, reinterpret_cast<const hwy::float16_t*>(p)));
  }
}

/// The f16 at p (a block's scale) as a float.
HWY_INLINE float F16At(const char* p) {
  const hn::CappedTag<float, 1> d1;
  const hn::Rebind<hwy::float16_t, decltype(d1)> h1;
  return hn::GetLane(hn::PromoteTo(d1, hn::LoadU(h1, reinterpret_cast<const hwy::float16_t*>(p))));
}

// A normalised row: y = (x - mean) * scale (* weight, where given), each in double and rounded
// once to f32, as the norms' scalar rows do: LayerNorm's (kCentred), and RMSNorm's, whose mean is
// 0 and whose lanes skip the subtraction (exact either way: x - 0 is x).
template <bool kCentred>
HWY_INLINE void NormalisedRow(const float* x, const float* weight, float* y, int64_t n, double mean, double scale) {
  const hn::ScalableTag<double> dd;
  const hn::Rebind<float, decltype(dd)> df;  // as many floats as dd has doubles
  const int64_t lanes = int64_t(hn::Lanes(dd));
  const auto m = hn::Set(dd, mean), s = hn::Set(dd, scale);
  int64_t i = 0;
  for (; i + lanes <= n; i += lanes) {
    const auto v = hn::PromoteTo(dd, hn::LoadU(df, x + i));
    auto t = hn::Mul(kCentred ? hn::Sub(v, m) : v, s);
    if (weight) t = hn::Mul(t, hn::PromoteTo(dd, hn::LoadU(df, weight + i)));
    hn::StoreU(hn::DemoteTo(df, t), df, y + i);
  }
  for (; i < n; ++i) y[i] = float((double(x[i]) - mean) * scale * (weight ? double(weight[i]) : 1.0));
}

IRON_HWY_END
#endif  // IRON_HWY_PICKED_PASS

#endif  // IRON_DEVICES_CPU_HWY_LANES_INL_H_
